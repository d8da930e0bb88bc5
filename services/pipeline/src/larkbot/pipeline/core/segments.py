"""Construction of rendered segments on the hot path. Pure.

The renderer produces every field of a :class:`Segment` itself, from nodes that were validated when their
events were decoded, so validation would only re-check our own output. ``Segment.model_construct`` costs
~5 µs (it walks the fields looking for aliases and defaults); setting the instance state directly, exactly
as ``model_construct`` ends up doing, costs ~1.3 µs (measured). Equality, hashing and serialization are
those of a constructed model (pinned by a test).

Attachment refs are validated (built only for messages that have attachments). Their ``blob_key`` is the
attachment's ``content_hash`` when it is an object-store key: a media worker records the ``sha256:<hex>``
of the original bytes there, which is also the key the ingress and the workers store those bytes under.

A projection does not keep its segments: it keeps, beside each node, what rendering the node produced that
the node does not hold (:class:`Rendered`: the XML, image parts, attachment refs and the flags that depend
on the render parameters), and builds the node's segment from both (:func:`segment_of`) when one is
published or asked for. A segment's other fields are the node's own, which change only through ``reduce``,
and every node that ``reduce`` changes is rendered again in the same ``apply``. A ``Segment`` with its
18-field ``__dict__`` and its ``segment_id`` string took ~620 bytes per node; a :class:`Rendered` takes 96,
and most nodes keep only the XML (:data:`Kept`; tracemalloc over the bench's traffic, docs/performance.md).
The XML is kept as UTF-8 when that takes less memory than the string (:func:`stored`).
"""

from __future__ import annotations

import sys
from typing import NamedTuple, assert_never

from larkbot.canonical.content import Attachment
from larkbot.canonical.context import AttachmentRef, Segment
from larkbot.canonical.llm import ImagePart

from .model import MessageNode, Node, RuntimeNode, SystemNode, segment_id

#: The prefix of content-addressed object-store keys (the media workers' and the ingress's naming).
BLOB_KEY_PREFIX = "sha256:"

#: Every segment's ``__pydantic_fields_set__``, one set shared by all: a set of 18 names is ~1 KB, a third
#: of what a resident chat held (tracemalloc over the bench's traffic). Safe because ``Segment`` is
#: frozen with ``extra="forbid"`` (nothing is ever added to it: every field is in it already) and
#: ``model_copy`` copies the set before updating it.
_FIELDS_SET: set[str] = set(Segment.model_fields)
_new = Segment.__new__
_set = object.__setattr__


def new_segment(
    *,
    segment_id: str,
    node_type: str,
    event_seq: int,
    xml: str,
    image_parts: tuple[ImagePart, ...],
    received_at_ms: int,
    timestamp_sec: float,
    sender_id: str | None,
    message_id: str | None,
    is_myself: bool,
    is_self_sent: bool,
    is_bot: bool,
    is_deleted: bool,
    is_forwarded: bool,
    reply_to_message_id: str | None,
    mentions_me: bool,
    replies_to_me: bool,
    attachments: tuple[AttachmentRef, ...] = (),
) -> Segment:
    segment = _new(Segment)
    _set(
        segment,
        "__dict__",
        {
            "segment_id": segment_id,
            "node_type": node_type,
            "event_seq": event_seq,
            "xml": xml,
            "image_parts": image_parts,
            "received_at_ms": received_at_ms,
            "timestamp_sec": timestamp_sec,
            "sender_id": sender_id,
            "message_id": message_id,
            "is_myself": is_myself,
            "is_self_sent": is_self_sent,
            "is_bot": is_bot,
            "is_deleted": is_deleted,
            "is_forwarded": is_forwarded,
            "reply_to_message_id": reply_to_message_id,
            "mentions_me": mentions_me,
            "replies_to_me": replies_to_me,
            "attachments": attachments,
        },
    )
    _set(segment, "__pydantic_fields_set__", _FIELDS_SET)
    _set(segment, "__pydantic_extra__", None)
    _set(segment, "__pydantic_private__", None)
    return segment


def attachment_ref(index: int, attachment: Attachment) -> AttachmentRef:
    """What the driver needs to fetch the attachment rendered as ``file-id="<message id>:<index>"``."""
    digest = attachment.content_hash
    return AttachmentRef(
        index=index,
        type=attachment.type,
        file_id=attachment.file_id,
        blob_key=digest if digest is not None and digest.startswith(BLOB_KEY_PREFIX) else None,
        mime=attachment.mime or None,
        name=attachment.name or None,
        size_bytes=attachment.size_bytes,
    )


