"""Message aliases (SPEC §3 "Aliases"): ``m`` + 9 base36 characters of a hash of (chat id, message id).

A hash, not a position: cold replay starts at the compaction cursor and would renumber positions, while a
hash is reproducible from persisted history alone. The pipeline renders them (its ``events.message_alias``
column is the same function); the driver derives the alias of a message it has just sent without waiting
for the pipeline, so both must compute it identically, hence here. 9 base36 characters hold ~46.5 bits,
so a collision within one chat is not expected in practice; when one happens, the renderer shows the later
message's canonical id instead (first claim in context order wins).

Aliases apply to Feishu only (:func:`aliases_enabled`): its ``om_…`` ids are 34 characters, while
Telegram's short numeric ids stay canonical so that message deep links keep working.
"""

from __future__ import annotations

import functools
import hashlib
import re

from .names import Platform

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


def aliases_enabled(platform: Platform | str, configured: bool) -> bool:
    """Whether a chat's messages render as aliases: the chat's ``alias_message_ids``, on Feishu only."""
    return configured and Platform(platform) is Platform.FEISHU


__all__ = ["ALIAS_PATTERN", "alias_for", "aliases_enabled", "looks_like_alias"]
