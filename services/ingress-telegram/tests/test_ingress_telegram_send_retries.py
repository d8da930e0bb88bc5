"""How a send meets Bot API failures, against the fake Bot API and a real JetStream sent-ledger.

The client's classification (a JSON ``ok: false`` is a definite failure whatever its code; only a lost
answer is unknown), then the executor's one retry loop: a 5xx or a connection that never opened is tried
again with backoff and jitter under the same ledger record, a 429 waits its ``retry_after``, the action's
deadline ends it, and a lost answer is never repeated. The executor is driven directly with an injected
clock, sleep and jitter, so each test states the exact waits."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import nats.errors
import pytest
from aiohttp import web
from nats.js.kv import KeyValue

from larkbot.canonical.actions import ActionResult, SendMessageAction
from larkbot.canonical.codec import decode
from larkbot.canonical.events import MessageEvent
from larkbot.canonical.names import KV_TELEGRAM_SENT_LEDGER, STREAM_EVENTS, Platform
from larkbot.ingress_telegram.adapters.actions import ActionExecutor
from larkbot.ingress_telegram.adapters.botapi import BotApi, BotApiError, NotSent, OutcomeUnknown
from larkbot.ingress_telegram.adapters.ledger import SentLedger
from larkbot.ingress_telegram.core import Limits, Pacer, State, TelegramAdapter
from larkbot.ingress_telegram.fake import FakeBotApi
from larkbot.runtime.bootstrap import bootstrap
from larkbot.runtime.bus import Bus
from larkbot.runtime.retry import Backoff, RetryPolicy

GROUP = "-1001234567890"


@pytest.fixture
async def fake() -> AsyncIterator[FakeBotApi]:
    server = FakeBotApi()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


class FakeTime:
    """A monotonic clock that moves only when the executor sleeps; every wait is recorded (not the
    nanosecond gaps of the global pacing limit)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        if seconds > 1e-6:
            self.sleeps.append(round(seconds, 6))
        self.now += seconds


def jitter(*values: float) -> Callable[[], float]:
    it: Iterator[float] = iter(values)
    return lambda: next(it)


def send(key: str, text: str = "on it", *, deadline_ms: int | None = None) -> SendMessageAction:
    return SendMessageAction(
        platform=Platform.TELEGRAM, idempotency_key=key, chat_id=GROUP, text=text, deadline_ms=deadline_ms
    )


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def ledger_state(ledger: SentLedger, key: str) -> State | None:
    record, _ = await ledger.get(key)
    return record.state if record is not None else None


async def run(
    bus: Bus, fake: FakeBotApi, **options: Any
) -> tuple[ActionExecutor, SentLedger, Callable[[], Awaitable[None]]]:
    api = BotApi(fake.base_url, fake.token, timeout_s=options.pop("timeout_s", 30.0))
    ledger = await SentLedger.open(bus.js)
    adapter = TelegramAdapter(str(fake.bot_id), None, 0)
    # No pacing gaps unless a test asks for them: the waits recorded are the retries' own.
    unpaced = Limits(chat_interval_s=0.0, group_per_minute=10_000, global_per_s=1e9)
    pacer = options.pop("pacer", Pacer(unpaced))
    return ActionExecutor(api, bus, ledger, adapter, pacer=pacer, **options), ledger, api.close


# -- the client's classification ---------------------------------------------------------------------
async def test_a_json_error_answer_is_a_definite_failure_whatever_its_code(fake: FakeBotApi) -> None:
    api = BotApi(fake.base_url, fake.token)
    try:
        fake.fail("sendMessage", 500)
        with pytest.raises(BotApiError) as refused:
            await api.call("sendMessage", {"chat_id": GROUP, "text": "x"})
        fake.fail("sendMessage", 429, retry_after=7)
        with pytest.raises(BotApiError) as limited:
            await api.call("sendMessage", {"chat_id": GROUP, "text": "x"})
        fake.lose_answer("sendMessage")
        with pytest.raises(OutcomeUnknown):
            await api.call("sendMessage", {"chat_id": GROUP, "text": "x"})
    finally:
        await api.close()
    assert (refused.value.code, refused.value.description) == (500, "Internal Server Error")
    assert (limited.value.code, limited.value.retry_after) == (429, 7.0)
    assert len(fake.sent) == 1  # only the lost answer's call was executed


