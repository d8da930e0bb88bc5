"""The cache-break watch (docs/driver.md "Cache-break watch"): whether a chat's primary request extends
the one before it, block by block (``core.requestlog``), and if not, where and why.

A primary request is *intact* when it repeats every block of the previous one but that request's last
message, in order: the late-binding message is rebuilt for every request and always comes last, so only
the blocks before it are a provider's cacheable prefix. "The previous one" is the chat's last primary
request that reached the model, whether it was an earlier step of the same tool loop or the last step of
an earlier wake-up: a provider's cache does not know wake-ups.

A break names the first block a provider's cache can no longer serve and one cause of a closed set,
tried in this order:

=========== ======== ======================================================================================
cause       expected what changed
=========== ======== ======================================================================================
model       no       the endpoint (a provider caches per model: nothing carries over; block 0)
tool_offer  yes      the tools block, offering other tools: a wrap-up or react-only step, the shell gate
                     opening or closing, a chat's memory or ban switch
tools       no       the tools block, offering the same tools with other definitions (an upgrade, or a
                     definition that is not byte-stable); also any tools change whose texts are unknown
system      no       the system block: it depends only on the bot's name, the platform, the persona
                     texts and the chat's memory switch, so it changes with the configuration or not at all
compaction  yes      a compaction was applied in between (the summary's cursor moved): the history is
                     rebuilt from the new summary
trimmed     yes      the history is trimmed (it did not fit and could not be compacted) and its start
                     moved
reasoning   yes      an older assistant message lost its reasoning or provider payload, replayed only
                     for the newest turn responses (``reasoning_replay_turns``)
history     yes      a member's message part rewritten or removed: an edit or deletion of an old message
                     the pipeline re-rendered in place
unexplained no       anything else: the bot's own stored turn responses are immutable, so a rewrite of
                     one (or a segment merged in before it) is a bug worth a look
=========== ======== ======================================================================================

A changed persona or tool definition breaks each chat's prefix once; a cause that recurs on every
request is what the alert is for (docs/operations.md "LarkbotPromptCacheBroken").

What is kept of a request between two (:class:`PromptShape`) is small and fixed per block: the first
8 bytes of each cacheable block's sha256, its kind and its role; comparing two requests compares one
byte string first and walks the blocks only on a break.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from .requestlog import Block

#: Every cause, in the order they are tried.
CAUSES = (
    "model",
    "tool_offer",
    "tools",
    "system",
    "compaction",
    "trimmed",
    "reasoning",
    "history",
    "unexplained",
)
#: The causes the driver's own design accounts for.
EXPECTED = frozenset({"tool_offer", "compaction", "trimmed", "reasoning", "history"})

#: Bytes of a block's sha256 kept per block: 64 bits keep two blocks of one chat apart.
_DIGEST_BYTES = 8
#: How a trimmed history's marker starts (``wake.core.prompt.omitted_marker``).
_OMITTED = "<omitted messages="
#: A label's first word: ``tools``, ``system``, ``user``, ``assistant``, ``tool_result``.
_MEMBER = "user"


@dataclass(frozen=True, slots=True)
class PromptShape:
    """What is kept of a primary request to tell whether the next one extends it: its endpoint, the
    cursor of the compaction summary it was built on, and its cacheable blocks (all but its last
    message's) as digests, kinds and roles."""

    endpoint: str
    summary_cursor: int | None
    digests: bytes
    kinds: tuple[str, ...]
    roles: tuple[str, ...]
    #: Names of the offered tools, ``None`` when the tools block's text is unknown (not stored).
    tool_names: tuple[str, ...] | None

    @classmethod
    def of(cls, blocks: Sequence[Block], endpoint: str, summary_cursor: int | None) -> PromptShape:
        cacheable = blocks[: _cacheable(blocks)]
        return cls(
            endpoint,
            summary_cursor,
            _digests(cacheable),
            tuple(b.kind for b in cacheable),
            tuple(_role(b.label) for b in cacheable),
            _tool_names(blocks[0]) if blocks else None,
        )


@dataclass(frozen=True, slots=True)
class CacheBreak:
    """Where and why a request failed to extend the previous one: the first block a provider's cache
    cannot serve (``index`` in the request's blocks, its ``label`` and ``kind``) and the cause."""

    cause: str
    index: int
    label: str
    kind: str

    @property
    def expected(self) -> bool:
        return self.cause in EXPECTED


def cache_break(
    before: PromptShape, blocks: Sequence[Block], endpoint: str, summary_cursor: int | None
) -> CacheBreak | None:
    """``None`` when ``blocks`` (a request to ``endpoint`` built on the summary at ``summary_cursor``)
    extend ``before``; else the break (see the module docstring)."""
    digests = _digests(blocks[: len(before.kinds)])
    if endpoint != before.endpoint:
        return _at("model", 0, blocks, before)
    if digests == before.digests:
        return None
    index = _first_difference(before.digests, digests)
    if index == 0:
        names = _tool_names(blocks[0])
        offer = names is not None and before.tool_names is not None and set(names) != set(before.tool_names)
        return _at("tool_offer" if offer else "tools", 0, blocks, before)
    if index == 1:
        return _at("system", 1, blocks, before)
    if summary_cursor != before.summary_cursor:
        return _at("compaction", index, blocks, before)
    text = blocks[index].text if index < len(blocks) else None
    if text is not None and text.startswith(_OMITTED):
        return _at("trimmed", index, blocks, before)
    if before.kinds[index] in ("reasoning", "provider_extra"):
        return _at("reasoning", index, blocks, before)
    if before.roles[index] == _MEMBER:
        return _at("history", index, blocks, before)
    return _at("unexplained", index, blocks, before)


def _at(cause: str, index: int, blocks: Sequence[Block], before: PromptShape) -> CacheBreak:
    if index < len(blocks):
        block = blocks[index]
        return CacheBreak(cause, index, block.label, block.kind)
    # The request ended inside the previous one's cacheable part: name what it lacks.
    return CacheBreak(cause, index, f"{before.roles[index]} (missing)", before.kinds[index])


def _cacheable(blocks: Sequence[Block]) -> int:
    """How many leading blocks precede the last message's (the late-binding message's)."""
    last = _message(blocks[-1].label) if blocks else 0
    if last == 0:
        return len(blocks)
    n = len(blocks)
    while n > 0 and _message(blocks[n - 1].label) == last:
        n -= 1
    return n


def _message(label: str) -> int:
    """The message number of a block's label (``user #3 part 2`` → 3); 0 for tools and system."""
    _role_word, _, rest = label.partition(" #")
    number, _, _tail = rest.partition(" ")
    return int(number) if number.isdigit() else 0


def _role(label: str) -> str:
    return sys.intern(label.partition(" ")[0])


def _digests(blocks: Sequence[Block]) -> bytes:
    return b"".join(bytes.fromhex(b.sha256[: 2 * _DIGEST_BYTES]) for b in blocks)


def _first_difference(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b)) // _DIGEST_BYTES
    for i in range(n):
        if a[i * _DIGEST_BYTES : (i + 1) * _DIGEST_BYTES] != b[i * _DIGEST_BYTES : (i + 1) * _DIGEST_BYTES]:
            return i
    return n


#: Tool names by tools-block digest: a deployment offers a handful of tool sets, parsed once each.
_names_by_digest: dict[str, tuple[str, ...]] = {}
_NAMES_KEPT = 256


def _tool_names(block: Block) -> tuple[str, ...] | None:
    if block.kind != "tools" or block.text is None:
        return None
    names = _names_by_digest.get(block.sha256)
    if names is None:
        names = tuple(spec["name"] for spec in json.loads(block.text))
        if len(_names_by_digest) >= _NAMES_KEPT:
            _names_by_digest.clear()
        _names_by_digest[block.sha256] = names
    return names


__all__ = ["CAUSES", "EXPECTED", "CacheBreak", "PromptShape", "cache_break"]
