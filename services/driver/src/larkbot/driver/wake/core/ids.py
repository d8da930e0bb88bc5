"""Resolving the ids the model writes (aliases or canonical ids) to canonical platform ids, through the
live context first (SPEC §3: aliases are rendered in ``<message id>``); what the context does not hold is
looked up in persisted history by the caller. Also mentions in outgoing text. (Attachments are resolved
from the segments' ``AttachmentRef`` s by the executor, not from the XML.)
"""

from __future__ import annotations

import re
from html import unescape

from larkbot.canonical.context import Segment

_MESSAGE_ID = re.compile(r'^<message id="([^"]+)"')
_MENTION_UID = re.compile(r'<mention uid="([^"]+)"')


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
