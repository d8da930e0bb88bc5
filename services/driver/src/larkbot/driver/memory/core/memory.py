"""Per-person memories (SPEC §7): what the bot learned about a person, citing the messages it came from.

A memory is an event: saved once, never edited or deleted. What changes later is recorded as
:class:`MemoryPatch` events (enable/disable, importance, scope, supersedes, related-to), applied in patch
order by :func:`fold` to give the current view, :class:`Memory`. The content and evidence cannot be
patched: a correction is a new memory that supersedes the old one. The one deletion is an operator's
forget, which removes everything of a person (``adapters.memories``).

Scopes say where a memory may be used (:class:`Visibility`): ``group`` in the chat it was learned in,
``private`` in a direct chat with the person, ``global`` in any chat of the platform that allows global
memories. Importance ``high`` memories of the people in the window enter the late-binding prompt;
``normal`` ones are found by search. Memories never grant permissions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from typing import Literal, cast, get_args

Scope = Literal["group", "private", "global"]
Importance = Literal["high", "normal"]
Origin = Literal["tool", "consolidation"]
Actor = Literal["tool", "consolidation", "operator"]

SCOPES: tuple[Scope, ...] = get_args(Scope)
IMPORTANCES: tuple[Importance, ...] = get_args(Importance)
ORIGINS: tuple[Origin, ...] = get_args(Origin)
ACTORS: tuple[Actor, ...] = get_args(Actor)

#: The longest memory content accepted. A memory is a fact about a person, not a transcript.
MAX_CONTENT_CHARS = 4_000


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


def _check_ids(name: str, ids: tuple[int, ...]) -> None:
    _require(
        all(isinstance(i, int) and not isinstance(i, bool) and i > 0 for i in ids),
        f"{name} must be positive memory ids",
    )
    _require(len(set(ids)) == len(ids), f"{name} repeats an id")


@dataclass(frozen=True, slots=True)
class NewMemory:
    platform: str
    #: The stable platform user id, never a display name.
    person_id: str
    content: str
    #: Canonical ids of the person's own messages the memory was drawn from; at least one.
    evidence: tuple[str, ...]
    #: The chat the memory was learned in.
    chat_id: str
    scope: Scope
    importance: Importance
    origin: Origin = "tool"
    supersedes: tuple[int, ...] = ()
    related_to: tuple[int, ...] = ()
    #: Idempotency key (the tool call's, or the consolidation's): saving again under the same key returns
    #: the memory saved first instead of a second one.
    key: str | None = None

    def __post_init__(self) -> None:
        _require(bool(self.platform), "platform is empty")
        _require(bool(self.person_id), "person_id is empty")
        _require(bool(self.chat_id), "chat_id is empty")
        _require(bool(self.content.strip()), "content is empty")
        _require(len(self.content) <= MAX_CONTENT_CHARS, f"content is over {MAX_CONTENT_CHARS} characters")
        _require(bool(self.evidence) and all(self.evidence), "evidence must name at least one message")
        _require(self.scope in SCOPES, f"unknown scope {self.scope!r}")
        _require(self.importance in IMPORTANCES, f"unknown importance {self.importance!r}")
        _require(self.origin in ORIGINS, f"unknown origin {self.origin!r}")
        _check_ids("supersedes", self.supersedes)
        _check_ids("related_to", self.related_to)


@dataclass(frozen=True, slots=True)
class PatchChange:
    """What a patch sets; ``None`` leaves a field as it is. ``supersedes`` and ``related_to`` replace the
    whole list. There is deliberately no field for the content or the evidence."""

    enabled: bool | None = None
    importance: Importance | None = None
    scope: Scope | None = None
    supersedes: tuple[int, ...] | None = None
    related_to: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        _require(any(getattr(self, f.name) is not None for f in fields(self)), "a patch changes nothing")
        _require(self.importance is None or self.importance in IMPORTANCES, "unknown importance")
        _require(self.scope is None or self.scope in SCOPES, "unknown scope")
        if self.supersedes is not None:
            _check_ids("supersedes", self.supersedes)
        if self.related_to is not None:
            _check_ids("related_to", self.related_to)

    def referenced(self) -> tuple[int, ...]:
        """Every memory id the change points at."""
        return (*(self.supersedes or ()), *(self.related_to or ()))

    def as_dict(self) -> dict[str, object]:
        """The fields it sets, JSON-ready (how a patch is stored and exported)."""
        out: dict[str, object] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> PatchChange:
        def ids(key: str) -> tuple[int, ...] | None:
            value = data.get(key)
            if value is None:
                return None
            if not isinstance(value, list):
                raise ValueError(f"{key} is not a list")
            return tuple(value)

        unknown = set(data) - {f.name for f in fields(cls)}
        _require(not unknown, f"unknown patch fields {sorted(unknown)}")
        enabled, importance, scope = data.get("enabled"), data.get("importance"), data.get("scope")
        _require(enabled is None or isinstance(enabled, bool), "enabled is not a boolean")
        _require(importance is None or importance in IMPORTANCES, f"unknown importance {importance!r}")
        _require(scope is None or scope in SCOPES, f"unknown scope {scope!r}")
        return cls(
            enabled=cast("bool | None", enabled),
            importance=cast("Importance | None", importance),
            scope=cast("Scope | None", scope),
            supersedes=ids("supersedes"),
            related_to=ids("related_to"),
        )


@dataclass(frozen=True, slots=True)
class MemoryPatch:
    id: int
    memory_id: int
    change: PatchChange
    reason: str
    actor: Actor
    #: The chat the patch was made from; ``None`` for an operator or maintenance outside any chat.
    chat_id: str | None
    created_at_ms: int

    def as_dict(self) -> dict[str, object]:
        """JSON-ready, the change as it is stored (how a patch is exported)."""
        return {
            "id": self.id,
            "memory_id": self.memory_id,
            "change": self.change.as_dict(),
            "reason": self.reason,
            "actor": self.actor,
            "chat_id": self.chat_id,
            "created_at_ms": self.created_at_ms,
        }


@dataclass(frozen=True, slots=True)
class Memory:
    """The current view: the memory event with its patches folded in, in patch order."""

    id: int
    platform: str
    person_id: str
    content: str
    evidence: tuple[str, ...]
    chat_id: str
    scope: Scope
    importance: Importance
    enabled: bool
    origin: Origin
    supersedes: tuple[int, ...]
    related_to: tuple[int, ...]
    created_at_ms: int
    #: The last patch's time, or ``created_at_ms``.
    updated_at_ms: int


def saved(memory_id: int, new: NewMemory, created_at_ms: int) -> Memory:
    """The view of a memory event with no patches."""
    return Memory(
        id=memory_id,
        platform=new.platform,
        person_id=new.person_id,
        content=new.content,
        evidence=new.evidence,
        chat_id=new.chat_id,
        scope=new.scope,
        importance=new.importance,
        enabled=True,
        origin=new.origin,
        supersedes=new.supersedes,
        related_to=new.related_to,
        created_at_ms=created_at_ms,
        updated_at_ms=created_at_ms,
    )


def apply(memory: Memory, change: PatchChange, at_ms: int) -> Memory:
    return replace(
        memory,
        enabled=memory.enabled if change.enabled is None else change.enabled,
        importance=change.importance or memory.importance,
        scope=change.scope or memory.scope,
        supersedes=memory.supersedes if change.supersedes is None else change.supersedes,
        related_to=memory.related_to if change.related_to is None else change.related_to,
        updated_at_ms=at_ms,
    )


def fold(memory: Memory, patches: Iterable[MemoryPatch]) -> Memory:
    """Apply ``memory``'s patches in patch order (by id, whatever order they are given in)."""
    current = memory
    for patch in sorted(patches, key=lambda p: p.id):
        if patch.memory_id != memory.id:
            raise ValueError(f"patch {patch.id} belongs to memory {patch.memory_id}, not {memory.id}")
        current = apply(current, patch.change, patch.created_at_ms)
    return current


@dataclass(frozen=True, slots=True)
class Visibility:
    """Where a memory may be used: the current chat, as the store needs to know it."""

    platform: str
    chat_id: str
    #: The person's id when the current chat is a direct (1:1) chat with them, else ``None``.
    direct_with: str | None
    #: Whether the chat admits ``global`` memories.
    global_allowed: bool

    def admits(self, m: Memory) -> bool:
        if not m.enabled or m.platform != self.platform:
            return False
        if m.scope == "group":
            return m.chat_id == self.chat_id
        if m.scope == "private":
            return self.direct_with is not None and m.person_id == self.direct_with
        return self.global_allowed
