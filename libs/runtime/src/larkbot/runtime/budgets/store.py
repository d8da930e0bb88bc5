"""The budgets on the bus: spends booked with compare-and-set in the budget buckets, shared by every
replica of an ingress service.

- A spend reads the key, applies :mod:`.core` and writes with ``update(key, value, last=revision)``
  (``create`` for a key not there); a replica that lost the race (wrong last sequence) reads again and
  decides again, so the booked sends of two replicas never exceed the limit. A key the bucket's TTL
  removed holds nothing that still counts. A replica skips the read when it knows what it last wrote
  there: the compare-and-set fails if anything changed since, and it reads then.
- A bucket that does not answer is asked again (:data:`BUDGET_RETRY`, while the caller's time allows:
  ``left_s``, else :data:`DEFAULT_WAIT_S`), as the sent-ledger is: a NATS election or a restarted
  server holding the bucket stalls a send for seconds, it must not fail it. One that still does not
  answer raises :class:`BudgetUnavailable` (retryable): nothing was spent and the action did not run —
  a budget that cannot be counted is not spent blindly.
- A refusal raises :class:`BudgetSpent`; :func:`budget_refusal` is the action result the driver
  understands (code ``budget_spent``). Every refusal and every remaining count is exported
  (:mod:`.metrics`).

Keys: ``<platform>.<chat>`` in ``platform-budget-minutes`` (:func:`minute_key`; a chat id outside the
characters KV keys allow becomes its SHA-256) and ``<platform>`` in ``platform-budget-calls``. The driver
reads both (:class:`BudgetReader`); only the ingress services may write them.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, TypeVar

import nats.errors
from nats.js import JetStreamContext
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from larkbot.canonical.actions import BUDGET_SPENT, ActionError, ActionResult
from larkbot.canonical.errors import LarkbotError
from larkbot.canonical.names import KV_PLATFORM_BUDGET_CALLS, KV_PLATFORM_BUDGET_MINUTES, Platform

from ..backoff import Backoff, Failure, RetryPolicy
from ..bus import BusUnavailable
from ..config import LarkbotConfig
from ..retry import retrying
from . import metrics
from .core import (
    SCOPES,
    CallLimits,
    Calls,
    Granted,
    MinuteWindow,
    Refused,
    SpeakingBudget,
    calls_remaining,
    minute_remaining,
    spend_calls,
    spend_minute,
)

__all__ = [
    "BUDGET_RETRY",
    "DEFAULT_WAIT_S",
    "MAX_ROUNDS",
    "BudgetPlan",
    "BudgetReader",
    "BudgetSpent",
    "BudgetUnavailable",
    "Budgets",
    "budget_refusal",
    "calls_key",
    "minute_key",
    "read_speaking_budget",
]

T = TypeVar("T")

_PLAIN_KEY: Final = re.compile(r"[-_=a-zA-Z0-9]{1,200}")
#: Compare-and-set rounds one spend may lose before it gives up (retryable): replicas race only while
#: they spend on the same key at the same moment, so losing this often means the bucket misbehaves.
MAX_ROUNDS: Final = 50
log = logging.getLogger(__name__)

#: A bucket that does not answer (an election, a restarted server): 0.25 s doubling to 4 s, ±25 %.
BUDGET_RETRY: Final = RetryPolicy(
    Backoff(initial_s=0.25, max_s=4.0, factor=2.0, jitter=0.25), max_attempts=None
)
#: How long a spend keeps asking when its caller names no deadline: past a cluster's election (FACTS:
#: publishing stalled up to ~8 s while a stream leader was elected).
DEFAULT_WAIT_S: Final = 15.0
#: Keys whose last value a replica keeps (:meth:`Budgets._spend`): a few hundred bytes each.
_KNOWN_KEYS: Final = 10_000
#: A key a replica has not written: taken for absent until a create says otherwise.
_ABSENT: Final[tuple[bytes | None, int | None]] = (None, None)


class BudgetSpent(LarkbotError):
    """A budget cannot take the spend: ``refused`` says which one and until when."""

    def __init__(self, platform: str, refused: Refused) -> None:
        self.platform = platform
        self.refused = refused
        super().__init__(_describe(platform, refused))


class BudgetUnavailable(BusUnavailable):
    """A budget bucket did not answer (or kept losing compare-and-set): nothing was spent."""


def minute_key(platform: str, chat_id: str) -> str:
    token = (
        chat_id if _PLAIN_KEY.fullmatch(chat_id) else "sha256-" + hashlib.sha256(chat_id.encode()).hexdigest()
    )
    return f"{platform}.{token}"


def calls_key(platform: str) -> str:
    return platform


_UNITS: Final = {"minute": "messages a minute in this chat", "day": "API calls a UTC day"}


def _describe(platform: str, refused: Refused) -> str:
    """The budget, for the model and the logs; when it allows more is ``retry_after_s``."""
    unit = _UNITS.get(refused.scope, "API calls a UTC month")
    return f"the {platform} budget of {refused.limit} {unit} is spent"


def budget_refusal(idempotency_key: str, exc: BudgetSpent, message_ids: tuple[str, ...] = ()) -> ActionResult:
    """The typed result of an action a spent budget refused (``message_ids``: parts sent before)."""
    error = ActionError(
        code=BUDGET_SPENT, message=str(exc), retryable=True, retry_after_s=exc.refused.retry_after_s
    )
    return ActionResult(
        idempotency_key=idempotency_key, ok=False, outcome="failed", message_ids=message_ids, error=error
    )


@dataclass(frozen=True, slots=True)
class BudgetPlan:
    """A platform's budgets as configured: ``messages_per_minute`` for a chat unless ``chats`` names
    its own (``0``: unlimited), and the platform's API calls per day and month."""

    platform: str
    messages_per_minute: int = 0
    chats: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    calls: CallLimits = field(default_factory=CallLimits)
    #: Telegram's limit is per group: its private chats (positive ids) have none.
    groups_only: bool = False

    @classmethod
    def of(cls, config: LarkbotConfig, platform: str) -> BudgetPlan:
        chats = {
            key.partition(":")[2]: chat.messages_per_minute
            for key, chat in config.chats.items()
            if key.startswith(f"{platform}:") and chat.messages_per_minute is not None
        }
        if platform == Platform.TELEGRAM.value:
            per_minute = config.telegram.budgets.messages_per_minute if config.telegram else 0
            return cls(platform, per_minute, MappingProxyType(chats), groups_only=True)
        if config.feishu is None:
            return cls(platform, 0, MappingProxyType(chats))
        budgets = config.feishu.budgets
        calls = CallLimits(budgets.api_calls_per_day, budgets.api_calls_per_month)
        return cls(platform, budgets.messages_per_minute, MappingProxyType(chats), calls)

    def minute_limit(self, chat_id: str) -> int:
        """The chat's messages per minute; ``0``: unlimited."""
        if chat_id in self.chats:
            return self.chats[chat_id]
        if self.groups_only and not chat_id.startswith("-"):
            return 0
        return self.messages_per_minute


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class Budgets:
    """A platform's budgets, spent by one ingress replica on the shared buckets."""

    def __init__(
        self,
        plan: BudgetPlan,
        minutes: KeyValue,
        calls: KeyValue,
        *,
        clock_ms: Callable[[], int] = _now_ms,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.plan = plan
        self._sleep = sleep
        self._minutes = minutes
        self._calls = calls
        self._clock_ms = clock_ms
        #: ``(bucket, key) → (value, revision)`` as this replica last wrote or read it, the least recently
        #: written first.
        self._known: dict[tuple[KeyValue, str], tuple[bytes | None, int | None]] = {}
        platform = plan.platform
        for scope in SCOPES:
            metrics.REFUSALS.labels(platform, scope)
        for scope, limit in (("day", plan.calls.per_day), ("month", plan.calls.per_month)):
            if limit:
                metrics.LIMIT.labels(platform, scope).set(limit)

    @classmethod
    async def open(
        cls, js: JetStreamContext, plan: BudgetPlan, *, clock_ms: Callable[[], int] = _now_ms
    ) -> Budgets:
        budgets = cls(
            plan,
            await js.key_value(KV_PLATFORM_BUDGET_MINUTES),
            await js.key_value(KV_PLATFORM_BUDGET_CALLS),
            clock_ms=clock_ms,
        )
        await budgets.refresh()
        return budgets

    async def spend_messages(self, chat_id: str, cost: int = 1, *, left_s: float | None = None) -> None:
        """Book ``cost`` messages in ``chat_id``'s minute, or raise :class:`BudgetSpent`; ``left_s``: how
        long the caller may wait for a bucket that does not answer (module docstring)."""
        limit = self.plan.minute_limit(chat_id)
        if limit <= 0 or cost <= 0:
            return

        def step(value: bytes | None, now_ms: int) -> tuple[bytes, Granted] | Refused:
            window = MinuteWindow.decode(value) if value else None
            outcome = spend_minute(window, limit, now_ms, cost)
            if isinstance(outcome, Refused):
                return outcome
            booked, granted = outcome
            return booked.encode(), granted

        await self._spend_retried(self._minutes, minute_key(self.plan.platform, chat_id), step, left_s)

    async def spend_calls(self, cost: int = 1, *, force: bool = False, left_s: float | None = None) -> None:
        """Book ``cost`` API calls of the day and the month, or raise :class:`BudgetSpent`; ``force``
        books them past a spent budget (see :func:`.core.spend_calls`); ``left_s`` as for
        :meth:`spend_messages`."""
        limits = self.plan.calls
        if limits.unlimited:
            return

        def step(value: bytes | None, now_ms: int) -> tuple[bytes, Granted] | Refused:
            calls = Calls.decode(value) if value else None
            outcome = spend_calls(calls, limits, now_ms, cost, force=force)
            if isinstance(outcome, Refused):
                self._export(calls, now_ms)
                return outcome
            booked, granted = outcome
            self._export(booked, now_ms)
            return booked.encode(), granted

        await self._spend_retried(self._calls, calls_key(self.plan.platform), step, left_s)

    async def refresh(self) -> None:
        """Export what the platform-wide budgets have left now (a new day shows without a spend)."""
        if self.plan.calls.unlimited:
            return
        value, _ = await self._read(self._calls, calls_key(self.plan.platform))
        self._export(Calls.decode(value) if value else None, self._clock_ms())

    def _export(self, calls: Calls | None, now_ms: int) -> None:
        for scope, left in calls_remaining(calls, self.plan.calls, now_ms).items():
            metrics.REMAINING.labels(self.plan.platform, scope).set(left)

    async def _read(self, kv: KeyValue, key: str) -> tuple[bytes | None, int | None]:
        try:
            entry = await kv.get(key)
        except KeyNotFoundError:
            return None, None
        except (nats.errors.Error, TimeoutError) as exc:
            raise BudgetUnavailable(f"budget key {key} read: {type(exc).__name__}") from None
        return entry.value or None, entry.revision

    async def _spend_retried(
        self,
        kv: KeyValue,
        key: str,
        step: Callable[[bytes | None, int], tuple[bytes, T] | Refused],
        left_s: float | None,
    ) -> T:
        deadline = time.monotonic() + (DEFAULT_WAIT_S if left_s is None else max(0.0, left_s))
        async for attempt in retrying(
            BUDGET_RETRY,
            _unanswered,
            left_s=lambda: deadline - time.monotonic(),
            on_retry=_retried,
            sleep=self._sleep,
        ):
            with attempt:
                return await self._spend(kv, key, step)
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _spend(
        self, kv: KeyValue, key: str, step: Callable[[bytes | None, int], tuple[bytes, T] | Refused]
    ) -> T:
        # What this replica last wrote to the key is what it finds there unless another replica spent
        # since (or the TTL removed the key): it decides on that at once, and the compare-and-set, which
        # fails exactly then, sends it to read. A key it never wrote is taken for absent the same way (a
        # create fails if it is there). A send of one replica costs one round trip here instead of two.
        guess: tuple[bytes | None, int | None] | None = self._known.pop((kv, key), _ABSENT)
        for _ in range(MAX_ROUNDS):
            guessed = guess is not None
            value, revision = guess if guess is not None else await self._read(kv, key)
            guess = None
            outcome = step(value, self._clock_ms())
            if isinstance(outcome, Refused):
                if guessed:
                    continue  # a refusal is decided on what the bucket holds now
                metrics.REFUSALS.labels(self.plan.platform, outcome.scope).inc()
                self._remember(kv, key, (value, revision))
                raise BudgetSpent(self.plan.platform, outcome)
            data, result = outcome
            try:
                if revision is None:
                    written = await kv.create(key, data)
                else:
                    written = await kv.update(key, data, last=revision)
            except KeyWrongLastSequenceError:
                continue  # another replica spent first: decide again on what it wrote
            except (nats.errors.Error, TimeoutError) as exc:
                raise BudgetUnavailable(f"budget key {key} write: {type(exc).__name__}") from None
            self._remember(kv, key, (data, written))
            return result
        raise BudgetUnavailable(f"budget key {key}: compare-and-set lost {MAX_ROUNDS} times")

    def _remember(self, kv: KeyValue, key: str, known: tuple[bytes | None, int | None]) -> None:
        if len(self._known) >= _KNOWN_KEYS:
            del self._known[next(iter(self._known))]  # the key written longest ago
        self._known[(kv, key)] = known


def _unanswered(exc: BaseException) -> Failure | None:
    return Failure.TRANSIENT if isinstance(exc, BudgetUnavailable) else None


def _retried(_failure: Failure, attempts: int, wait: float, exc: BaseException | None) -> None:
    metrics.RETRIES.inc()
    log.warning("budget attempt %d failed (%s); asking again in %.2f s", attempts, exc, wait)


class BudgetReader:
    """Reads the speaking budget of chats (the driver, once per wake-up, read-only).

    Binding a bucket asks the server for its stream's info, a round trip of its own: the two buckets are
    bound once and kept, and both keys are read at once, so a read costs one round trip, not four."""

    def __init__(self, js: JetStreamContext) -> None:
        self._js = js
        self._buckets: dict[str, KeyValue] = {}

    async def read(self, platform: str, chat_id: str, now_ms: int) -> SpeakingBudget:
        minute_raw, calls_raw = await asyncio.gather(
            self._get(KV_PLATFORM_BUDGET_MINUTES, minute_key(platform, chat_id)),
            self._get(KV_PLATFORM_BUDGET_CALLS, calls_key(platform)),
        )
        window = MinuteWindow.decode(minute_raw) if minute_raw else None
        minute = minute_remaining(window, now_ms)
        day = month = day_limit = month_limit = None
        if calls_raw:
            calls = Calls.decode(calls_raw)
            left = calls_remaining(calls, calls.limits, now_ms)
            day, month = left.get("day"), left.get("month")
            day_limit, month_limit = calls.limits.per_day or None, calls.limits.per_month or None
        return SpeakingBudget(
            minute=minute,
            minute_limit=window.limit if window is not None else None,
            day=day,
            day_limit=day_limit,
            month=month,
            month_limit=month_limit,
        )

    async def _get(self, bucket: str, key: str) -> bytes | None:
        try:
            kv = self._buckets.get(bucket)
            if kv is None:
                kv = self._buckets[bucket] = await self._js.key_value(bucket)
            entry = await kv.get(key)
        except KeyNotFoundError:
            return None
        except (nats.errors.Error, TimeoutError) as exc:
            raise BudgetUnavailable(f"budget bucket {bucket} read: {type(exc).__name__}") from None
        return entry.value or None


async def read_speaking_budget(
    js: JetStreamContext, platform: str, chat_id: str, now_ms: int
) -> SpeakingBudget:
    """The speaking budget of a chat from the buckets the ingress writes (read-only for the driver); a
    reader that reads often keeps a :class:`BudgetReader`."""
    return await BudgetReader(js).read(platform, chat_id, now_ms)
