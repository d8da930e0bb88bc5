"""The rate limits on their own (``ratelimit.core``): the sliding window and its cooldown as a table of
records, hits and verdicts; a record's retention and its wire form; who a wake-up's input counts; the
configuration read into the core and its bounds matching the record's and the bucket's."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from larkbot.canonical.names import KEY_VALUES, KV_RATE_LIMITS
from larkbot.driver.ratelimit.core.rates import RateAsk, key, limited_line, triggers
from larkbot.driver.ratelimit.core.window import (
    ADMITTED,
    MAX_HITS,
    RETAIN_MS,
    Limit,
    Verdict,
    Window,
    judge,
    record,
    retained,
)
from larkbot.driver.ratelimit.limiter import MemoryWindows, RateLimiter
from larkbot.driver.ratelimit.settings import rate_limits_of
from larkbot.runtime.config import RATE_MAX_COUNT, RATE_WINDOW_MAX_S, ChatSettings
from larkbot.testkit.driver.synthetic import segment

#: 2027-01-15 08:00:00 UTC: 16:00 at +08:00.
T0 = 1_800_000_000_000
MINUTE = 60_000
#: Three wake-ups in ten minutes, then ten minutes of cooldown.
COOLING = Limit(max_hits=3, window_ms=10 * MINUTE, cooldown_ms=10 * MINUTE)
SLIDING = Limit(max_hits=3, window_ms=10 * MINUTE)


def _at(*minutes: float) -> tuple[int, ...]:
    return tuple(T0 + round(m * MINUTE) for m in minutes)


@pytest.mark.parametrize(
    ("window", "limit", "hit", "now", "verdict", "stored"),
    [
        # Room in the window: admitted and counted.
        (Window(), COOLING, 0, 0, ADMITTED, Window(_at(0))),
        (Window(_at(0, 1)), COOLING, 2, 2, ADMITTED, Window(_at(0, 1, 2))),
        # The one past the limit starts the cooldown and clears the hits.
        (Window(_at(0, 1, 2)), COOLING, 3, 3, Verdict("window", _at(13)[0]), Window((), _at(13)[0])),
        # During the cooldown: refused, nothing written.
        (Window((), _at(13)[0]), COOLING, 5, 5, Verdict("cooldown", _at(13)[0]), None),
        # After it: a fresh window.
        (Window((), _at(13)[0]), COOLING, 13, 13, ADMITTED, Window(_at(13))),
        # Hits that left the window do not count (10 minutes ago exactly is out).
        (Window(_at(0, 1, 2)), COOLING, 12, 12, ADMITTED, Window(_at(0, 1, 2, 12))),
        (Window(_at(0, 1, 2)), COOLING, 10, 10, ADMITTED, Window(_at(0, 1, 2, 10))),
        # A plain sliding window: refused until the oldest counted hit leaves it, nothing written.
        (Window(_at(0, 1, 2)), SLIDING, 3, 3, Verdict("window", _at(10)[0]), None),
        (Window(_at(0, 1, 2, 9)), SLIDING, 9.5, 9.5, Verdict("window", _at(11)[0]), None),
        # A hit already counted (a retried wake-up) is admitted again and counted once, even when full.
        (Window(_at(0, 1, 2)), COOLING, 2, 4, ADMITTED, None),
        # A hit older than others (a chat's message that arrived earlier) is kept in order.
        (Window(_at(0, 2)), COOLING, 1, 3, ADMITTED, Window(_at(0, 1, 2))),
    ],
)
def test_the_window_admits_counts_and_cools_down(
    window: Window, limit: Limit, hit: float, now: float, verdict: Verdict, stored: Window | None
) -> None:
    (hit_ms,), (now_ms,) = _at(hit), _at(now)
    got, after = judge(window, limit, hit_ms=hit_ms, now_ms=now_ms, count=True)
    assert got == verdict
    if stored is None:
        assert after is window  # nothing to write
    else:
        assert after == stored


def test_a_check_does_not_count_and_a_record_counts_whatever_the_limit() -> None:
    full = Window(_at(0, 1, 2))
    verdict, after = judge(Window(_at(0)), COOLING, hit_ms=_at(1)[0], now_ms=_at(1)[0], count=False)
    assert (verdict, after) == (ADMITTED, Window(_at(0)))
    # A check of a full window refuses and starts the cooldown all the same.
    verdict, after = judge(full, COOLING, hit_ms=_at(3)[0], now_ms=_at(3)[0], count=False)
    assert verdict.reason == "window"
    assert after.cooldown_until_ms == _at(13)[0]
    assert record(full, hit_ms=_at(3)[0], now_ms=_at(3)[0]) == Window(_at(0, 1, 2, 3))
    assert record(full, hit_ms=_at(2)[0], now_ms=_at(3)[0]) is full


def test_a_record_keeps_what_any_configured_limit_can_count_and_nothing_more() -> None:
    now = T0 + RETAIN_MS
    many = Window(tuple(range(T0, T0 + 150)), cooldown_until_ms=T0)
    kept = retained(many, now)
    assert len(kept.hits) == MAX_HITS
    assert kept.hits[-1] == T0 + 149  # the newest
    assert kept.cooldown_until_ms == 0  # ended
    assert retained(Window(_at(0, 1)), T0 + RETAIN_MS + MINUTE // 2).hits == _at(1)  # a day ago is out
    # The configuration may not ask for more than a record holds, and the bucket keeps a record for its
    # longest window and cooldown after its last write.
    assert RATE_MAX_COUNT == MAX_HITS
    assert RATE_WINDOW_MAX_S * 1000 == RETAIN_MS
    ttl = next(kv.ttl_s for kv in KEY_VALUES if kv.bucket == KV_RATE_LIMITS)
    assert ttl >= 2 * RATE_WINDOW_MAX_S


def test_a_record_round_trips_and_anything_else_is_refused() -> None:
    window = Window(_at(0, 1), cooldown_until_ms=_at(5)[0])
    assert Window.decode(window.encode()) == window
    for bad in (b"[]", b'{"hits": [1]}', b'{"hits": ["1"], "cooldown_until_ms": 0}', b"not json"):
        with pytest.raises(ValueError):  # noqa: PT011 - json's own or ours
            Window.decode(bad)


def test_the_input_counts_each_member_once_at_their_newest_message_and_maintainers_bypass() -> None:
    segments = (
        segment(1, sender="ou_old", at_ms=T0 - 5000),  # handled already
        segment(2, sender="ou_a", at_ms=T0 - 3000),
        segment(3, sender="ou_b", at_ms=T0 - 2000),
        segment(4, sender="ou_a", at_ms=T0 - 1000),
        segment(5, sender="ou_me", at_ms=T0 - 900, myself=True),  # the bot's own
        segment(6, sender="ou_spam", at_ms=T0 - 800),  # blocked
        segment(7, sender="ou_c", at_ms=T0 - 700, deleted=True),  # deleted: no input
        segment(8, sender="ou_d", at_ms=T0 - 600).model_copy(update={"node_type": "event"}),
    )
    found = triggers(segments, T0 - 4000, frozenset({"ou_boss"}), frozenset({"ou_spam"}))
    assert found.persons == (("ou_a", T0 - 1000), ("ou_b", T0 - 2000))
    assert not found.bypass
    boss = (*segments, segment(9, sender="ou_boss", at_ms=T0))
    assert triggers(boss, T0 - 4000, frozenset({"ou_boss"}), frozenset()).bypass
    task = (*segments, segment(10, sender="ou_x", at_ms=T0, node_type="runtime"))
    assert triggers(task, T0 - 4000, frozenset(), frozenset()).bypass


def test_keys_fit_the_bus_and_name_no_user_id() -> None:
    person = key("person", "telegram", "-100 weird.id*")
    assert person.startswith("person.")
    assert "weird" not in person
    assert all(c.isalnum() or c == "." for c in person)
    assert key("person", "telegram", "1") != key("person", "feishu", "1") != key("chat", "feishu", "1")


def test_the_late_binding_line_names_the_limited_and_when_they_may_wake_the_bot_again() -> None:
    refused = (("ou_a", Verdict("cooldown", T0 + 10 * MINUTE)), ("ou_b", ADMITTED))
    line = limited_line(refused, 480)
    assert line is not None
    assert "uid ou_a (until 16:10)" in line
    assert "ou_b" not in line
    assert limited_line((("ou_b", ADMITTED),), 480) is None


def test_a_chats_configuration_reads_into_the_core() -> None:
    assert not rate_limits_of(ChatSettings()).on
    settings = ChatSettings.model_validate(
        {"rate_limit": {"person": {"max_wakeups": 10, "window_s": 600, "cooldown_s": 300}}}
    )
    limits = rate_limits_of(settings)
    assert limits.person == Limit(10, 600_000, 300_000)
    assert limits.chat is None
    assert limits.on


class Racing(MemoryWindows):
    """A store whose every read yields to the other asks, as a bus round trip would."""

    async def get(self, key: str) -> tuple[Window | None, int]:
        await asyncio.sleep(0)
        return await super().get(key)


async def test_asks_of_one_record_within_a_replica_wait_for_each_other() -> None:
    store = Racing()
    limiter = RateLimiter(store, attempts=1)  # no compare-and-set may be lost
    ask = RateAsk("person", key("person", "feishu", "ou_a"), "ou_a", COOLING, T0, "admit")
    verdicts = await asyncio.gather(*(limiter.ask(replace(ask, hit_ms=T0 + n), T0 + 100) for n in range(20)))
    assert [v.reason for v in verdicts] == [None] * 3 + ["window"] + ["cooldown"] * 16
    assert limiter._locks == {}  # dropped with the last ask
