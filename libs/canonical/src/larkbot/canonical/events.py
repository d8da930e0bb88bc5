"""Canonical events: what the platforms said, in one shape (SPEC §1), published on ``events.<p>.<chat>``.

Decisions:

- Every event carries both clocks: ``received_at_ms`` (local, captured at ingress before any await; it is
  per-process and never reorders committed events) and ``timestamp_sec`` (platform server time, what the
  model is shown), plus the ingress's ``utc_offset_min`` at capture.
- ``dedup_key`` is derived from the platform payload and is stable across redeliveries (Feishu message id,
  ``recall:<message_id>``, ``reaction:<message>:<emoji>:<user>:<action>``; Telegram message id plus edit
  date and state). It is the pipeline's unique key and, with the platform and the event's fingerprint, the
  ``Nats-Msg-Id`` (:mod:`.fingerprint`).
- Identity is the platform id (Feishu ``ou_…`` open_id, Telegram user id as a string); names in
  :class:`Sender` are snapshots taken when the event arrived, never identity.
- ``edit`` is the full new state of the message, not a diff. ``reaction`` carries ``removed`` (not
  ``added``) so that the common case is the default and matches the rendered ``removed?`` attribute.
- A platform that embeds the message an event points at (Telegram's ``reply_to_message`` and
  ``pinned_message``) has it carried as a :class:`QuotedMessage`, so the reply or the pin can be shown even
  when that message is not in the context. The context's own copy wins when it has one.
- Forum topics (Telegram ``message_thread_id`` of a topic message): ``MessageEvent.thread_id`` is the topic
  and ``thread_name`` its name when the payload carries it; a forum group stays one chat.
- Visible happenings without a kind of their own (a video chat started, a description changed, a
  platform's system message) are one :class:`ChatNotice` each: a ``type`` word and what the line says.
- Typing is not an event (:class:`TypingSignal` on the core subject ``typing.<p>.<chat>``).
- Decode a payload of ``events.>`` with :data:`EVENT_ADAPTER` (through ``codec.decode_as``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, TypeAdapter

from ._base import EpochMs, EpochSec, Id, NonEmptyStr, UtcOffsetMin, WireModel
from .content import Attachment, AttachmentType, Content
from .names import Platform

__all__ = [
    "EVENT_ADAPTER",
    "Attributes",
    "BotAdded",
    "BotIdentity",
    "BotRemoved",
    "CanonicalEvent",
    "ChatNotice",
    "ChatPhotoChanged",
    "ChatRenamed",
    "ChatType",
    "DeleteEvent",
    "EditEvent",
    "ForwardInfo",
    "MemberLeft",
    "MembersJoined",
    "MessageEvent",
    "MessagePinned",
    "QuotedMessage",
    "ReactionEvent",
    "RuntimeEvent",
    "Sender",
    "ServiceAction",
    "ServiceEvent",
    "TopicChanged",
    "TypingSignal",
]

#: Telegram's chat types; Feishu ``p2p`` maps to ``private`` and every Feishu group to ``group``.
ChatType = Literal["private", "group", "supergroup", "channel"]


class Sender(WireModel):
    """A person or bot as seen in one event: ``id`` is identity, the rest a snapshot."""

    id: Id
    display_name: str
    username: str | None = None
    is_bot: bool = False


class ForwardInfo(WireModel):
    """Where a forwarded message came from, as far as the platform discloses it (all optional: hidden
    senders only leave a name). A message forwarded from a chat or channel names the chat
    (``from_chat_id``, ``from_chat_title``); ``from_name`` is then the author's signature, if any."""

    from_name: str | None = None
    from_id: Id | None = None
    from_chat_id: Id | None = None
    from_chat_title: str | None = None
    date_sec: EpochSec | None = None


