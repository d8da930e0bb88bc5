"""The rate limits' records in the bus's ``rate-limits`` bucket, with two limiters on two connections as
two driver replicas would hold them: a write that loses the compare-and-set is judged again and no count
is lost; counting at once, they admit exactly the limit between them; a limiter started afresh (a
restart) finds the cooldown where the others left it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from larkbot.canonical.names import KV_RATE_LIMITS
from larkbot.driver.ratelimit.core.rates import RateAsk, key
from larkbot.driver.ratelimit.core.window import Limit, Window
from larkbot.driver.ratelimit.limiter import KvWindows, RateLimiter
from larkbot.runtime.bus import Bus, connect
from larkbot.runtime.config import NatsSettings

T0 = 1_800_000_000_000
MINUTE = 60_000
PERSON = key("person", "feishu", "ou_chatty")


def _ask(hit_ms: int, limit: Limit, mode: str = "admit") -> RateAsk:
    return RateAsk("person", PERSON, "ou_chatty", limit, hit_ms, mode)  # type: ignore[arg-type]


@pytest.fixture
async def other(nats_url: str, bus: Bus) -> AsyncIterator[Bus]:
    """A second connection: the other replica's."""
    b = await connect(NatsSettings(), "test-replica-b", url=nats_url, give_up_after_s=30)
    try:
        yield b
    finally:
        await b.close(drain_timeout_s=5)


class Interleaved(KvWindows):
    """Before its first write, lets another limiter count a hit of the same record, so that write finds
    a newer revision than the one it read."""

    def __init__(self, windows: KvWindows, meanwhile: RateLimiter, ask: RateAsk) -> None:
        super().__init__(windows.kv)
        self.meanwhile, self.ask = meanwhile, ask
        self.puts: list[bool] = []

    async def put(self, key: str, window: Window, revision: int) -> bool:
        if not self.puts:
            await self.meanwhile.ask(self.ask, T0)
        stored = await super().put(key, window, revision)
        self.puts.append(stored)
        return stored


async def _stored(bus: Bus) -> Window:
    entry = await (await bus.js.key_value(KV_RATE_LIMITS)).get(PERSON)
    assert entry.value is not None
    return Window.decode(entry.value)


async def test_a_write_that_loses_the_compare_and_set_is_judged_again_and_no_count_is_lost(
    bus: Bus, other: Bus
) -> None:
    limit = Limit(10, 10 * MINUTE)
    b = RateLimiter(await KvWindows.open(other.js))
    store = Interleaved(await KvWindows.open(bus.js), b, _ask(T0 - 1000, limit))
    a = RateLimiter(store)
    assert (await a.ask(_ask(T0, limit), T0)).admitted
    assert store.puts == [False, True]  # lost once to the other replica, then written on its revision
    assert (await _stored(bus)).hits == (T0 - 1000, T0)


async def test_two_replicas_counting_at_once_admit_exactly_the_limit_between_them(
    bus: Bus, other: Bus
) -> None:
    limit = Limit(10, 10 * MINUTE, cooldown_ms=10 * MINUTE)
    a = RateLimiter(await KvWindows.open(bus.js))
    b = RateLimiter(await KvWindows.open(other.js))
    asks = [(a if n % 2 else b, _ask(T0 + n, limit)) for n in range(30)]
    verdicts = await asyncio.wait_for(
        asyncio.gather(*(limiter.ask(ask, T0 + 100) for limiter, ask in asks)), 60
    )
    assert sum(v.admitted for v in verdicts) == 10
    assert sum(v.reason == "window" for v in verdicts) == 1  # the one that filled it started the cooldown
    assert sum(v.reason == "cooldown" for v in verdicts) == 19
    stored = await _stored(bus)
    assert stored == Window((), T0 + 100 + 10 * MINUTE)

    # A limiter started afresh (a restarted replica) finds the cooldown, and its end.
    restarted = RateLimiter(await KvWindows.open(other.js))
    during = await restarted.ask(_ask(T0 + 5 * MINUTE, limit), T0 + 5 * MINUTE)
    assert (during.reason, during.until_ms) == ("cooldown", T0 + 100 + 10 * MINUTE)
    after = T0 + 11 * MINUTE
    assert (await restarted.ask(_ask(after, limit), after)).admitted
    assert (await _stored(bus)).hits == (after,)


async def test_a_peek_writes_nothing_and_the_bucket_keeps_records_for_two_days(bus: Bus) -> None:
    limit = Limit(1, 10 * MINUTE, cooldown_ms=MINUTE)
    limiter = RateLimiter(await KvWindows.open(bus.js))
    assert (await limiter.ask(_ask(T0, limit), T0)).admitted
    kv = await bus.js.key_value(KV_RATE_LIMITS)
    revision = (await kv.get(PERSON)).revision
    peek = await limiter.ask(_ask(T0 + 1000, limit, "peek"), T0 + 1000)
    assert peek.reason == "window"
    assert (await kv.get(PERSON)).revision == revision
    status = await kv.status()
    assert status.ttl == 2 * 24 * 3600