async def test_an_answer_that_is_not_the_bot_apis_is_unknown_and_no_connection_is_not_sent() -> None:
    async def bad_gateway(_request: web.Request) -> web.Response:
        return web.Response(status=502, text="<html>502 Bad Gateway</html>", content_type="text/html")

    app = web.Application()
    app.router.add_post("/bot{token}/{method}", bad_gateway)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    proxy = BotApi(f"http://127.0.0.1:{port}", "1:t")
    try:
        with pytest.raises(OutcomeUnknown):  # a proxy in front of Telegram may have passed it on
            await proxy.call("sendMessage", {})
    finally:
        await proxy.close()
        await runner.cleanup()
    closed = BotApi(f"http://127.0.0.1:{port}", "1:t")  # nothing listens there any more
    try:
        with pytest.raises(NotSent):
            await closed.call("sendMessage", {})
    finally:
        await closed.close()


# -- the executor's one retry loop -------------------------------------------------------------------
async def test_5xx_answers_are_retried_with_backoff_and_jitter_under_the_same_ledger_record(
    bus: Bus, fake: FakeBotApi
) -> None:
    t = FakeTime()
    executor, ledger, close = await run(bus, fake, clock=t.clock, sleep=t.sleep, jitter=jitter(0.0, 1.0))
    fake.fail("sendMessage", 500)
    fake.fail("sendMessage", 502, description="Bad Gateway")
    try:
        result = await executor.act(send("retry-5xx"))
    finally:
        await close()
    assert result.outcome == "done", result
    assert len(fake.sent) == 1
    assert result.message_ids == (str(fake.sent[0]["message_id"]),)
    assert len(fake.calls("sendMessage")) == 3
    # 0.5 s spread -25 % (u = 0), then 1 s spread +25 % (u = 1): exponential, jittered.
    assert t.sleeps == [0.375, 1.25]
    assert await ledger_state(ledger, "retry-5xx") is State.DONE


async def test_a_429_waits_its_retry_after_in_the_same_loop(bus: Bus, fake: FakeBotApi) -> None:
    t = FakeTime()
    executor, _, close = await run(bus, fake, clock=t.clock, sleep=t.sleep, jitter=jitter(0.5, 0.5))
    fake.fail("sendMessage", 429, retry_after=3)
    fake.fail("sendMessage", 500)
    try:
        result = await executor.act(send("retry-429"))
    finally:
        await close()
    assert result.outcome == "done", result
    # retry_after taken as Telegram says (the pacer holds the chat that long), then the 5xx's backoff.
    assert t.sleeps == [3.0, 1.0]
    assert len(fake.calls("sendMessage")) == 3
    assert len(fake.sent) == 1


async def test_a_429_beyond_the_deadline_is_answered_rate_limited_and_resumable(
    bus: Bus, fake: FakeBotApi
) -> None:
    t = FakeTime()
    executor, ledger, close = await run(bus, fake, clock=t.clock, sleep=t.sleep, jitter=jitter(0.5))
    fake.fail("sendMessage", 429, retry_after=30)
    try:
        limited = await executor.act(send("late-429", deadline_ms=now_ms() + 10_000))
        again = await executor.act(send("late-429", deadline_ms=now_ms() + 10_000))
    finally:
        await close()
    assert limited.outcome == "failed"
    assert limited.error is not None
    assert (limited.error.code, limited.error.retryable, limited.error.retry_after_s) == (
        "rate_limited",
        True,
        30.0,
    )
    # A wait past the deadline is not taken; the chat stays held, so the next send waits it out.
    assert t.sleeps == [30.0]
    assert again.outcome == "done"  # the record said failed: nothing was sent, so it resumes
    assert len(fake.sent) == 1
    assert await ledger_state(ledger, "late-429") is State.DONE


async def test_the_deadline_bounds_the_retries_of_a_failing_send(bus: Bus, fake: FakeBotApi) -> None:
    # Real time here: the deadline is wall-clock time, as the driver sets it.
    policy = RetryPolicy(Backoff(initial_s=0.2, max_s=0.2, factor=1.0, jitter=0.0), max_attempts=100)
    executor, ledger, close = await run(bus, fake, retry=policy)
    fake.fail("sendMessage", 500, times=100)
    deadline = now_ms() + 2000
    try:
        result = await executor.act(send("deadline-5xx", deadline_ms=deadline))
    finally:
        await close()
    assert result.outcome == "failed"
    assert result.error is not None
    assert (result.error.code, result.error.retryable) == ("unavailable", True)
    calls = [r for r in fake.requests if r.method == "sendMessage"]
    assert 2 <= len(calls) < 100  # retried, and stopped by the deadline, not by the count
    assert not fake.sent
    assert await ledger_state(ledger, "deadline-5xx") is State.FAILED