def _unique(value: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    keys = [key for key, _ in value]
    if len(set(keys)) != len(keys):
        raise ValueError("attribute keys must be unique")
    return value


#: Ordered key/value pairs (rendered in this order); keys are unique and non-empty.
Attributes = Annotated[tuple[tuple[NonEmptyStr, str], ...], AfterValidator(_unique)]


class QuotedMessage(WireModel):
    """A message as another event carries it (the target of a reply, the message pinned): its sender and
    content when it was embedded, and the types of its attachments (never their files)."""

    sender: Sender | None = None
    content: Content = Content()
    attachments: tuple[AttachmentType, ...] = ()


class _Event(WireModel):
    """Fields every canonical event carries; ``kind`` is narrowed to a literal by each event."""

    kind: str
    platform: Platform
    chat_id: Id
    dedup_key: Id
    event_id: Id | None = None
    chat_type: ChatType | None = None
    received_at_ms: EpochMs
    timestamp_sec: EpochSec
    utc_offset_min: UtcOffsetMin


class MessageEvent(_Event):
    """A new message. ``is_self_sent`` marks the synthetic copy an ingress publishes after the bot's own
    send (it never wakes the driver); the platform's echo of the same message id may follow."""

    kind: Literal["message"] = "message"
    message_id: Id
    sender: Sender
    content: Content = Content()
    attachments: tuple[Attachment, ...] = ()
    reply_to_message_id: Id | None = None
    reply_quote: Content | None = None
    #: The reply target as the platform embedded it (only when it did).
    reply_target: QuotedMessage | None = None
    forward_info: ForwardInfo | None = None
    #: The forum topic the message was posted in (``None``: no forum, or the General topic).
    thread_id: Id | None = None
    thread_name: str | None = None
    is_self_sent: bool = False


class EditEvent(_Event):
    """The full new state of an edited message. ``sender`` is the editor when the platform says (on
    Telegram only the author edits). ``sent_at_sec`` is when the message itself was sent, when the
    platform says (Telegram's ``date``): an edit of a message the pipeline never saw is shown as that
    message, at that time."""

    kind: Literal["edit"] = "edit"
    message_id: Id
    sender: Sender | None = None
    content: Content = Content()
    attachments: tuple[Attachment, ...] = ()
    edited_at_sec: EpochSec
    sent_at_sec: EpochSec | None = None


class DeleteEvent(_Event):
    """Messages deleted (Feishu: recalled). ``actor_id`` is who deleted them, when known."""

    kind: Literal["delete"] = "delete"
    message_ids: Annotated[tuple[Id, ...], Field(min_length=1)]
    actor_id: Id | None = None


class ReactionEvent(_Event):
    """One emoji added to (or ``removed`` from) a message by one actor. ``emoji`` is the Unicode emoji, or
    the platform's name for it where it has no Unicode form (Feishu ``emoji_type`` such as ``THUMBSUP``)."""

    kind: Literal["reaction"] = "reaction"
    message_id: Id
    actor: Sender
    emoji: NonEmptyStr
    removed: bool = False


class MembersJoined(WireModel):
    """``actor`` is who added them (``None`` when they joined by themselves or the platform is silent)."""

    kind: Literal["members_joined"] = "members_joined"
    actor: Sender | None = None
    members: Annotated[tuple[Sender, ...], Field(min_length=1)]


class MemberLeft(WireModel):
    """Members who left or were removed (``actor`` set when someone else removed them)."""

    kind: Literal["member_left"] = "member_left"
    actor: Sender | None = None
    members: Annotated[tuple[Sender, ...], Field(min_length=1)]


class ChatRenamed(WireModel):
    kind: Literal["chat_renamed"] = "chat_renamed"
    actor: Sender | None = None
    from_title: str | None = None
    to_title: str


class ChatPhotoChanged(WireModel):
    kind: Literal["chat_photo_changed"] = "chat_photo_changed"
    actor: Sender | None = None


class MessagePinned(WireModel):
    """``pinned`` is the message as the platform embedded it in the pin (only when it did)."""

    kind: Literal["message_pinned"] = "message_pinned"
    actor: Sender | None = None
    message_id: Id
    pinned: QuotedMessage | None = None


class TopicChanged(WireModel):
    """A forum topic was created, edited (``name`` set when it was renamed), closed or reopened."""

    kind: Literal["topic_changed"] = "topic_changed"
    change: Literal["created", "edited", "closed", "reopened"]
    actor: Sender | None = None
    thread_id: Id
    name: str | None = None


class ChatNotice(WireModel):
    """A line the chat shows that has no kind of its own: ``type`` names it (lower-case words joined by
    ``_``: ``video_chat_started``, ``description_changed``), ``attributes`` say what it says (ordered,
    unique keys), ``members`` are the people it names, ``text`` a sentence the platform itself wrote
    (a Feishu system message)."""

    kind: Literal["notice"] = "notice"
    type: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$", max_length=64)]
    actor: Sender | None = None
    members: tuple[Sender, ...] = ()
    attributes: Attributes = ()
    text: str | None = None


class BotAdded(WireModel):
    """This bot was added to the chat."""

    kind: Literal["bot_added"] = "bot_added"
    actor: Sender | None = None


class BotRemoved(WireModel):
    """This bot was removed from the chat."""

    kind: Literal["bot_removed"] = "bot_removed"
    actor: Sender | None = None


ServiceAction = Annotated[
    MembersJoined
    | MemberLeft
    | ChatRenamed
    | ChatPhotoChanged
    | MessagePinned
    | BotAdded
    | BotRemoved
    | TopicChanged
    | ChatNotice,
    Field(discriminator="kind"),
]


class ServiceEvent(_Event):
    """A change of the chat itself; the nested ``action`` says which (also discriminated by ``kind``)."""

    kind: Literal["service"] = "service"
    action: ServiceAction


class RuntimeEvent(_Event):
    """An event the system itself produces (a background task completed). ``attributes`` are ordered
    key/value pairs (rendered in this order); keys are unique and non-empty."""

    kind: Literal["runtime"] = "runtime"
    type: NonEmptyStr
    attributes: Attributes = ()
    text: str | None = None


CanonicalEvent = Annotated[
    MessageEvent | EditEvent | DeleteEvent | ReactionEvent | ServiceEvent | RuntimeEvent,
    Field(discriminator="kind"),
]
EVENT_ADAPTER: TypeAdapter[CanonicalEvent] = TypeAdapter(CanonicalEvent)


class BotIdentity(WireModel):
    """The bot's own identity on a platform, learned at start-up (Feishu bot info, Telegram ``getMe``) and
    published by the ingress to the ``identity`` KV bucket under ``names.identity_key(platform)``.

    ``bot_id`` is the id the bot has as a sender and in mentions (Feishu open_id ``ou_…``, Telegram user
    id); ``app_id`` is Feishu's ``cli_…`` application id (``None`` on Telegram).
    """

    platform: Platform
    bot_id: Id
    name: str
    username: str | None = None
    app_id: Id | None = None
    updated_at_ms: EpochMs


class TypingSignal(WireModel):
    """Someone is typing in a chat (ephemeral, core NATS): it extends the driver's debounce, nothing else.
    ``at_ms`` is local receive time, comparable with ``received_at_ms`` of the same ingress."""

    platform: Platform
    chat_id: Id
    user_id: Id
    at_ms: EpochMs
