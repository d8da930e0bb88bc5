"""Message aliases (SPEC §3 "Aliases"): ``m`` + 9 base36 characters of a hash of (chat id, message id).

A hash, not a position: cold replay starts at the compaction cursor and would renumber positions, while a
hash is reproducible from persisted history alone (the ``events.message_alias`` column is the same
function). 9 base36 characters hold ~46.5 bits, so a collision within one chat is not expected in practice;
when one happens, the first id rendered in context order keeps the alias and the later one renders its
canonical id (:class:`AliasTable`).
"""

from __future__ import annotations

import functools
import hashlib
import re

_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"
_SPACE = 36**9
ALIAS_PATTERN = re.compile(r"^m[0-9a-z]{9}$")


@functools.lru_cache(maxsize=65536)
def alias_for(chat_id: str, message_id: str) -> str:
    """Cached: the renderer and the ``events.message_alias`` column ask for the same ids (a SHA-256 each)."""
    digest = hashlib.sha256(f"{chat_id}\x00{message_id}".encode()).digest()
    value = int.from_bytes(digest[:8], "big") % _SPACE
    chars = []
    for _ in range(9):
        value, digit = divmod(value, 36)
        chars.append(_DIGITS[digit])
    return "m" + "".join(reversed(chars))


def looks_like_alias(value: str) -> bool:
    return ALIAS_PATTERN.match(value) is not None


class AliasTable:
    """Which message id owns each alias, claimed in render order (first claim wins)."""

    __slots__ = ("_by_alias", "_by_id", "chat_id", "enabled")

    def __init__(self, chat_id: str, enabled: bool) -> None:
        self.chat_id = chat_id
        self.enabled = enabled
        self._by_alias: dict[str, str] = {}
        self._by_id: dict[str, str] = {}

    def render(self, message_id: str) -> str:
        """The id to show for ``message_id``: its alias, or the canonical id after a collision."""
        if not self.enabled:
            return message_id
        shown = self._by_id.get(message_id)
        if shown is not None:
            return shown
        alias = alias_for(self.chat_id, message_id)
        owner = self._by_alias.setdefault(alias, message_id)
        shown = alias if owner == message_id else message_id
        self._by_id[message_id] = shown
        return shown

    def resolve(self, alias: str) -> str | None:
        """The message id that renders as ``alias`` in this context, if any."""
        return self._by_alias.get(alias)
