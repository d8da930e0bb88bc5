"""The ephemeral subscription and the KV watch: decoded messages in order, and a policy that logs and
counts — an undecodable message or a failing handler never ends the subscription or the watch."""

from __future__ import annotations

import asyncio
import logging
import secrets

import pytest

from larkbot.canonical.codec import encode, headers_for
from larkbot.canonical.errors import PermanentError
from larkbot.canonical.events import TypingSignal
from larkbot.runtime import metrics
from larkbot.runtime.bus import Bus
from larkbot.runtime.serve import model_decoder
from larkbot.runtime.subscribe import Subscription
from larkbot.runtime.watch import KvUpdate, KvWatch

WAIT = 30.0


def _signal(n: int) -> TypingSignal:
    return TypingSignal(platform="telegram", chat_id="-100", user_id=str(n), at_ms=1_700_000_000_000 + n)


async def test_a_subscription_decodes_in_order_and_survives_bad_input_and_a_failing_handler(
    bus: Bus, caplog: pytest.LogCaptureFixture
) -> None:
    subject = f"typing.t{secrets.token_hex(3)}.>"
    got: list[str] = []
    done = asyncio.Event()

    async def handle(signal: TypingSignal) -> None:
        if signal.user_id == "2":
            raise PermanentError("refused")
        got.append(signal.user_id)
        if signal.user_id == "3":
            done.set()

    sub = Subscription(bus, subject, model_decoder(TypingSignal), handle)
    await sub.start()
    where = subject.replace(">", "chat")
    undecodable = metrics.SUBSCRIPTION_MESSAGES.labels(subject, "undecodable")
    failed = metrics.SUBSCRIPTION_MESSAGES.labels(subject, "error")
    before = (undecodable._value.get(), failed._value.get())
    try:
        with caplog.at_level(logging.WARNING):
            await bus.nc.publish(where, encode(_signal(1)), headers=headers_for(_signal(1)))
            await bus.nc.publish(where, b"not json")
            for n in (2, 3):
                await bus.nc.publish(where, encode(_signal(n)), headers=headers_for(_signal(n)))
            await asyncio.wait_for(done.wait(), WAIT)
    finally:
        await sub.stop()
    assert got == ["1", "3"]
    assert (undecodable._value.get(), failed._value.get()) == (before[0] + 1, before[1] + 1)
    assert "does not decode" in caplog.text
    assert "refused" in caplog.text


async def test_a_watch_starts_with_every_stored_entry_then_follows_writes_and_deletes(bus: Bus) -> None:
    bucket = f"w{secrets.token_hex(3)}"
    kv = await bus.js.create_key_value(bucket=bucket)
    await kv.put("a", b"1")
    await kv.put("b", b"2")
    mirror: dict[str, bytes] = {}
    revisions: list[int] = []

    async def take(update: KvUpdate) -> None:
        revisions.append(update.revision)
        if update.value is None:
            mirror.pop(update.key, None)
        else:
            mirror[update.key] = update.value

    watch = KvWatch(bus, bucket, take)
    try:
        await watch.start()
        assert mirror == {"a": b"1", "b": b"2"}  # complete when start returns
        task = asyncio.create_task(watch.run())
        await kv.put("a", b"3")
        await kv.delete("b")
        await watch.synced(WAIT)  # every write before the call is mirrored
        assert mirror == {"a": b"3"}
        assert revisions == sorted(revisions)
    finally:
        await watch.stop()
        await bus.js.delete_key_value(bucket)
    await asyncio.wait_for(task, WAIT)
