"""What the bot sends: Markdown → Feishu ``post`` with an ``md`` element, mentions, splitting, uuids.

Decisions:

- Text goes out as a ``post`` whose single element is ``{"tag": "md"}``: Feishu renders the Markdown the
  model writes (bold, italics, links, lists, code) and ``<at user_id="ou_…"></at>`` mentions inside it.
- A mention arrives in the vocabulary the model reads, ``<mention uid="ID">@name</mention>``. It becomes a
  Feishu ``<at>`` only when ``ID`` is listed in the action's ``mentions`` (the ingress does not trust text
  for whom to notify); otherwise it is plain ``@name``. A literal ``<at …>`` typed by the model is defused
  (``<`` → ``‹``) so text can never notify anyone.
- A post is at most 30 KB on Feishu: longer text is split at paragraph, then line, then character
  boundaries into parts of at most :data:`MAX_PART_BYTES`; part ``i > 0`` carries uuid ``<uuid>-<i>``.
- ``uuid`` is the driver's idempotency key (Feishu dedups a send per uuid for an hour); Feishu caps it at
  50 characters, so a longer key is replaced by a hash of it — deterministic, so a retry names the same
  send.
- The synthetic self-event shows the Markdown source with mention nodes for the notified users.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Final

from larkbot.canonical.content import Content, Inline, Mention, Text

MAX_PART_BYTES: Final = 28 * 1024
MAX_UUID: Final = 50

_MENTION = re.compile(r'<mention uid="([^"<>]+)">(.*?)</mention>', re.DOTALL)
_RAW_AT = re.compile(r"<(/?at\b)", re.IGNORECASE)


def feishu_uuid(idempotency_key: str, part: int = 0) -> str:
    base = idempotency_key
    suffix = f"-{part}" if part else ""
    if len(base) + len(suffix) > MAX_UUID:
        base = hashlib.sha256(idempotency_key.encode()).hexdigest()[:40]
    return base + suffix


def _label(inner: str) -> str:
    return inner[1:] if inner.startswith("@") else inner


def to_feishu_markdown(text: str, mentions: frozenset[str]) -> str:
    """The ``md`` element text: mentions converted, raw ``<at>`` defused."""
    out: list[str] = []
    pos = 0
    for match in _MENTION.finditer(text):
        out.append(_RAW_AT.sub(r"‹\1", text[pos : match.start()]))
        uid, inner = match.group(1), _RAW_AT.sub(r"‹\1", match.group(2))
        if uid in mentions:
            out.append(f'<at user_id="{uid}"></at>')
        else:
            out.append(f"@{_label(inner)}")
        pos = match.end()
    out.append(_RAW_AT.sub(r"‹\1", text[pos:]))
    return "".join(out)


def self_content(text: str, mentions: frozenset[str]) -> Content:
    """The canonical content of what was sent (for the synthetic self-event)."""
    nodes: list[Inline] = []
    pos = 0
    for match in _MENTION.finditer(text):
        if match.start() > pos:
            nodes.append(Text(text=text[pos : match.start()]))
        uid, inner = match.group(1), match.group(2)
        if uid in mentions:
            nodes.append(Mention(user_id=uid, text=f"@{_label(inner)}"))
        else:
            nodes.append(Text(text=f"@{_label(inner)}"))
        pos = match.end()
    if pos < len(text):
        nodes.append(Text(text=text[pos:]))
    merged: list[Inline] = []
    for node in nodes:
        if isinstance(node, Text) and merged and isinstance(merged[-1], Text):
            merged[-1] = Text(text=merged[-1].text + node.text)
        else:
            merged.append(node)
    return Content(nodes=tuple(merged))


def post_content(markdown: str) -> str:
    """The ``content`` string of a ``post`` message holding one Markdown element."""
    return json.dumps(
        {"zh_cn": {"title": "", "content": [[{"tag": "md", "text": markdown}]]}}, ensure_ascii=False
    )


def split_text(text: str, limit: int = MAX_PART_BYTES) -> list[str]:
    """Split into parts of at most ``limit`` UTF-8 bytes, preferring paragraph and line boundaries."""
    if len(text.encode()) <= limit:
        return [text]
    parts: list[str] = []
    current = ""
    for piece in _pieces(text, limit):
        if current and len((current + piece).encode()) > limit:
            parts.append(current)
            current = ""
        current += piece
    if current:
        parts.append(current)
    return [p for p in (part.strip("\n") for part in parts) if p]


def _pieces(text: str, limit: int) -> list[str]:
    out: list[str] = []
    for para in re.split(r"(?<=\n\n)", text):
        if len(para.encode()) <= limit:
            out.append(para)
            continue
        for line in para.splitlines(keepends=True):
            if len(line.encode()) <= limit:
                out.append(line)
                continue
            chunk = ""
            for ch in line:
                if len((chunk + ch).encode()) > limit:
                    out.append(chunk)
                    chunk = ""
                chunk += ch
            if chunk:
                out.append(chunk)
    return out
