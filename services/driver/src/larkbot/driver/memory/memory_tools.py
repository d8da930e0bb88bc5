"""The memory tools of the primary turn (SPEC §7, docs/memory.md): ``memory_save``, ``memory_search``,
``memory_patch``, executed against the driver's memory store for one chat.

Decisions:

- A save is checked before anything is written (:mod:`.core.evidence`); every rejection names the
  message and the reason, so the model can correct the call, and is counted by reason.
- What a chat may touch is what it may see (:class:`.core.memory.Visibility`): a search finds, and a
  patch changes, only memories usable here; a disabled memory counts as usable for a patch that
  re-enables it. A memory never moves into another chat: its ``chat_id`` is where it was learnt.
- ``global`` exists only where the deployment allows it (``memory.global_scope``).
- Each save carries the tool call's idempotency key: a step redone after a crash saves nothing twice.
- Results are short deterministic texts; search results are bounded in count and characters.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from .. import metrics
from .core import evidence
from .core.memory import Memory, NewMemory, PatchChange, Visibility
from .memories import MemoryNotFound, MemoryStore

#: Resolves the ids the model wrote: ``(shown, canonical or None)`` in order, plus the provenance of
#: every message known now (the executor's live context and history lookups).
Resolver = Callable[
    [Sequence[str]],
    Awaitable[tuple[list[tuple[str, str | None]], Mapping[str, evidence.Provenance]]],
]


@dataclass(frozen=True, slots=True)
class MemoryAccess:
    """The memory side of one chat's wake-up."""

    store: MemoryStore
    visibility: Visibility
    search_max_results: int
    search_max_chars: int


def _usable(memory: Memory, visibility: Visibility) -> bool:
    return visibility.admits(replace(memory, enabled=True))


def result_line(memory: Memory) -> str:
    return (
        f'<memory id="{memory.id}" uid={quoteattr(memory.person_id)} importance="{memory.importance}" '
        f'scope="{memory.scope}">{escape(memory.content)}</memory>'
    )


class MemoryTools:
    def __init__(self, access: MemoryAccess, resolve: Resolver, now_ms: Callable[[], int]) -> None:
        self.access = access
        self.resolve = resolve
        self.now_ms = now_ms

    async def save(self, args: dict[str, Any], idempotency_key: str) -> tuple[bool, str]:
        visibility = self.access.visibility
        person: str = args["person"]
        content = " ".join(args["content"].split())
        scope = args["scope"]
        if not content:
            return self._reject("empty", "the content is empty")
        if scope == "global" and not visibility.global_allowed:
            return self._reject("scope", "scope global is not enabled in this deployment; use group")
        cited, known = await self.resolve(args["evidence_message_ids"])
        checked = evidence.check(person, cited, known)
        if isinstance(checked, evidence.Rejected):
            return self._reject(checked.reason, checked.message)
        supersedes = tuple(args.get("supersedes", ()))
        if supersedes:
            found = await self.access.store.get(supersedes)
            for memory_id in supersedes:
                old = found.get(memory_id)
                if old is None or not _usable(old, visibility) or old.person_id != person:
                    return self._reject("supersedes", f"no memory {memory_id} of {person} usable here")
        memory = await self.access.store.save(
            NewMemory(
                platform=visibility.platform,
                person_id=person,
                content=content,
                evidence=checked,
                chat_id=visibility.chat_id,
                scope=scope,
                importance=args["importance"],
                supersedes=supersedes,
                key=idempotency_key,
            ),
            now_ms=self.now_ms(),
        )
        # The superseded memories leave the active set; the new one stands for them.
        for memory_id in supersedes:
            await self.access.store.patch(
                memory_id,
                PatchChange(enabled=False),
                reason=f"superseded by {memory.id}",
                actor="tool",
                chat_id=visibility.chat_id,
                now_ms=self.now_ms(),
                key=f"{idempotency_key}:{memory_id}",
            )
        metrics.MEMORY_OPS.labels("save", "ok").inc()
        return True, f"saved memory {memory.id} ({memory.importance}, {memory.scope})"

    def _reject(self, reason: str, message: str) -> tuple[bool, str]:
        metrics.MEMORY_OPS.labels("save", "rejected").inc()
        metrics.MEMORY_REJECTED.labels(reason).inc()
        return False, f"not saved: {message}"

    async def search(self, args: dict[str, Any]) -> tuple[bool, str]:
        access = self.access
        started = time.perf_counter()
        found = await access.store.search(
            args["query"], access.visibility, person_id=args.get("person"), limit=access.search_max_results
        )
        metrics.MEMORY_SEARCH_SECONDS.observe(time.perf_counter() - started)
        metrics.MEMORY_OPS.labels("search", "ok").inc()
        lines: list[str] = []
        used = 0
        for memory in found:
            line = result_line(memory)
            if used + len(line) > access.search_max_chars:
                break
            lines.append(line)
            used += len(line) + 1
        if not lines:
            return True, "no memories found"
        return True, "\n".join(lines)

    async def patch(self, args: dict[str, Any], idempotency_key: str) -> tuple[bool, str]:
        visibility = self.access.visibility
        memory_id: int = args["id"]
        if not any(k in args for k in ("enabled", "importance", "scope", "supersedes", "related_to")):
            return self._patch_error(
                "nothing to change: give enabled, importance, scope, supersedes or related_to"
            )
        change = PatchChange(
            enabled=args.get("enabled"),
            importance=args.get("importance"),
            scope=args.get("scope"),
            supersedes=tuple(args["supersedes"]) if "supersedes" in args else None,
            related_to=tuple(args["related_to"]) if "related_to" in args else None,
        )
        if change.scope == "global" and not visibility.global_allowed:
            return self._patch_error("scope global is not enabled in this deployment")
        found = await self.access.store.get(
            (memory_id, *(change.supersedes or ()), *(change.related_to or ()))
        )
        target = found.get(memory_id)
        if target is None or not _usable(target, visibility):
            return self._patch_error(f"no memory {memory_id} usable here")
        for other in (*(change.supersedes or ()), *(change.related_to or ())):
            linked = found.get(other)
            if linked is None or not _usable(linked, visibility):
                return self._patch_error(f"no memory {other} usable here")
        try:
            patched = await self.access.store.patch(
                memory_id,
                change,
                reason=str(args.get("reason", "")),
                actor="tool",
                chat_id=visibility.chat_id,
                now_ms=self.now_ms(),
                key=idempotency_key,
            )
        except MemoryNotFound:
            return self._patch_error(f"no memory {memory_id} usable here")
        metrics.MEMORY_OPS.labels("patch", "ok").inc()
        state = "enabled" if patched.enabled else "disabled"
        return True, f"memory {patched.id} is now {state}, {patched.importance}, {patched.scope}"

    def _patch_error(self, message: str) -> tuple[bool, str]:
        metrics.MEMORY_OPS.labels("patch", "rejected").inc()
        return False, f"error: {message}"
