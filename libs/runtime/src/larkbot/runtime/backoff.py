"""The retry policy's decision, pure (no asyncio: a service's ``core/`` may hold its policy constants).

:mod:`larkbot.runtime.retry` runs it; the module docstring there says what the numbers mean.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .config import BackoffSettings

__all__ = ["Backoff", "Classify", "Failure", "RetryPolicy", "forever"]


class Failure(StrEnum):
    RATE_LIMITED = "rate_limited"
    TRANSIENT = "transient"
    LOST = "lost"


@dataclass(frozen=True, slots=True)
class Backoff:
    """``initial_s`` doubling (``factor``) to ``max_s``; each wait spread by ±``jitter`` of itself (the shape
    of aiogram's ``BackoffConfig``)."""

    initial_s: float = 0.5
    max_s: float = 8.0
    factor: float = 2.0
    jitter: float = 0.25

    def __post_init__(self) -> None:
        if not (0 < self.initial_s <= self.max_s and self.factor >= 1 and 0 <= self.jitter < 1):
            raise ValueError(f"invalid backoff {self}")

    @classmethod
    def of(cls, settings: BackoffSettings) -> Backoff:
        return cls(settings.initial_s, settings.max_s, settings.factor, settings.jitter)

    def delay(self, retry: int, u: float) -> float:
        """The wait before retry number ``retry`` (1 for the first); ``u`` uniform in [0, 1)."""
        base = min(self.max_s, self.initial_s * self.factor ** max(0, retry - 1))
        return base * (1.0 + self.jitter * (2.0 * u - 1.0))


#: Classifies a failed attempt: its kind, or ``None`` when it is final (raised as it is).
Classify = Callable[[BaseException], Failure | None]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    backoff: Backoff = Backoff()
    max_attempts: int | None = 8
    max_wait_s: float = 60.0

    @classmethod
    def of(cls, settings: BackoffSettings) -> RetryPolicy:
        return cls(Backoff.of(settings), settings.max_attempts, settings.max_wait_s)

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
        if self.max_attempts is not None and attempts >= self.max_attempts:
            return None
        if failure is Failure.RATE_LIMITED and retry_after_s is not None:
            wait = max(0.0, retry_after_s)
        else:
            wait = self.backoff.delay(attempts, u)
        if wait > self.max_wait_s or wait >= left_s:
            return None
        return wait


def forever(backoff: Backoff) -> RetryPolicy:
    """A policy that never gives up by itself (connect, restart a partition): bounded by the caller's
    stop; each wait is at most the backoff's ``max_s`` and its jitter."""
    return RetryPolicy(backoff, max_attempts=None, max_wait_s=backoff.max_s * (1 + backoff.jitter))
