"""The one retry policy: when to try again, and the loop that does it (tenacity's).

A policy is three numbers and a backoff, all from configuration (``retry.*`` in ``config.yaml``,
:class:`~larkbot.runtime.config.RetrySettings`): ``initial_s`` doubling (``factor``) to ``max_s``, each
wait spread by ±``jitter`` of itself; at most ``max_attempts`` attempts (``None``: until the caller's
deadline or stop); no single wait longer than ``max_wait_s`` (a 429 asking for minutes is not waited out).

A failure is one of three kinds (the caller classifies, because only it knows the wire):

- ``rate_limited``: the platform said when to come back (Telegram's ``retry_after``, Feishu's
  ``x-ogw-ratelimit-reset``); that wait is taken as it is — the pacer that books every send's slot
  spreads the senders, so it needs no jitter;
- ``transient``: refused for now (an error answer such as a 5xx) or the request never reached anyone;
  the wait grows exponentially with jitter;
- ``lost``: the request may have been executed and its answer never came (a timeout). Only a caller
  whose platform deduplicates (Feishu's ``uuid``) may try again; Telegram's sent-ledger never does.

Anything else (a refusal that repeating cannot change) is final and never reaches the policy.

Every retry is bounded by ``max_attempts`` and by the time left until the caller's deadline: a wait that
would start the next attempt at or after the deadline is not taken.

:meth:`RetryPolicy.wait` is the decision, pure (:mod:`.backoff`; tests state the exact waits).
:func:`retrying` runs it: a ``tenacity.AsyncRetrying`` whose attempts, stop and hooks are tenacity's and
whose waits are this policy's. The first attempt runs before tenacity is built: nearly every call succeeds
at once, and building and driving tenacity's machinery costs ~27 µs a call (measured), on the path of
every send and every publish. A first attempt that fails is handed to tenacity as its own first attempt,
so what follows — the waits, the hooks, giving up — is tenacity's either way.

Why tenacity rather than stamina (which wraps it): stamina's jitter is additive and fixed
(``+ random(0, wait_jitter)``), where ours is ±25 % of the wait; it stops on total time since the first
attempt, where a send stops when the *next* attempt would start past the turn's deadline (read anew after
each failure); and its test switches are global (``set_testing``), where each of our callers injects its
own ``sleep`` and randomness. tenacity takes wait, stop and retry as plain callables.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol

from tenacity import AsyncRetrying, RetryCallState

from .backoff import Backoff, Classify, Failure, RetryPolicy, forever

__all__ = ["Attempt", "AttemptNumber", "Backoff", "Classify", "Failure", "RetryPolicy", "forever", "retrying"]


class AttemptNumber(Protocol):
    @property
    def attempt_number(self) -> int: ...


class Attempt(Protocol):
    """One attempt of :func:`retrying`: ``with attempt:`` around it; ``retry_state.attempt_number`` from 1."""

    @property
    def retry_state(self) -> AttemptNumber: ...

    def __enter__(self) -> None: ...

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None: ...


def retrying(
    policy: RetryPolicy,
    classify: Classify,
    *,
    left_s: Callable[[], float] = lambda: float("inf"),
    retry_after: Callable[[BaseException], float | None] = lambda _exc: None,
    paced: bool = False,
    on_retry: Callable[[Failure, int, float, BaseException | None], None] = lambda *_: None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    jitter: Callable[[], float] = random.random,
) -> AsyncIterator[Attempt]:
    """The attempts of one call, to iterate with ``async for attempt in …: with attempt: …``.

    ``classify`` says whether a failure is retried (a final one is raised as it is; when the policy
    gives up, the last failure is raised). An answer worth asking again about is raised by the
    caller as a failure of its own (the driver's re-ask). ``left_s`` is the
    time left until the caller's deadline, read after each failure. ``paced``: a rate limit's wait
    is kept by the caller's pacer before its next attempt, so it is checked against the bounds but
    not slept here. ``on_retry(failure, attempts, wait, exc)`` runs before each wait (metrics, a log
    line; ``exc`` is ``None`` when an answer is retried).
    """
    decisions: dict[int, tuple[Failure, float | None, bool]] = {}

    def decide(state: RetryCallState) -> tuple[Failure, float | None, bool]:
        known = decisions.get(state.attempt_number)
        if known is not None:
            return known
        outcome = state.outcome
        assert outcome is not None
        exc = outcome.exception()
        assert exc is not None
        failure = classify(exc)
        after = retry_after(exc)
        if failure is None:
            decision: tuple[Failure, float | None, bool] = (Failure.TRANSIENT, None, False)
        else:
            wait = policy.wait(failure, state.attempt_number, left_s(), jitter(), after)
            kept = paced and failure is Failure.RATE_LIMITED and after is not None
            sleeps = wait is not None and not kept
            decision = (failure, wait, sleeps)
        decisions[state.attempt_number] = decision
        return decision

    def retry(state: RetryCallState) -> bool:
        outcome = state.outcome
        assert outcome is not None
        if not outcome.failed:
            return False
        exc = outcome.exception()
        return not isinstance(exc, asyncio.CancelledError) and exc is not None and classify(exc) is not None

    def wait(state: RetryCallState) -> float:
        _failure, seconds, sleeps = decide(state)
        return seconds if seconds is not None and sleeps else 0.0

    def stop(state: RetryCallState) -> bool:
        return decide(state)[1] is None

    def before_sleep(state: RetryCallState) -> None:
        failure, seconds, _sleeps = decide(state)
        outcome = state.outcome
        exc = outcome.exception() if outcome is not None and outcome.failed else None
        on_retry(failure, state.attempt_number, seconds or 0.0, exc)

    def build() -> AsyncRetrying:
        return AsyncRetrying(
            sleep=sleep,
            retry=retry,
            wait=wait,
            stop=stop,
            before_sleep=before_sleep,
            reraise=True,
        )

    return _Attempts(classify, build)


@dataclass(frozen=True, slots=True)
class _Number:
    attempt_number: int


_FIRST = _Number(1)


class _FirstAttempt:
    """The first attempt, without tenacity: a failure worth retrying is kept (for tenacity), any other
    leaves as it is — what tenacity's ``reraise`` would have done after its ``retry`` said no."""

    __slots__ = ("classify", "failure", "ran")
    retry_state: AttemptNumber = _FIRST

    def __init__(self, classify: Classify) -> None:
        self.classify = classify
        self.failure: Exception | None = None
        self.ran = False

    def __enter__(self) -> None:
        self.ran = True

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        if isinstance(exc, Exception) and self.classify(exc) is not None:
            self.failure = exc
            return True
        return False


class _Attempts:
    """The attempts of one call: the first one :class:`_FirstAttempt`, the others tenacity's."""

    __slots__ = ("build", "first", "rest")

    def __init__(self, classify: Classify, build: Callable[[], AsyncRetrying]) -> None:
        self.build = build
        self.first = _FirstAttempt(classify)
        self.rest: AsyncRetrying | None = None

    def __aiter__(self) -> _Attempts:
        return self

    async def __anext__(self) -> Attempt:
        if self.rest is not None:
            attempt: Attempt = await self.rest.__anext__()
            return attempt
        first = self.first
        if not first.ran:
            return first
        failure = first.failure
        if failure is None:
            raise StopAsyncIteration
        # Tenacity's first attempt is the one that already failed: it decides the wait (or gives up and
        # raises the failure) exactly as if it had run it.
        self.rest = self.build().__aiter__()
        replayed = await self.rest.__anext__()
        with replayed:
            raise failure
        attempt = await self.rest.__anext__()
        return attempt