async def test_a_lost_answer_is_unknown_and_never_sent_again(bus: Bus, fake: FakeBotApi) -> None:
    t = FakeTime()
    executor, ledger, close = await run(bus, fake, clock=t.clock, sleep=t.sleep)
    fake.lose_answer("sendMessage")
    try:
        first = await executor.act(send("lost"))
        again = await executor.act(send("lost"))
    finally:
        await close()
    assert (first.outcome, again.outcome) == ("unknown", "unknown")
    for result in (first, again):
        assert result.error is not None
        assert (result.error.code, result.error.retryable) == ("outcome_unknown", False)
    assert len(fake.calls("sendMessage")) == 1
    assert len(fake.sent) == 1  # Telegram did post it; a second message would be a duplicate
    assert t.sleeps == []
    assert await ledger_state(ledger, "lost") is State.UNKNOWN


async def test_a_repeat_while_the_first_attempt_waits_to_retry_is_answered_in_progress(
    bus: Bus, fake: FakeBotApi
) -> None:
    repeats: list[ActionResult] = []

    async def sleep(_seconds: float) -> None:
        # The driver asking again while this attempt backs off: the ledger holds it, nothing is sent.
        if not repeats:
            repeats.append(await executor.act(send("in-flight")))

    executor, ledger, close = await run(bus, fake, sleep=sleep, jitter=jitter(0.5))
    fake.fail("sendMessage", 500)
    try:
        first = await executor.act(send("in-flight"))
        late = await executor.act(send("in-flight", deadline_ms=now_ms() - 1))
    finally:
        await close()
    [repeat] = repeats
    assert repeat.outcome == "unknown"
    assert repeat.error is not None
    assert (repeat.error.code, repeat.error.retryable) == ("in_progress", True)
    assert first.outcome == "done"
    # Past its deadline, a repeat of a sent key still gets the recorded answer, not a refusal.
    assert (late.outcome, late.message_ids) == ("duplicate", first.message_ids)
    assert len(fake.sent) == 1
    assert await ledger_state(ledger, "in-flight") is State.DONE


async def test_a_part_refused_for_good_fails_with_the_parts_confirmed_before_it(
    bus: Bus, fake: FakeBotApi
) -> None:
    text = "\n\n".join(["para " * 600] * 2)  # two messages
    t = FakeTime()
    executor, ledger, close = await run(bus, fake, clock=t.clock, sleep=t.sleep)
    real = fake._api_sendMessage

    async def then_removed(params: dict[str, Any]) -> dict[str, Any]:
        message = await real(params)
        fake.fail("sendMessage", 403)  # the bot is removed from the group after the first part
        fake._api_sendMessage = real  # type: ignore[method-assign]
        return message

    fake._api_sendMessage = then_removed  # type: ignore[method-assign]
    try:
        result = await executor.act(send("two-parts", text))
    finally:
        await close()
    assert result.outcome == "failed"
    assert result.error is not None
    assert (result.error.code, result.error.retryable) == ("forbidden", False)
    [first] = fake.sent
    assert result.message_ids == (str(first["message_id"]),)  # what the chat shows, said plainly
    assert len(fake.calls("sendMessage")) == 2  # a 403 is final: no retry
    assert t.sleeps == []
    record, _ = await ledger.get("two-parts")
    assert record is not None
    assert (record.state, record.message_ids) == (State.FAILED, result.message_ids)


# -- a sent-ledger that does not answer (a NATS election, a reconnect) --------------------------------
LEDGER_STREAM = f"KV_{KV_TELEGRAM_SENT_LEDGER}"


