"""Send pacing (pure): Telegram's limits as reservations on an injected monotonic clock.

Limits (Bot API FAQ): about one message per second in a chat, 20 messages per minute in a group, about
30 messages per second overall. A 429 carries ``retry_after``: :meth:`Pacer.block` holds the chat (or
every chat, when the platform did not say which) until then.

:meth:`Pacer.reserve` hands out the earliest slot that keeps every limit and books it, so concurrent
senders queue instead of racing: the caller sleeps until its slot. Per chat, slots are strictly
increasing; the global limit keeps every two booked slots (of any chats) ``1/global_per_s`` apart, so a
slot booked far ahead for a busy chat does not hold back the others.
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Limits:
    chat_interval_s: float = 1.0
    group_per_minute: int = 20
    global_per_s: float = 30.0


class Pacer:
    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self._chat_last: dict[str, float] = {}
        self._group_slots: dict[str, deque[float]] = {}
        self._blocked: dict[str, float] = {}
        self._global_blocked = 0.0
        self._global: list[float] = []  # booked slots, sorted

    def reserve(self, chat_id: str, is_group: bool, now: float) -> float:
        """Book the next send in ``chat_id``; returns its slot (≥ ``now``) on the same clock."""
        limits = self.limits
        t = max(now, self._blocked.get(chat_id, 0.0), self._global_blocked)
        last = self._chat_last.get(chat_id)
        if last is not None:
            t = max(t, last + limits.chat_interval_s)
        slots = self._group_slots.setdefault(chat_id, deque())
        while slots and slots[0] <= now - 60.0:
            slots.popleft()
        if is_group and len(slots) >= limits.group_per_minute:
            t = max(t, slots[-limits.group_per_minute] + 60.0)
        t = self._global_slot(t, now)
        self._chat_last[chat_id] = t
        if is_group:
            slots.append(t)
        elif not slots:
            del self._group_slots[chat_id]
        return t

    def _global_slot(self, t: float, now: float) -> float:
        gap = 1.0 / self.limits.global_per_s
        cut = bisect.bisect_left(self._global, now - 1.0)
        del self._global[:cut]
        i = bisect.bisect_left(self._global, t - gap)
        while i < len(self._global) and self._global[i] < t + gap:
            t = max(t, self._global[i] + gap)
            i += 1
        bisect.insort(self._global, t)
        return t

    def block(self, chat_id: str | None, until: float) -> None:
        """Hold sends until ``until`` (after a 429): one chat, or all when ``chat_id`` is ``None``."""
        if chat_id is None:
            self._global_blocked = max(self._global_blocked, until)
        else:
            self._blocked[chat_id] = max(self._blocked.get(chat_id, 0.0), until)


def is_group_chat(chat_id: str) -> bool:
    """Groups, supergroups and channels have negative ids; users (private chats) positive ones."""
    return chat_id.startswith("-")
