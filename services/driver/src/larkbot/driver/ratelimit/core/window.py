"""A sliding window with a cooldown, as pure arithmetic over one stored record (:class:`Window`).

A record holds the times of the *hits* counted (a person's wake-ups, a chat's primary turns) and the end
of a cooldown. Judged at ``now_ms`` against a :class:`Limit`:

- a hit already in the record is admitted again without counting twice (a retried wake-up names the
  same hit: its input's time);
- during a cooldown (``now_ms`` before its end) the hit is refused, reason ``cooldown``;
- when ``max_hits`` hits lie within the window (``now_ms - window_ms``, exclusive, to ``now_ms``) the
  hit is refused, reason ``window``; with a cooldown this starts it and clears the hits, so the one
  limited starts afresh when it ends; without one (``cooldown_ms`` 0) it is a plain sliding window,
  open again once the oldest counted hit leaves it;
- otherwise the hit is admitted and, when it is to be counted, added.

One record may be judged against different limits (a person writes in chats with different settings):
it keeps every hit of the last :data:`RETAIN_MS`, at most :data:`MAX_HITS`, which any limit the
configuration allows can count exactly. Times are the caller's (the clock is injected); nothing here
reads one.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass
from typing import Final, Literal

#: The most hits any limit may allow, and the longest window (``runtime.config.RATE_MAX_COUNT``,
#: ``RATE_WINDOW_MAX_S``): what a record must keep to answer every configured limit.
MAX_HITS: Final = 100
RETAIN_MS: Final = 86_400_000

Reason = Literal["window", "cooldown"]
REASONS: Final[tuple[Reason, ...]] = ("window", "cooldown")


@dataclass(frozen=True, slots=True)
class Limit:
    max_hits: int
    window_ms: int
    cooldown_ms: int = 0


@dataclass(frozen=True, slots=True)
class Window:
    """One stored record: the hits counted (ascending) and the end of a cooldown (0: none)."""

    hits: tuple[int, ...] = ()
    cooldown_until_ms: int = 0

    def encode(self) -> bytes:
        return json.dumps({"hits": list(self.hits), "cooldown_until_ms": self.cooldown_until_ms}).encode()

    @classmethod
    def decode(cls, data: bytes) -> Window:
        """Raises ``ValueError`` on anything but a record :meth:`encode` wrote."""
        raw = json.loads(data)
        if not isinstance(raw, dict) or set(raw) != {"hits", "cooldown_until_ms"}:
            raise ValueError("not a rate-limit record")
        hits, until = raw["hits"], raw["cooldown_until_ms"]
        if not isinstance(hits, list) or not all(type(h) is int for h in hits) or type(until) is not int:
            raise ValueError("not a rate-limit record")
        return cls(tuple(sorted(hits)), until)


@dataclass(frozen=True, slots=True)
class Verdict:
    """``reason`` ``None``: admitted. ``until_ms``: when a refused one may be admitted again."""

    reason: Reason | None = None
    until_ms: int | None = None

    @property
    def admitted(self) -> bool:
        return self.reason is None


ADMITTED: Final = Verdict()


def retained(window: Window, now_ms: int) -> Window:
    """``window`` without what no limit can count any more: hits older than :data:`RETAIN_MS` and
    beyond the newest :data:`MAX_HITS`, and a cooldown that has ended."""
    hits = tuple(h for h in window.hits if h > now_ms - RETAIN_MS)[-MAX_HITS:]
    until = window.cooldown_until_ms if window.cooldown_until_ms > now_ms else 0
    return Window(hits, until)


def judge(window: Window, limit: Limit, *, hit_ms: int, now_ms: int, count: bool) -> tuple[Verdict, Window]:
    """The verdict on the hit at ``hit_ms`` and the record to store (the same object: nothing to
    write). ``count``: an admitted hit is added (else only looked at: a chat is checked before its
    probe and counted when its turn starts, :func:`record`)."""
    if hit_ms in window.hits:
        return ADMITTED, window
    if window.cooldown_until_ms > now_ms:
        return Verdict("cooldown", window.cooldown_until_ms), window
    recent = [h for h in window.hits if h > now_ms - limit.window_ms]
    if len(recent) >= limit.max_hits:
        if limit.cooldown_ms == 0:
            return Verdict("window", recent[-limit.max_hits] + limit.window_ms), window
        until = now_ms + limit.cooldown_ms
        return Verdict("window", until), Window((), until)
    if not count:
        return ADMITTED, window
    return ADMITTED, record(window, hit_ms=hit_ms, now_ms=now_ms)


def record(window: Window, *, hit_ms: int, now_ms: int) -> Window:
    """``window`` with the hit at ``hit_ms`` counted, whatever the limit says (a turn that starts)."""
    if hit_ms in window.hits:
        return window
    hits = list(window.hits)
    bisect.insort(hits, hit_ms)
    return retained(Window(tuple(hits), window.cooldown_until_ms), now_ms)


__all__ = [
    "ADMITTED",
    "MAX_HITS",
    "REASONS",
    "RETAIN_MS",
    "Limit",
    "Reason",
    "Verdict",
    "Window",
    "judge",
    "record",
    "retained",
]
