"""Partition ownership over the real bus: one owner per partition, rebalancing, per-chat order kept."""

from __future__ import annotations

import asyncio
import secrets
from collections import defaultdict
from collections.abc import Awaitable, Callable

from nats.js.api import AckPolicy, ConsumerConfig, StreamConfig, SubjectTransform

from larkbot.canonical.events import TypingSignal
from larkbot.canonical.names import KV_LEASES
from larkbot.runtime.bus import Bus
from larkbot.runtime.consume import Delivery, PullConsumer
from larkbot.runtime.partitions import PartitionLeases

WAIT = 60.0
N = 4


async def _eventually(predicate: Callable[[], Awaitable[bool] | bool], timeout_s: float = WAIT) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        result = predicate()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


class _Replica:
    def __init__(
        self, bus: Bus, kv: object, name: str, stream: str, tag: str, log: dict[str, list[tuple[str, int]]]
    ):
        self.name = name
        self.log = log

        async def handle(d: Delivery) -> None:
            signal = TypingSignal.model_validate_json(d.data)
            self.log[signal.chat_id].append((name, signal.at_ms))

        # Each held partition is consumed through its durable consumer, stopped (its batch in hand
        # acknowledged) before the lease is handed over.
        running: dict[int, tuple[PullConsumer, asyncio.Task[None]]] = {}

        async def acquire(partition: int) -> None:
            consumer = PullConsumer(bus.js, stream, f"{tag}-p{partition}", handle, fetch_timeout_s=0.2)
            running[partition] = (consumer, asyncio.create_task(consumer.run()))

        async def release(partition: int) -> None:
            consumer, task = running.pop(partition)
            consumer.stop()
            await task

        self.leases = PartitionLeases(
            kv,  # type: ignore[arg-type]
            tag,
            name,
            N,
            on_acquire=acquire,
            on_release=release,
            heartbeat_s=0.2,
        )
        self.task = asyncio.create_task(self.leases.run())

    async def stop(self) -> None:
        self.leases.stop()
        await asyncio.wait_for(self.task, WAIT)


async def test_partitions_move_between_replicas_without_breaking_order(bus: Bus) -> None:
    tag = f"g{secrets.token_hex(3)}"
    stream = tag.upper()
    await bus.js.add_stream(
        StreamConfig(
            name=stream,
            subjects=[f"{tag}.*.*"],
            subject_transform=SubjectTransform(
                src=f"{tag}.*.*",
                dest=f"{tag}.{{{{partition({N},1,2)}}}}.{{{{wildcard(1)}}}}.{{{{wildcard(2)}}}}",
            ),
        )
    )
    for p in range(N):
        await bus.js.add_consumer(
            stream,
            ConsumerConfig(
                durable_name=f"{tag}-p{p}", filter_subject=f"{tag}.{p}.>", ack_policy=AckPolicy.EXPLICIT
            ),
        )
    kv = await bus.js.create_key_value(bucket=f"L{tag}", ttl=3)
    log: dict[str, list[tuple[str, int]]] = defaultdict(list)
    chats = [f"chat{i}" for i in range(12)]
    sent = 0

    async def send(rounds: int) -> None:
        nonlocal sent
        for _ in range(rounds):
            sent += 1
            for chat in chats:
                await bus.publish(
                    f"{tag}.telegram.{chat}",
                    TypingSignal(platform="telegram", chat_id=chat, user_id="u", at_ms=sent),
                )

    first = _Replica(bus, kv, "a", stream, tag, log)
    await _eventually(lambda: len(first.leases.owned) == N)
    await send(5)
    await _eventually(lambda: all(len(log[c]) == sent for c in chats))

    second = _Replica(bus, kv, "b", stream, tag, log)
    await _eventually(lambda: len(first.leases.owned) == N // 2 and len(second.leases.owned) == N // 2)
    assert set(first.leases.owned).isdisjoint(second.leases.owned)
    await send(5)
    await _eventually(lambda: all(len(log[c]) == sent for c in chats))
    assert {name for c in chats for name, _ in log[c][5:]} == {"a", "b"}  # both replicas now consume

    await first.stop()  # clean leave: its partitions are handed over without waiting for the TTL
    await _eventually(lambda: len(second.leases.owned) == N)
    await send(5)
    await _eventually(lambda: all(len(log[c]) == sent for c in chats))
    await second.stop()

    for chat in chats:
        # Exactly once and in order for every chat, across two hand-overs.
        assert [n for _, n in log[chat]] == list(range(1, sent + 1)), chat


async def test_listing_members_leaves_no_consumer_behind(bus: Bus) -> None:
    # Regression: members() listed keys through nats-py's kv.keys(), an ordered consumer the server keeps
    # 5 minutes; a rebalance round every few seconds piled them up until every lease operation failed
    # with BadRequest (seen after ~10 minutes of a 0.2 s heartbeat).
    kv = await bus.js.key_value(KV_LEASES)
    tag = f"g{secrets.token_hex(3)}"
    leases = PartitionLeases(kv, tag, "a", N, on_acquire=_nothing, on_release=_nothing)
    await kv.put(f"{tag}.members.b", b"b")
    await kv.put(f"{tag}.members.c", b"c")
    await kv.delete(f"{tag}.members.c")  # a clean leave
    await kv.put("other.members.z", b"z")  # another group
    before = (await bus.js.stream_info(f"KV_{KV_LEASES}")).state.consumer_count
    for _ in range(50):
        assert await leases.members() == ["a", "b"]
    assert (await bus.js.stream_info(f"KV_{KV_LEASES}")).state.consumer_count == before


async def _nothing(_partition: int) -> None:
    return None