class Rendered(NamedTuple):
    """What rendering one node produced beyond the node's own fields. ``sender_id`` is the message's
    author or the event's actor; ``mentions_me`` and ``replies_to_me`` are already false for a deleted
    message or a blocked sender. ``xml`` is a ``str`` as rendered, and :func:`stored` as kept."""

    xml: str | bytes
    image_parts: tuple[ImagePart, ...]
    attachments: tuple[AttachmentRef, ...]
    sender_id: str | None
    is_myself: bool
    mentions_me: bool
    replies_to_me: bool


#: What a projection keeps of a node's rendering: the XML alone when the rest is what a plain rendering of
#: the node has (:func:`kept_of`), else the :class:`Rendered`; the XML :func:`stored` either way.
Kept = Rendered | str | bytes


def stored(xml: str) -> str | bytes:
    """``xml`` in the form that takes less memory: its UTF-8 bytes, or the string. A ``str`` takes 1, 2 or 4
    bytes a character, by its widest character: one emoji makes a whole segment 4 bytes a character (UTF-8
    takes 1 for the ASCII markup around it), while CJK text takes 2 (UTF-8: 3). For ASCII the bytes win by
    the 16 bytes of the string's larger header. ``surrogatepass``: whatever the string holds comes back."""
    if xml.isascii():
        return xml.encode()
    encoded = xml.encode("utf-8", "surrogatepass")
    return encoded if sys.getsizeof(encoded) < sys.getsizeof(xml) else xml


def _text(xml: str | bytes) -> str:
    return xml if isinstance(xml, str) else xml.decode("utf-8", "surrogatepass")


def _plain_sender(node: Node) -> str | None:
    return node.sender.id if isinstance(node, MessageNode) else None


def kept_of(node: Node, rendered: Rendered) -> Kept:
    """``rendered`` as a projection keeps it: its XML alone when it has no image parts, attachments or flags
    and names the message's own sender (no one, for other nodes)."""
    xml = stored(_text(rendered.xml))
    if (
        rendered.image_parts
        or rendered.attachments
        or rendered.is_myself
        or rendered.mentions_me
        or rendered.replies_to_me
        or rendered.sender_id != _plain_sender(node)
    ):
        return rendered._replace(xml=xml)
    return xml


def kept_xml(kept: Kept) -> str:
    return _text(kept if isinstance(kept, str | bytes) else kept.xml)


def kept_chars(kept: Kept) -> int:
    """``len(kept_xml(kept))``, without decoding ASCII."""
    xml = kept if isinstance(kept, str | bytes) else kept.xml
    return len(xml) if isinstance(xml, str) or xml.isascii() else len(_text(xml))


def segment_of(node: Node, kept: Kept) -> Segment:
    """The segment of ``node`` as last rendered (``kept``), its other fields read from the node."""
    rendered = (
        Rendered(kept, (), (), _plain_sender(node), False, False, False)
        if isinstance(kept, str | bytes)
        else kept
    )
    xml = _text(rendered.xml)
    match node:
        case MessageNode():
            reply = node.reply
            return new_segment(
                segment_id=segment_id(node),
                node_type="message",
                event_seq=node.event_seq,
                xml=xml,
                image_parts=rendered.image_parts,
                received_at_ms=node.received_at_ms,
                timestamp_sec=node.timestamp_sec,
                sender_id=rendered.sender_id,
                message_id=node.message_id,
                is_myself=rendered.is_myself,
                is_self_sent=node.is_self_sent,
                is_bot=node.sender.is_bot,
                is_deleted=node.deleted,
                is_forwarded=node.forward_info is not None,
                reply_to_message_id=reply.message_id if reply is not None else None,
                mentions_me=rendered.mentions_me,
                replies_to_me=rendered.replies_to_me,
                attachments=rendered.attachments,
            )
        case SystemNode() | RuntimeNode():
            return new_segment(
                segment_id=segment_id(node),
                node_type="event" if isinstance(node, SystemNode) else "runtime",
                event_seq=node.event_seq,
                xml=xml,
                image_parts=rendered.image_parts,
                received_at_ms=node.received_at_ms,
                timestamp_sec=node.timestamp_sec,
                sender_id=rendered.sender_id,
                message_id=None,
                is_myself=rendered.is_myself,
                is_self_sent=False,
                is_bot=False,
                is_deleted=False,
                is_forwarded=False,
                reply_to_message_id=None,
                mentions_me=False,
                replies_to_me=False,
            )
        case _:
            assert_never(node)
