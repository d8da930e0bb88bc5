"""The intermediate context (IC, SPEC §2): an ordered list of nodes, a user table and the chat title.

Nodes are mutable dataclasses changed only by :func:`larkbot.pipeline.core.reduce.reduce`; everything else
reads them. Each node remembers the order-of-record sequence (``event_seq``) of the event that created it;
edits, deletes and echoes change a node in place and keep that sequence and its arrival time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import assert_never

from larkbot.canonical.content import Attachment, Content, Text
from larkbot.canonical.events import (
    BotAdded,
    BotRemoved,
    ChatNotice,
    ChatPhotoChanged,
    ChatRenamed,
    ForwardInfo,
    MemberLeft,
    MembersJoined,
    Sender,
)

from .shared import share_fields_sets


@dataclass(slots=True)
class ReplySnapshot:
    """The reply target (or the message pinned) as it was when the reply (the pin) arrived: sender and a
    short preview, so that later edits of the target never rewrite the rendering. Taken from the context's
    own copy, else from the copy the event embedded; ``sender_*`` and ``preview`` are ``None`` when there
    is neither."""

    message_id: str
    sender_id: str | None
    sender_name: str | None
    sender_self_sent: bool
    preview: str | None
    quote: str | None


#: What a node keeps of a message's content: the text itself when the content is one plain text (most
#: messages are; a ``Content`` and its ``Text`` are ~550 bytes beside the text), ``""`` for no content,
#: else the ``Content``.
Body = Content | str


def body_of(content: Content) -> Body:
    """The compact form of ``content`` (:func:`content_of` gives back an equal ``Content``)."""
    nodes = content.nodes
    if not nodes:
        return ""
    if len(nodes) == 1:
        node = nodes[0]
        if type(node) is Text and node.text:
            return node.text
    return content


def content_of(body: Body) -> Content:
    if not isinstance(body, str):
        return body
    content = Content.from_text(body)
    share_fields_sets(content)
    return content


def plain_text(body: Body) -> str:
    return body if isinstance(body, str) else body.plain_text()


@dataclass(slots=True)
class MessageNode:
    event_seq: int
    message_id: str
    sender: Sender
    #: The content in its compact form (:data:`Body`); :attr:`content` is the ``Content``.
    body: Body
    attachments: tuple[Attachment, ...]
    reply: ReplySnapshot | None
    forward_info: ForwardInfo | None
    received_at_ms: int
    timestamp_sec: float
    utc_offset_min: int
    is_self_sent: bool
    #: The forum topic as named when the message arrived (``None`` outside topics).
    topic: str | None
    #: Only the synthetic self-sent copy has been seen; the platform's echo will replace its payload.
    synthetic: bool
    #: Arrived after a message whose platform time is a later second (a re-push, a late delivery):
    #: rendered with ``received`` whatever the delay. Decided when the node is created.
    out_of_order: bool = False
    edited_at_sec: float | None = None
    edited_offset_min: int | None = None
    deleted: bool = False

    @property
    def content(self) -> Content:
        return content_of(self.body)


@dataclass(frozen=True, slots=True)
class NameChange:
    """A sender whose display name differs from the last one seen in this context."""

    kind = "name_change"
    user_id: str
    from_name: str
    to_name: str


@dataclass(frozen=True, slots=True)
class ReactionNote:
    """A reaction as its node shows it: the event's own fields without its envelope (a decoded
    ``ReactionEvent`` with its ``__dict__``, chat id and dedup key is ~700 bytes)."""

    kind = "reaction"
    message_id: str
    actor: Sender
    emoji: str
    removed: bool


@dataclass(frozen=True, slots=True)
class PinNote:
    """A message pinned, with the pinned message as it was then."""

    kind = "message_pinned"
    actor: Sender | None
    target: ReplySnapshot


@dataclass(frozen=True, slots=True)
class TopicNote:
    """A forum topic created, edited, closed or reopened. ``topic`` is its name before the change (the
    event's own name when none was known, else ``#<thread id>``); ``renamed_to`` the new name of an edit
    that renamed it."""

    kind = "topic"
    change: str
    actor: Sender | None
    topic: str
    renamed_to: str | None


#: What a system node shows: a reaction (:class:`ReactionNote`), a service action as it came — except a
#: pin and a topic change, which reduce snapshots into a :class:`PinNote` / :class:`TopicNote` — or a
#: sender's name change.
SystemPayload = (
    ReactionNote
    | MembersJoined
    | MemberLeft
    | ChatRenamed
    | ChatPhotoChanged
    | BotAdded
    | BotRemoved
    | ChatNotice
    | NameChange
    | PinNote
    | TopicNote
)


@dataclass(slots=True)
class SystemNode:
    event_seq: int
    #: Distinguishes the nodes one event creates (``""``, or ``"rename"`` before a message).
    part: str
    payload: SystemPayload
    received_at_ms: int
    timestamp_sec: float
    utc_offset_min: int


@dataclass(slots=True)
class RuntimeNode:
    event_seq: int
    type: str
    attributes: tuple[tuple[str, str], ...]
    text: str | None
    received_at_ms: int
    timestamp_sec: float
    utc_offset_min: int


Node = MessageNode | SystemNode | RuntimeNode


@dataclass(slots=True)
class IC:
    nodes: list[Node] = field(default_factory=list)
    #: message id → index in ``nodes``.
    by_message: dict[str, int] = field(default_factory=dict)
    #: user id → the display name last seen on one of their messages.
    users: dict[str, str] = field(default_factory=dict)
    #: username (lower case, no ``@``) → the id of the user last seen with it on a message, and the
    #: reverse: what a bare ``@username`` mention resolves to.
    usernames: dict[str, str] = field(default_factory=dict)
    username_of: dict[str, str] = field(default_factory=dict)
    #: The latest platform time (whole seconds) of a message node so far.
    latest_sec: int | None = None
    title: str | None = None
    #: One ``Sender`` per distinct value: a message node (and a reaction) keeps the shared one, not the
    #: copy its event decoded (a decoded model with its ``__dict__`` and fields set is ~600 bytes, and
    #: most of a chat's messages come from a few members).
    senders: dict[Sender, Sender] = field(default_factory=dict)
    #: forum topic (thread id) → its name as last seen.
    topics: dict[str, str] = field(default_factory=dict)


def segment_id(node: Node) -> str:
    """Stable across re-renders: an edit or delete replaces the segment with this id in place."""
    match node:
        case MessageNode():
            return f"msg:{node.message_id}"
        case SystemNode():
            return f"evt:{node.event_seq}{':' + node.part if node.part else ''}"
        case RuntimeNode():
            return f"rt:{node.event_seq}"
        case _:
            assert_never(node)
