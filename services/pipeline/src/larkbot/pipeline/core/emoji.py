"""Custom emoji in a message's content: which ones a media worker should describe, and the content once
it has. Pure.

Decisions:

- Only Telegram's custom emoji are resolvable (``custom_emoji_id`` → ``getCustomEmojiStickers``); a
  Feishu emoji is its ``emoji_type`` with no picture a bot may fetch, so it gets no job.
- One job per distinct id of an event, however often the emoji repeats in it.
- A description is recorded *in the event*, like an attachment's ``thumbnail_key``: the pipeline writes
  the emoji's ``pack`` and ``alt_key`` (``emoji:<id>``) into every node of that id when the job
  succeeded, and the renderer shows the cached description only for a node that carries its key. An
  emoji committed without one (its job failed for good) renders its fallback for ever, even once a later
  message's job has described the same id: what a committed segment shows depends only on the event,
  so a cold replay renders the bytes the live context had.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from larkbot.canonical.content import (
    Blockquote,
    Bold,
    CustomEmoji,
    Inline,
    Italic,
    Link,
    Spoiler,
    Strikethrough,
    Underline,
)
from larkbot.canonical.names import Platform

EMOJI_KEY_PREFIX: Final = "emoji:"
_Container = Bold | Italic | Underline | Strikethrough | Spoiler | Link | Blockquote


def emoji_key(emoji_id: str) -> str:
    """The key a custom emoji's description is cached and rendered under (SPEC §6)."""
    return f"{EMOJI_KEY_PREFIX}{emoji_id}"


def _walk(nodes: tuple[Inline, ...]) -> Iterator[CustomEmoji]:
    for node in nodes:
        if isinstance(node, CustomEmoji):
            yield node
        elif isinstance(node, _Container):
            yield from _walk(node.children)


def resolvable_ids(platform: Platform, nodes: tuple[Inline, ...]) -> list[str]:
    """The distinct custom emoji ids of the content a media worker can describe, in order."""
    if platform is not Platform.TELEGRAM:
        return []
    return list(dict.fromkeys(n.emoji_id for n in _walk(nodes) if n.emoji_id and n.alt_key is None))


def alt_keys(nodes: tuple[Inline, ...]) -> set[str]:
    """The description keys the content's emoji carry (what rendering it needs from the cache)."""
    return {n.alt_key for n in _walk(nodes) if n.alt_key is not None}


def described(nodes: tuple[Inline, ...], emoji_id: str, pack: str | None) -> tuple[Inline, ...]:
    """The content with every emoji ``emoji_id`` marked described (its ``alt_key``) and its ``pack``."""
    out: list[Inline] = []
    for node in nodes:
        if isinstance(node, CustomEmoji) and node.emoji_id == emoji_id:
            node = node.model_copy(update={"alt_key": emoji_key(emoji_id), "pack": pack or node.pack})
        elif isinstance(node, _Container):
            node = node.model_copy(update={"children": described(node.children, emoji_id, pack)})
        out.append(node)
    return tuple(out)
