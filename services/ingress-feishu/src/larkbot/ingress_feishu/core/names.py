"""The contact-name table: open_id → display name with a TTL, and which ids need a (re)fetch.

Pure: the caller passes ``now`` (monotonic seconds). A failed lookup is remembered as a miss for the same
TTL so that a user the app may not read is not asked for on every message; until a name is known the
adapter shows the open_id (SPEC §8), and the pipeline records a rename when the name arrives — old
messages keep the snapshot they were published with.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from types import MappingProxyType


class NameTable:
    def __init__(self, ttl_s: float, max_entries: int = 50_000) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        # open_id → (name or None for a failed lookup, fetched_at)
        self._entries: OrderedDict[str, tuple[str | None, float]] = OrderedDict()
        self._names: dict[str, str] = {}
        self.view: Mapping[str, str] = MappingProxyType(self._names)

    def names(self) -> Mapping[str, str]:
        """Every known name, live (stale ones too: a stale name beats an open_id while it refreshes)."""
        return self.view

    def get(self, open_id: str) -> str | None:
        entry = self._entries.get(open_id)
        return entry[0] if entry else None

    def stale(self, open_ids: Iterable[str], now: float) -> list[str]:
        """The ids among ``open_ids`` that were never looked up or whose entry expired."""
        out: list[str] = []
        for oid in dict.fromkeys(open_ids):
            entry = self._entries.get(oid)
            if entry is None or now - entry[1] >= self.ttl_s:
                out.append(oid)
        return out

    def put(self, open_id: str, name: str | None, now: float) -> None:
        """Record a lookup result; a miss never erases a name learned earlier."""
        previous = self._entries.get(open_id)
        if name is None and previous is not None and previous[0] is not None:
            name = previous[0]
        self._entries[open_id] = (name, now)
        self._entries.move_to_end(open_id)
        if name is not None:
            self._names[open_id] = name
        while len(self._entries) > self.max_entries:
            evicted, _ = self._entries.popitem(last=False)
            self._names.pop(evicted, None)

    def __len__(self) -> int:
        return len(self._entries)
