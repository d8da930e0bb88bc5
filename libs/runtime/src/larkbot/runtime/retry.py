"""When to try a platform call again: one policy for every send, pure (the caller sleeps and supplies the
randomness, so tests state the exact waits).

A call's failure is one of three kinds (the caller classifies, because only it knows the wire):

- ``rate_limited``: the platform said when to come back (Telegram's ``retry_after``, Feishu's
  ``x-ogw-ratelimit-reset``); that wait is taken as it is — the pacer that books every send's slot
  spreads the senders, so it needs no jitter;
- ``transient``: the platform refused it for now (an error answer such as a 5xx) or the request never
  reached it; the wait grows exponentially with jitter;
- ``lost``: the request may have been executed and its answer never came (a timeout, a connection closed
  after the request was written). Only a caller whose platform deduplicates (Feishu's ``uuid``) may try
  again; Telegram's sent-ledger never does.

Anything else (a refusal that repeating cannot change) is final and never reaches the policy.

Every retry is bounded twice: by ``max_attempts`` and by the time left until the caller's deadline (the
turn's): a wait that would start the next attempt at or after the deadline is not taken. A wait longer
than ``max_wait_s`` (a 429 asking for minutes) is not taken either.

The shape is aiogram's ``BackoffConfig`` (``min_delay``, ``max_delay``, ``factor``, ``jitter``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Failure(StrEnum):
    RATE_LIMITED = "rate_limited"
    TRANSIENT = "transient"
    LOST = "lost"


@dataclass(frozen=True, slots=True)
class Backoff:
    """``initial_s`` doubling (``factor``) to ``max_s``; each wait spread by ±``jitter`` of itself."""

    initial_s: float = 0.5
    max_s: float = 8.0
    factor: float = 2.0
    jitter: float = 0.25

    def __post_init__(self) -> None:
        if not (0 < self.initial_s <= self.max_s and self.factor >= 1 and 0 <= self.jitter < 1):
            raise ValueError(f"invalid backoff {self}")

    def delay(self, retry: int, u: float) -> float:
        """The wait before retry number ``retry`` (1 for the first); ``u`` uniform in [0, 1)."""
        base = min(self.max_s, self.initial_s * self.factor ** max(0, retry - 1))
        return base * (1.0 + self.jitter * (2.0 * u - 1.0))


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    backoff: Backoff = Backoff()
    max_attempts: int = 8
    max_wait_s: float = 60.0

    def wait(
        self,
        failure: Failure,
        attempts: int,
        left_s: float,
        u: float,
        retry_after_s: float | None = None,
    ) -> float | None:
        """Seconds to wait before the next attempt after ``attempts`` failed ones, or ``None``: give up.
        ``left_s``: time until the deadline; ``retry_after_s``: the platform's own wait (rate limits)."""
        if attempts >= self.max_attempts:
            return None
        if failure is Failure.RATE_LIMITED and retry_after_s is not None:
            wait = max(0.0, retry_after_s)
        else:
            wait = self.backoff.delay(attempts, u)
        if wait > self.max_wait_s or wait >= left_s:
            return None
        return wait