async def test_a_ledger_that_does_not_answer_is_asked_again_and_the_send_goes_out_once(
    bus: Bus, fake: FakeBotApi
) -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        await bootstrap(bus.js)  # the bucket is back (its new leader elected)

    executor, ledger, close = await run(bus, fake, sleep=sleep, jitter=jitter(0.5, 0.5))
    await bus.js.delete_stream(LEDGER_STREAM)
    try:
        result = await executor.act(send("ledger-away"))
    finally:
        await close()
    assert result.outcome == "done", result
    assert waits == [0.25]  # one retry of the claim, then the send
    assert len(fake.sent) == 1
    assert result.message_ids == (str(fake.sent[0]["message_id"]),)
    assert await ledger_state(ledger, "ledger-away") is State.DONE


async def test_a_ledger_lost_after_the_send_still_records_it_and_the_send_is_done(
    bus: Bus, fake: FakeBotApi
) -> None:
    real = fake._api_sendMessage

    async def then_ledger_lost(params: dict[str, Any]) -> dict[str, Any]:
        message = await real(params)
        await bus.js.delete_stream(LEDGER_STREAM)
        return message

    async def sleep(_seconds: float) -> None:
        await bootstrap(bus.js)

    fake._api_sendMessage = then_ledger_lost  # type: ignore[method-assign]
    executor, ledger, close = await run(bus, fake, sleep=sleep, jitter=jitter(0.5))
    try:
        result = await executor.act(send("ledger-lost-after"))
        again = await executor.act(send("ledger-lost-after"))
    finally:
        await close()
    assert result.outcome == "done", result
    # The record came back with the bucket: a repeat is the duplicate it is, nothing sent twice.
    assert (again.outcome, again.message_ids) == ("duplicate", result.message_ids)
    assert len(fake.sent) == 1
    assert await ledger_state(ledger, "ledger-lost-after") is State.DONE


class LostAck:
    """The bucket stores a claim but its answer is lost (the leader killed right after storing it)."""

    def __init__(self, kv: KeyValue) -> None:
        self.kv = kv
        self.lost = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.kv, name)

    async def create(self, key: str, value: bytes) -> int:
        revision = int(await self.kv.create(key, value))
        if not self.lost:
            self.lost += 1
            raise nats.errors.TimeoutError
        return revision


async def test_a_claim_stored_though_its_answer_was_lost_is_recognized_as_this_attempts(
    bus: Bus, fake: FakeBotApi
) -> None:
    t = FakeTime()
    executor, ledger, close = await run(bus, fake, clock=t.clock, sleep=t.sleep, jitter=jitter(0.5))
    lossy = LostAck(ledger.kv)
    ledger.kv = lossy  # type: ignore[assignment]
    try:
        result = await executor.act(send("lost-ack"))
    finally:
        await close()
    assert lossy.lost == 1
    assert result.outcome == "done", result  # not "in progress" behind its own claim
    assert len(fake.sent) == 1
    assert await ledger_state(ledger, "lost-ack") is State.DONE


async def test_a_ledger_away_until_the_deadline_sends_nothing_and_says_so(bus: Bus, fake: FakeBotApi) -> None:
    executor, _, close = await run(bus, fake)  # real time: the deadline is wall-clock time
    await bus.js.delete_stream(LEDGER_STREAM)
    try:
        result = await executor.act(send("ledger-gone", deadline_ms=now_ms() + 1500))
    finally:
        await close()
    assert result.outcome == "failed", result
    assert result.error is not None
    assert (result.error.code, result.error.retryable) == ("unavailable", True)
    assert "nothing was sent" in result.error.message
    assert not fake.calls("sendMessage")


async def test_a_self_sent_event_the_bus_refuses_is_published_again_and_the_send_stays_done(
    bus: Bus, fake: FakeBotApi
) -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        await bootstrap(bus.js)  # EVENTS is back (its new leader elected)

    executor, ledger, close = await run(bus, fake, sleep=sleep, jitter=jitter(0.5))
    await bus.js.delete_stream(STREAM_EVENTS)
    try:
        result = await executor.act(send("events-away"))
    finally:
        await close()
    assert result.outcome == "done", result
    assert waits == [0.5]  # one retry of the event, none of the send
    [message] = fake.sent
    info = await bus.js.stream_info(STREAM_EVENTS)
    assert info.state.messages == 1
    stored = decode((await bus.js.get_msg(STREAM_EVENTS, info.state.last_seq)).data or b"", MessageEvent)
    assert (stored.message_id, stored.is_self_sent) == (str(message["message_id"]), True)
    assert await ledger_state(ledger, "events-away") is State.DONE
