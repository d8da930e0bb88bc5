"""Rendered context (SPEC §3) as it travels from the pipeline to the driver, and the pipeline's
request/reply services (``pipeline.snapshot``, ``pipeline.history``, ``pipeline.cursor``,
``pipeline.member``).

Decisions:

- A :class:`Segment` is one rendered IC node. ``segment_id`` is stable across re-renders (derived from the
  node, e.g. its message id), so an edit or delete is a :class:`ReplaceOp` of that segment in place, and
  an update costs O(changed segments), not O(context).
- ``event_seq`` is the order-of-record sequence (the pipeline's ``events`` table) of the event that
  created the node; a compaction cursor is such a sequence, and the context holds exactly the nodes with
  ``event_seq > cursor``. Several nodes can share one (a ``user_renamed`` node and its message).
- Gap detection: ``seq`` strictly increases per chat but need not be contiguous; ``base_seq`` is the
  ``seq`` of the previous update of the chat (0 before the first). A consumer applies an update only when
  ``base_seq`` equals the ``seq`` it holds; otherwise it asks ``pipeline.snapshot``.
- Activation flags (``mentions_me``, ``replies_to_me``) and identity flags are segment fields, never parsed
  back out of the XML.
- Provenance (who wrote a message, and whether it is their own words) travels as fields beside the XML,
  on both a :class:`Segment` and a :class:`HistoryItem`, so that the driver can check what a message is
  cited as evidence of without parsing XML: ``sender_id``, the identity flags, ``is_forwarded`` (the
  platform marked the message as forwarded) and ``reply_to_message_id`` (the *canonical* id of the message
  it replies to or quotes from, never the rendered alias). The flags are the facts the renderer draws the
  XML attributes from, so they never disagree: ``myself`` ⇔ ``is_myself``, ``bot`` ⇔ ``is_bot and not
  is_myself``, ``deleted`` ⇔ ``is_deleted``, ``forwarded_from`` ⇔ ``is_forwarded``. Provenance is kept when
  a message renders self-closing (deleted, or its sender blocked): it says what the message was, not what
  the model is shown.
- Wire compatibility: every field added after the first release has a default, so a payload from an
  older producer still decodes. Models forbid unknown fields, so a newer producer's payload does not decode
  in an older consumer: the consumer is upgraded first (docs/deployment.md, "Upgrade").
- Attachments are rendered as ``file-id="<rendered message id>:<index>"``, which no platform understands.
  :class:`AttachmentRef` carries what the XML leaves out (the platform's file key, the object-store key),
  so the driver resolves a rendered file-id without parsing XML and asks a media worker for the real file.
  Only rendered attachments are listed: a deleted or blocked message shows none and carries none.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from ._base import EpochMs, EpochSec, Id, NonEmptyStr, NonNegativeInt, WireModel
from .content import AttachmentType
from .llm import ImagePart
from .names import Platform

__all__ = [
    "AppendOp",
    "AttachmentRef",
    "ContextOp",
    "ContextSnapshot",
    "ContextUpdate",
    "CursorMove",
    "HistoryItem",
    "HistoryRequest",
    "HistoryResponse",
    "MemberMessage",
    "MemberRequest",
    "MemberResponse",
    "ReplaceOp",
    "ResetOp",
    "Segment",
    "SnapshotRequest",
]


class AttachmentRef(WireModel):
    """One rendered attachment of a message. ``index`` is the position in the rendered file-id
    (``<rendered message id>:<index>``); ``file_id`` the platform's file key; ``blob_key`` the object-store
    key of the original bytes when a media worker has seen them (``sha256:<hex>``), else ``None``;
    ``name`` and ``size_bytes`` what the platform said of the file (``read_file`` names it and refuses a
    file too large before downloading it)."""

    index: NonNegativeInt
    type: AttachmentType
    file_id: Id
    blob_key: Id | None = None
    mime: str | None = None
    name: str | None = None
    size_bytes: NonNegativeInt | None = None


class Segment(WireModel):
    """One rendered node. ``node_type``: ``message`` (``<message>``), ``event`` (``<event>``, system
    nodes such as reactions and renames) or ``runtime`` (``<runtime-event>``). ``image_parts`` follow the
    XML in the prompt (thumbnails of attachments that have no alt text yet).

    For a message: ``sender_id`` is its author (for a forward, the member who forwarded it);
    ``is_myself`` is the bot's own message (its id, or the synthetic self-sent copy); ``is_bot`` the
    sender's platform bot flag (also true of the bot's own messages); ``is_forwarded`` a message the
    platform marked as forwarded; ``reply_to_message_id`` the canonical id of the message it replies to or
    quotes from, whether or not that message is in the context. Event and runtime segments carry no
    message provenance (``sender_id`` of an event is its actor)."""

    segment_id: Id
    node_type: Literal["message", "event", "runtime"]
    event_seq: Annotated[int, Field(ge=1)]
    xml: str
    image_parts: tuple[ImagePart, ...] = ()
    received_at_ms: EpochMs
    timestamp_sec: EpochSec
    sender_id: Id | None = None
    message_id: Id | None = None
    is_myself: bool = False
    is_self_sent: bool = False
    is_bot: bool = False
    is_deleted: bool = False
    is_forwarded: bool = False
    reply_to_message_id: Id | None = None
    mentions_me: bool = False
    replies_to_me: bool = False
    attachments: tuple[AttachmentRef, ...] = ()


class AppendOp(WireModel):
    """New segments after the current last one, in context order."""

    kind: Literal["append"] = "append"
    segments: Annotated[tuple[Segment, ...], Field(min_length=1)]


class ReplaceOp(WireModel):
    """Replace the segment whose ``segment_id`` equals ``segment.segment_id``, keeping its position. An
    unknown target is a gap (ask for a snapshot)."""

    kind: Literal["replace"] = "replace"
    segment: Segment


class ResetOp(WireModel):
    """Discard everything and take ``segments`` (a full re-render from the update's cursor)."""

    kind: Literal["reset"] = "reset"
    segments: tuple[Segment, ...]


ContextOp = Annotated[AppendOp | ReplaceOp | ResetOp, Field(discriminator="kind")]


class ContextUpdate(WireModel):
    """Published on ``context.<p>.<chat>``; ``ops`` apply in order. ``title`` is the chat title after the
    update."""

    platform: Platform
    chat_id: Id
    seq: Annotated[int, Field(ge=1)]
    base_seq: NonNegativeInt
    cursor: NonNegativeInt
    ops: Annotated[tuple[ContextOp, ...], Field(min_length=1)]
    title: str | None = None

    @model_validator(mode="after")
    def _seq_advances(self) -> ContextUpdate:
        if self.base_seq >= self.seq:
            raise ValueError("base_seq must be lower than seq")
        return self


class ContextSnapshot(WireModel):
    """The whole rendered context of a chat at ``seq`` (0: nothing published yet)."""

    platform: Platform
    chat_id: Id
    seq: NonNegativeInt
    cursor: NonNegativeInt
    segments: tuple[Segment, ...]
    title: str | None = None


class SnapshotRequest(WireModel):
    """``pipeline.snapshot`` request; the reply is a :class:`ContextSnapshot`."""

    platform: Platform
    chat_id: Id


class HistoryRequest(WireModel):
    """``pipeline.history``: render persisted messages by id. ``message_ids`` may be canonical ids or the
    rendered aliases (``m`` + 9 base36 chars); the reply is a :class:`HistoryResponse`."""

    platform: Platform
    chat_id: Id
    message_ids: Annotated[tuple[Id, ...], Field(min_length=1)]


class HistoryItem(WireModel):
    """One found message: canonical ``message_id``, the ``alias`` it renders as (when aliasing is on) and
    its XML, rendered by the same pure function as the live context so aliases match; ``attachments``,
    ``sender_id``, the identity flags, ``is_forwarded`` and ``reply_to_message_id`` as in
    :class:`Segment` (copied from the segment the message renders as, so they agree with ``xml``)."""

    message_id: Id
    alias: Id | None = None
    xml: str
    image_parts: tuple[ImagePart, ...] = ()
    attachments: tuple[AttachmentRef, ...] = ()
    sender_id: Id | None = None
    is_myself: bool = False
    is_self_sent: bool = False
    is_bot: bool = False
    is_deleted: bool = False
    is_forwarded: bool = False
    reply_to_message_id: Id | None = None


class HistoryResponse(WireModel):
    """``found`` in request order; ``missing`` repeats the requested ids (as given) that matched nothing."""

    found: tuple[HistoryItem, ...]
    missing: tuple[Id, ...] = ()


class MemberRequest(WireModel):
    """``pipeline.member``: what the pipeline observed of one member in a chat, from its persisted events
    (so it survives compaction); the reply is a :class:`MemberResponse`. ``max_messages`` bounds the
    messages listed, never the count."""

    platform: Platform
    chat_id: Id
    user_id: Id
    max_messages: Annotated[int, Field(ge=0, le=1000)] = 100


class MemberMessage(WireModel):
    """One message of the member: canonical ``message_id``, the ``alias`` it renders as (when aliasing is
    on) and its platform time."""

    message_id: Id
    alias: Id | None = None
    timestamp_sec: EpochSec


class MemberResponse(WireModel):
    """``message_count``: the distinct message ids the member sent in the chat, deleted ones included
    (an edit adds none). ``messages``: those not deleted, the newest ``max_messages`` of them, in the
    order of record."""

    user_id: Id
    message_count: NonNegativeInt
    messages: tuple[MemberMessage, ...] = ()


class CursorMove(WireModel):
    """``pipeline.cursor``: the driver moved a chat's compaction cursor (an ``event_seq``); the pipeline
    re-renders from it and publishes a :class:`ResetOp`. ``reason`` is for logs (``compaction``)."""

    platform: Platform
    chat_id: Id
    cursor: NonNegativeInt
    reason: NonEmptyStr
