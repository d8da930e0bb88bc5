"""Resolving the ids the model writes (aliases or canonical ids) to canonical platform ids, through the
live context first (SPEC §3: aliases are rendered in ``<message id>``); what the context does not hold is
looked up in persisted history by the caller. Also mentions in outgoing text and attachments by file-id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html import unescape

from larkbot.canonical.content import AttachmentType
from larkbot.canonical.context import Segment

_MESSAGE_ID = re.compile(r'^<message id="([^"]+)"')
_MENTION_UID = re.compile(r'<mention uid="([^"]+)"')
_ATTACHMENT = re.compile(r'<(image|sticker|animation|attachment)\b([^>]*?)\bfile-id="([^"]+)"')
_TYPE_ATTR = re.compile(r'\btype="([^"]+)"')
_TAG_TYPES: dict[str, str] = {"image": "photo", "sticker": "sticker", "animation": "animation"}
_ATTACHMENT_TYPES: frozenset[str] = frozenset(t.value for t in AttachmentType)


def alias_table(segments: tuple[Segment, ...]) -> dict[str, str]:
    """Rendered id (alias or canonical) → canonical message id, for every message in the context."""
    table: dict[str, str] = {}
    for s in segments:
        if s.message_id is None:
            continue
        table.setdefault(s.message_id, s.message_id)
        match = _MESSAGE_ID.match(s.xml)
        if match:
            table.setdefault(unescape(match.group(1)), s.message_id)
    return table


def mentioned_uids(text: str) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for uid in _MENTION_UID.findall(text):
        seen.setdefault(unescape(uid), None)
    return tuple(seen)


@dataclass(frozen=True, slots=True)
class AttachmentRef:
    message_id: str
    file_id: str
    attachment_type: AttachmentType


def find_attachment(segments: tuple[Segment, ...], file_id: str) -> AttachmentRef | None:
    """The newest attachment rendered with ``file-id=file_id``."""
    for s in reversed(segments):
        if s.message_id is None:
            continue
        for tag, attrs, found in _ATTACHMENT.findall(s.xml):
            if unescape(found) != file_id:
                continue
            kind: str = _TAG_TYPES.get(tag, "")
            if not kind:
                match = _TYPE_ATTR.search(attrs)
                kind = match.group(1) if match else "file"
            if kind not in _ATTACHMENT_TYPES:
                kind = "file"
            return AttachmentRef(s.message_id, file_id, AttachmentType(kind))
    return None
