"""A send's record in the sent-ledger, through a bucket that may not answer for a while.

The ledger's rules are ``core.ledger``'s; this module is how one attempt holds its record over the bus.
A bucket that does not answer (its leader being elected on a cluster, a reconnect, a timeout) is asked
again, :data:`~..core.retries.LEDGER_RETRY`:

- before the send, while the deadline allows: if it never answers, nothing was sent and the answer says
  so (``failed``, ``unavailable``, retryable). A claim stored though its answer was lost is this attempt's
  own — the record read back is the one it wrote — so the send goes on instead of waiting behind itself;
- after a part was sent, until :data:`~..core.retries.RECORD_GRACE_S` past the deadline: the send has
  happened and is answered as it went; a record the ledger never took stays ``pending`` (a repeat is
  ``in_progress``, later ``unknown``: never sent twice), logged and counted.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable

from larkbot.canonical.actions import ActionError, ActionResult
from larkbot.runtime.bus import BusUnavailable
from larkbot.runtime.ingress import failed
from larkbot.runtime.retry import Failure, retrying

from .. import metrics
from ..core import Record, State, decide
from ..core.ledger import recorded_answer, unknown_answer
from ..core.retries import LEDGER_RETRY, NO_DEADLINE_BUDGET_S, RECORD_GRACE_S
from .ledger import LedgerConflict, SentLedger

log = logging.getLogger(__name__)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def seconds_left(deadline_ms: int | None, clock: Callable[[], float]) -> Callable[[], float]:
    """Seconds left to an action's deadline, or of :data:`NO_DEADLINE_BUDGET_S` from now without one."""
    if deadline_ms is not None:
        return lambda: (deadline_ms - now_ms()) / 1000
    started = clock()
    return lambda: NO_DEADLINE_BUDGET_S - (clock() - started)


def pending(confirmed: list[str], parts: list[str]) -> Record:
    return Record(State.PENDING, tuple(confirmed), len(parts), now_ms())


class SendRecords:
    def __init__(
        self,
        ledger: SentLedger,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.ledger = ledger
        self.clock = clock
        self.sleep = sleep
        self.jitter = jitter

    async def late(self, key: str) -> ActionResult:
        """The answer to a send asked after its deadline: what the ledger recorded, else a refusal."""
        try:
            record, _ = await self.ledger.get(key)
        except BusUnavailable as exc:
            message = f"the deadline passed and the sent-ledger did not answer ({exc}): it may have been sent"
            error = ActionError(code="unavailable", message=message, retryable=False)
            return ActionResult(idempotency_key=key, ok=False, outcome="unknown", error=error)
        answer = recorded_answer(key, decide(record, now_ms()))
        return answer or failed(key, "deadline", "the deadline passed before execution")

    async def hold(
        self, key: str, parts: list[str], deadline_ms: int | None
    ) -> tuple[int, list[str]] | ActionResult:
        """Claim the key's record for this attempt: its revision and the parts confirmed before, or the
        answer the ledger gives instead."""
        mine = pending([], parts)
        try:
            async for attempt in retrying(
                LEDGER_RETRY,
                _bus_failure,
                left_s=seconds_left(deadline_ms, self.clock),
                on_retry=_retried,
                sleep=self.sleep,
                jitter=self.jitter,
            ):
                with attempt:
                    return await self._claim(key, parts, mine, retried=attempt.retry_state.attempt_number > 1)
        except BusUnavailable as exc:
            log.warning("send not started: %s", exc)
            return failed(key, "unavailable", f"nothing was sent: {exc}", retryable=True)
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _claim(
        self, key: str, parts: list[str], mine: Record, *, retried: bool
    ) -> tuple[int, list[str]] | ActionResult:
        try:
            # Nearly every send is a first attempt: claim the key at once (one round trip, where reading
            # the record first cost another ~0.5 ms per send); only a key that exists is read and decided.
            return await self.ledger.claim(key, mine), []
        except LedgerConflict:
            record, revision = await self.ledger.get(key)
        if retried and record == mine:
            return revision, []  # this attempt's own claim, stored though its answer was lost
        decision = decide(record, now_ms())
        answer = recorded_answer(key, decision)
        if answer is not None:
            return answer
        confirmed = list(decision.confirmed)
        resumed = pending(confirmed, parts)
        try:
            if record is None:  # expired between the two calls
                return await self.ledger.claim(key, resumed), confirmed
            return await self.ledger.put(key, resumed, revision), confirmed
        except LedgerConflict:
            return unknown_answer(key, tuple(confirmed), in_progress=True)  # another attempt holds the key

    async def record(self, key: str, record: Record, revision: int, deadline_ms: int | None) -> int:
        """Write what the attempt learnt; the new revision. Never fails the send (what Telegram did has
        happened): a record the ledger does not take in time is logged and counted."""
        left_s = seconds_left(deadline_ms, self.clock)
        try:
            async for attempt in retrying(
                LEDGER_RETRY,
                _bus_failure,
                left_s=lambda: left_s() + RECORD_GRACE_S,
                on_retry=_retried,
                sleep=self.sleep,
                jitter=self.jitter,
            ):
                with attempt:
                    return await self._write(key, record, revision)
        except (BusUnavailable, LedgerConflict) as exc:
            metrics.LEDGER_UNRECORDED.inc()
            log.error("send %s but not recorded (%s): idempotency key %s", record.state.value, exc, key)
        return revision

    async def _write(self, key: str, record: Record, revision: int) -> int:
        try:
            return await self.ledger.put(key, record, revision)
        except LedgerConflict:
            found, current = await self.ledger.get(key)
            if found == record:
                return current  # an earlier write of this record, stored though its answer was lost
            if found is not None:
                raise
            # Only this attempt holds a pending claim; a conflict with no record means it expired: claim it
            # afresh rather than lose what was confirmed.
            return await self.ledger.claim(key, record)


def _bus_failure(exc: BaseException) -> Failure | None:
    return Failure.TRANSIENT if isinstance(exc, BusUnavailable) else None


def _retried(_failure: Failure, attempts: int, wait: float, exc: BaseException | None) -> None:
    metrics.LEDGER_RETRIES.inc()
    log.warning("sent-ledger attempt %d failed (%s); retrying in %.2f s", attempts, exc, wait)
