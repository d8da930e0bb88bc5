"""Requests the driver (and media workers) send to an ingress on ``actions.<platform>`` and their results.

Decisions:

- Request/reply over a queue group: every request gets exactly one :class:`ActionResult`. Decode a request
  with :data:`ACTION_ADAPTER`.
- ``idempotency_key`` is derived by the caller from what it is doing (turn, step, tool call), so a retried
  request names the same side effect. Feishu sends pass it as the ``uuid`` (platform dedup for 1 h);
  Telegram sends are recorded in a sent-ledger under it. A request whose key was already executed answers
  ``outcome="duplicate"`` with the original message ids.
- ``outcome="unknown"`` means the platform may or may not have executed it (its answer was lost after the
  request left); the caller must not retry a send in that state under a new key. Asking again under the
  same key is always safe; ``error.retryable`` says whether it can tell more (an earlier attempt of the
  key is still running) or not (the answer is lost for good). A ``failed`` result is definite: nothing (or
  only the parts in ``message_ids``) was done; the ingress has already retried what repeating could fix.
- ``deadline_ms`` (absolute epoch ms): an ingress that picks the request up later answers ``failed`` with
  code ``deadline`` instead of executing it late.
- ``moderate`` (``ban_spammer``) is one request for the whole platform side: the ingress checks the bot's
  own rights, bans, then deletes the listed messages the platform still allows, and reports each step in
  ``ActionResult.moderation``. A bot without the rights changes nothing: ``failed`` with code
  ``forbidden``. Everything else that happened, including a ban the platform refused, is ``done`` with the
  report saying what actually happened, so a partial clean-up is never mistaken for a failure that may
  be repeated.
- Outgoing text is Markdown. A mention is written in the vocabulary the model reads,
  ``<mention uid="ID">@name</mention>``; the ingress turns it into the platform's mention (Feishu
  ``<at user_id>``, Telegram a ``tg://user?id=`` link). ``mentions`` lists those uids so the ingress need
  not trust text for whom to notify.
- ``custom_emoji`` resolves Telegram custom emoji ids to the stickers that draw them
  (``getCustomEmojiStickers``), so that a media worker can download and describe one without calling the
  platform itself; ids the platform does not know are simply absent from ``ActionResult.custom_emoji``.
- The read-only actions (:data:`READ_ONLY_ACTIONS`: ``download`` and ``custom_emoji``, which change
  nothing in any chat) are served on ``fetch.<platform>`` as well, the subject a media worker asks them
  on: its NATS user may publish there and not on ``actions.<platform>``, so a compromised worker cannot
  send, react, delete or ban. Any other action on ``fetch.<platform>`` is refused before it is run:
  ``failed`` with code :data:`NOT_READ_ONLY`, not retryable.
- A spent platform budget (the operator's, ``larkbot.runtime.budgets``: a chat's messages per minute, the
  platform's API calls per day or month) refuses before anything reaches the platform: ``failed`` with
  code :data:`BUDGET_SPENT`, retryable, ``retry_after_s`` when the budget allows the action again, and a
  message naming the budget. The bot cannot speak there until then.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field, TypeAdapter, model_validator

from ._base import EpochMs, EpochSec, Id, NonEmptyStr, NonNegativeInt, WireModel
from .content import AttachmentType, StickerFormat
from .names import Platform

__all__ = [
    "ACTION_ADAPTER",
    "BUDGET_SPENT",
    "NOT_READ_ONLY",
    "READ_ONLY_ACTIONS",
    "ActionError",
    "ActionRequest",
    "ActionResult",
    "BanMemberAction",
    "CustomEmojiAction",
    "CustomEmojiSticker",
    "DeleteMessageAction",
    "DownloadAction",
    "MessageDeletion",
    "ModerateAction",
    "ModeratedMessage",
    "ModerationReport",
    "ReactAction",
    "ReadOnlyAction",
    "SendImageAction",
    "SendMessageAction",
    "TypingAction",
]


class _Action(WireModel):
    kind: str
    platform: Platform
    idempotency_key: Id
    deadline_ms: EpochMs | None = None
    chat_id: Id


class SendMessageAction(_Action):
    kind: Literal["send_message"] = "send_message"
    text: NonEmptyStr
    reply_to_message_id: Id | None = None
    mentions: tuple[Id, ...] = ()


class ReactAction(_Action):
    """Add (or ``remove``) one emoji reaction of the bot."""

    kind: Literal["react"] = "react"
    message_id: Id
    emoji: NonEmptyStr
    remove: bool = False


class TypingAction(_Action):
    """Show the bot as typing (Telegram ``sendChatAction``; a no-op answered ``done`` on Feishu)."""

    kind: Literal["typing"] = "typing"


class DownloadAction(_Action):
    """Fetch an attachment's bytes into the object store; the result carries the content-addressed
    ``blob_key``. Feishu needs the message id and whether the key is an image or a file, hence
    ``message_id`` and ``attachment_type``. Larger than ``max_bytes`` → ``failed`` with code
    ``too_large``."""

    kind: Literal["download"] = "download"
    message_id: Id | None = None
    file_id: Id
    attachment_type: AttachmentType
    max_bytes: Annotated[int, Field(ge=1)]


class CustomEmojiAction(_Action):
    """Resolve custom emoji ids to their stickers (Telegram ``getCustomEmojiStickers``, at most 200 ids
    a call). Answered ``done`` with :attr:`ActionResult.custom_emoji`; Feishu answers ``unsupported``."""

    kind: Literal["custom_emoji"] = "custom_emoji"
    emoji_ids: Annotated[tuple[Id, ...], Field(min_length=1, max_length=200)]


class SendImageAction(_Action):
    kind: Literal["send_image"] = "send_image"
    blob_key: Id
    mime: NonEmptyStr
    caption: str | None = None
    reply_to_message_id: Id | None = None


class DeleteMessageAction(_Action):
    """Delete (Feishu: recall) messages, the bot's own or — with admin rights — others'."""

    kind: Literal["delete_message"] = "delete_message"
    message_ids: Annotated[tuple[Id, ...], Field(min_length=1)]


class BanMemberAction(_Action):
    kind: Literal["ban_member"] = "ban_member"
    user_id: Id


class ModeratedMessage(WireModel):
    """A message of the member being banned, with its platform time (Telegram deletes only messages
    younger than 48 h, so the ingress needs the age)."""

    message_id: Id
    timestamp_sec: EpochSec


class ModerateAction(_Action):
    """Ban ``user_id`` (Feishu: remove from the group; Telegram: ban) and then delete ``messages``, that
    member's known messages not deleted yet. Each confirmed deletion is published as a ``delete`` event
    whose actor is the bot."""

    kind: Literal["moderate"] = "moderate"
    user_id: Id
    messages: tuple[ModeratedMessage, ...] = ()


ActionRequest = Annotated[
    SendMessageAction
    | ReactAction
    | TypingAction
    | DownloadAction
    | CustomEmojiAction
    | SendImageAction
    | DeleteMessageAction
    | BanMemberAction
    | ModerateAction,
    Field(discriminator="kind"),
]
ACTION_ADAPTER: TypeAdapter[ActionRequest] = TypeAdapter(ActionRequest)

#: The actions that only read from the platform: nothing changes in any chat, nothing is sent. An ingress
#: serves them on ``fetch.<platform>`` too (the module docstring). A new action kind belongs here only if
#: it cannot change what anyone sees.
ReadOnlyAction = DownloadAction | CustomEmojiAction
READ_ONLY_ACTIONS: Final = (DownloadAction, CustomEmojiAction)

#: The :class:`ActionError` code of an action refused because a platform budget is spent.
BUDGET_SPENT: Final = "budget_spent"
#: The :class:`ActionError` code of an action that is not read-only, asked on ``fetch.<platform>``.
NOT_READ_ONLY: Final = "not_read_only"


class ActionError(WireModel):
    """Why an action failed. ``code`` is a short stable token (``rate_limited``, ``not_found``,
    ``forbidden``, ``too_large``, ``deadline``, ``platform``, ``budget_spent``, ``not_read_only``);
    ``message`` is redacted, for humans."""

    code: Id
    message: str
    retryable: bool
    retry_after_s: Annotated[float, Field(ge=0)] | None = None


class MessageDeletion(WireModel):
    """What became of one message of a :class:`ModerateAction`: ``deleted`` (confirmed by the platform),
    ``failed`` (attempted and refused or unanswered) or ``skipped`` (not attempted: too old for the
    platform, code ``too_old``; the bot may not delete, code ``forbidden``; the ban did not happen, code
    ``not_banned``). ``error`` says why exactly when it was not deleted."""

    message_id: Id
    outcome: Literal["deleted", "failed", "skipped"]
    error: ActionError | None = None

    @model_validator(mode="after")
    def _consistent(self) -> MessageDeletion:
        if (self.outcome == "deleted") == (self.error is not None):
            raise ValueError("error must be present exactly when the message was not deleted")
        return self


class ModerationReport(WireModel):
    """What a :class:`ModerateAction` actually did: whether the member is banned (``ban_error`` says why
    not, e.g. ``not_member`` on Feishu for someone who already left), and one :class:`MessageDeletion` per
    requested message, in request order."""

    banned: bool
    ban_error: ActionError | None = None
    deletions: tuple[MessageDeletion, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> ModerationReport:
        if self.banned == (self.ban_error is not None):
            raise ValueError("ban_error must be present exactly when the member was not banned")
        return self


class CustomEmojiSticker(WireModel):
    """The sticker that draws a custom emoji: its platform ``file_id`` (downloadable with a ``download``
    action), its sticker set, the standard emoji it stands for and how it is encoded."""

    emoji_id: Id
    file_id: Id
    set_name: str | None = None
    emoji: str | None = None
    format: StickerFormat
    width: NonNegativeInt | None = None
    height: NonNegativeInt | None = None
    size_bytes: NonNegativeInt | None = None


class ActionResult(WireModel):
    """The reply to an :class:`ActionRequest`. ``ok`` is true exactly for ``done`` and ``duplicate``, and
    ``error`` is present exactly when ``ok`` is false. ``message_ids`` are the platform's final ids of
    sent messages (a long text may be split into several); ``blob_key`` answers a download; ``moderation``
    answers a ``moderate`` action that ran; ``custom_emoji`` answers a ``custom_emoji`` action (the ids
    the platform knows)."""

    idempotency_key: Id
    ok: bool
    outcome: Literal["done", "duplicate", "failed", "unknown"]
    message_ids: tuple[Id, ...] = ()
    blob_key: Id | None = None
    error: ActionError | None = None
    moderation: ModerationReport | None = None
    custom_emoji: tuple[CustomEmojiSticker, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> ActionResult:
        if self.ok != (self.outcome in ("done", "duplicate")):
            raise ValueError("ok must be true exactly for outcomes 'done' and 'duplicate'")
        if self.ok == (self.error is not None):
            raise ValueError("error must be present exactly when ok is false")
        return self
