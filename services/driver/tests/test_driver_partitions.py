"""Two driver replicas on the real bus: chats split by partition lease, each woken by exactly one
replica, and a clean leave handing chats over — pending input and an open chain — without lost or
doubled turns."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from sqlalchemy.exc import OperationalError

from larkbot.canonical.codec import encode, headers_for
from larkbot.canonical.context import AppendOp, ContextUpdate
from larkbot.canonical.errors import RetryableError
from larkbot.canonical.llm import LLMReply, LLMRequest, TextPart, UserMessage
from larkbot.canonical.names import PARTITIONS, partition_of
from larkbot.driver.tools.core import tools
from larkbot.driver.wake.ownership import NotHeld
from larkbot.driver.wake.repository import DriverRepository
from larkbot.runtime.bus import Bus
from larkbot.runtime.consume import Delivery
from larkbot.testkit.driver.harness import PLATFORM, decide, world
from larkbot.testkit.driver.synthetic import response, segment, tool_call


def _chats_by_parity() -> tuple[list[str], list[str]]:
    """Two chats in even and two in odd partitions: replica "a" holds the even partitions, "b" the odd
    ones once both run (PartitionLeases assigns p % members)."""
    even: list[str] = []
    odd: list[str] = []
    for i in range(200):
        chat = f"oc_part{i}"
        (even if partition_of(PLATFORM.value, chat) % 2 == 0 else odd).append(chat)
    return even[:2], odd[:2]


EVEN, ODD = _chats_by_parity()
CHATS = [*EVEN, *ODD]


def _key(chat_id: str) -> str:
    return f"{PLATFORM.value}:{chat_id}"


def _late_binding(request: LLMRequest) -> str:
    last = request.messages[-1]
    assert isinstance(last, UserMessage)
    first = last.parts[0]
    assert isinstance(first, TextPart)
    return first.text


async def test_two_replicas_split_the_chats_and_hand_over_without_lost_or_doubled_turns(
    bus: Bus, nats_url: str, database_url: str
) -> None:
    # The replicas share one database, as in production (also on PostgreSQL when TEST_DATABASE_URL is set).
    async with world(bus, nats_url, database_url, chats=CHATS, replicas=("a",)) as w:
        a = w.driver
        assert a.host is not None
        assert len(a.host.partitions) == PARTITIONS

        async def round_of(n: int, at: int) -> None:
            for chat in CHATS:
                w.queue("probe", chat).append(decide("send_message", "asked"))
                w.queue("primary", chat).append(response(tool_call(tools.SEND, "s", text=f"r{n} {chat}")))
                await w.say(n, at, chat_id=chat, mentions_me=True)
            await w.tick(at + 1000)
            for chat in CHATS:
                await w.synced(chat)

        # One replica drives every chat.
        await round_of(1, 0)
        assert all(a.chats[_key(c)].wakeups == 1 for c in CHATS)

        # A second replica joins: the partitions split, each chat is held by exactly one replica.
        b = await w.start_replica("b")
        await w.balanced()
        assert b.host is not None
        assert len(a.host.partitions) == len(b.host.partitions) == PARTITIONS // 2
        assert set(a.host.partitions).isdisjoint(b.host.partitions)
        assert sorted(a.chats) == sorted(map(_key, EVEN))
        assert sorted(b.chats) == sorted(map(_key, ODD))

        await round_of(2, 5000)
        assert all(a.chats[_key(c)].wakeups == 2 for c in EVEN)
        assert all(b.chats[_key(c)].wakeups == 1 for c in ODD)  # taken over: only the new input woke it
        for chat in CHATS:
            assert w.platform.sent_in(chat) == [f"r1 {chat}", f"r2 {chat}"]

        # "b" leaves while one of its chats is inside a chain and another has input waiting for its
        # debounce: the step in progress is persisted, then "a" takes both over.
        chained, waiting = ODD
        leaving: asyncio.Future[asyncio.Task[None]] = asyncio.get_running_loop().create_future()

        async def read_while_leaving(request: LLMRequest) -> LLMReply:
            state = b.chats[_key(chained)]
            leaving.set_result(asyncio.create_task(w.stop_replica("b")))
            await w.watch("b").until(lambda: state.stopping)
            return response(tool_call(tools.READ_OLD, "r", message_ids=["m1"]), request_id=request.request_id)

        w.queue("probe", chained).append(decide("send_message", "asked again"))
        w.queue("primary", chained).extend(
            [read_while_leaving, response(tool_call(tools.SEND, "s", text=f"r3 {chained}"))]
        )
        w.queue("probe", waiting).append(decide("send_message", "asked"))
        w.queue("primary", waiting).append(response(tool_call(tools.SEND, "s", text=f"r3 {waiting}")))
        await w.say(3, 10_000, chat_id=chained, mentions_me=True)
        await w.say(3, 10_500, chat_id=waiting, mentions_me=True)
        w.clock.advance(w.t0 + 11_000 - w.clock.now_ms())  # the chained chat's debounce fires on "b"
        await asyncio.wait_for(await asyncio.wait_for(leaving, 30), 30)
        await w.balanced()
        assert len(a.host.partitions) == PARTITIONS
        await w.tick(11_000)  # "a" resumed the open chain at once, without the probe
        await w.synced(chained)
        assert w.platform.sent_in(chained) == [f"r1 {chained}", f"r2 {chained}", f"r3 {chained}"]
        assert len(w.requests("probe", chained)) == 3
        primary = w.requests("primary", chained)
        assert len(primary) == 4
        assert "interrupted" in _late_binding(primary[-1])
        turns = await a.repo.turns(PLATFORM.value, chained)
        step0, step1 = turns[-2:]
        assert (step0.chain_id, step0.step, step0.requires_follow_up) == (step1.chain_id, 0, True)
        assert step1.step == 1
        assert step0.wake_id != step1.wake_id  # two replicas, one chain

        assert w.platform.sent_in(waiting) == [f"r1 {waiting}", f"r2 {waiting}"]
        await w.tick(11_500)  # the waiting input's debounce, now on "a"
        await w.synced(waiting)
        assert w.platform.sent_in(waiting) == [f"r1 {waiting}", f"r2 {waiting}", f"r3 {waiting}"]
        assert len(w.requests("probe", waiting)) == 3

        await w.tick(60_000)  # nothing processed comes back, nothing was doubled
        for chat in CHATS:
            rounds = 3 if chat in ODD else 2
            assert w.platform.sent_in(chat) == [f"r{n} {chat}" for n in range(1, rounds + 1)]
            assert len(w.requests("probe", chat)) == rounds


async def test_a_restarted_replica_wakes_for_what_arrived_while_it_was_down_and_nothing_else(
    bus: Bus, nats_url: str, tmp_path: Path
) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}"
    chat = EVEN[0]
    async with world(bus, nats_url, db, chats=[chat], replicas=("a",)) as w:
        w.queue("probe", chat).append(decide("send_message", "asked"))
        w.queue("primary", chat).append(response(tool_call(tools.SEND, "s", text="first")))
        await w.say(1, 0, chat_id=chat, mentions_me=True)
        await w.tick(1000)
        await w.synced(chat)
        await w.stop_replica("a")

        # Published while no replica runs: kept by the partition's durable consumer and in the snapshot.
        await w.pipeline.append(segment(2, at_ms=w.t0 + 2000, mentions_me=True), chat_id=chat)
        w.queue("probe", chat).append(decide("send_message", "asked again"))
        w.queue("primary", chat).append(response(tool_call(tools.SEND, "s", text="second")))
        await w.start_replica("a")
        await w.balanced()
        state = await w.applied(chat, w.pipeline.log(chat).seq, replica="a")
        assert state.marks.processed_until_ms == w.t0  # message 1 was processed before the restart
        await w.tick(3000)
        await w.synced(chat)
        assert w.platform.sent_in(chat) == ["first", "second"]
        assert len(w.requests("probe", chat)) == 2
        assert "message number 2" in "".join(
            p.text for p in w.requests("probe", chat)[-1].messages[0].parts if isinstance(p, TextPart)
        )


async def test_an_update_of_a_chat_held_elsewhere_is_left_for_its_owner(
    bus: Bus, nats_url: str, tmp_path: Path
) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}"
    async with world(bus, nats_url, db, chats=CHATS, replicas=("a", "b")) as w:
        a = w.driver
        assert a.host is not None
        update = ContextUpdate(
            platform=PLATFORM,
            chat_id=ODD[0],
            seq=1,
            base_seq=0,
            cursor=0,
            ops=(AppendOp(segments=(segment(1, at_ms=w.t0),)),),
        )
        unconfigured = update.model_copy(update={"chat_id": "oc_nobody"})

        def delivery(model: ContextUpdate) -> Delivery:
            return Delivery(
                msg=None,  # type: ignore[arg-type]
                stream="CONTEXT",
                consumer="driver-p00",
                subject="context.0.feishu.x",
                data=encode(model),
                headers=headers_for(model),
                stream_seq=1,
                num_delivered=1,
            )

        with pytest.raises(NotHeld):  # nak'ed: JetStream redelivers it to the replica that holds the chat
            await a.host.on_context(delivery(update))
        await a.host.on_context(delivery(unconfigured))  # acknowledged: nobody drives that chat
        assert a.chats.keys() == {_key(c) for c in EVEN}


def _takeover_retries() -> float:
    labels = {"outcome": "retried"}
    return REGISTRY.get_sample_value("larkbot_driver_takeover_snapshots_total", labels) or 0.0


def _in_distinct_partitions(n: int) -> list[str]:
    found: dict[int, str] = {}
    for i in range(10_000):
        found.setdefault(partition_of(PLATFORM.value, f"oc_tk{i}"), f"oc_tk{i}")
        if len(found) == n:
            break
    return list(found.values())


async def test_take_overs_failing_for_one_cause_log_it_once_and_its_end_once(
    bus: Bus, nats_url: str, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """While the pipeline cannot answer snapshots (a replica of it killed, say), every chat of every
    partition taken over retries: the cause is logged once, not once per chat and retry."""
    chats = _in_distinct_partitions(6)
    async with world(bus, nats_url, database_url, chats=chats, replicas=()) as w:
        w.pipeline.snapshot_failure = RetryableError("partition 3 is held by a replica that does not answer")
        before = _takeover_retries()
        with caplog.at_level(logging.DEBUG, logger="larkbot.driver.wake.ownership"):
            await w.start_replica("a")
            deadline = asyncio.get_running_loop().time() + 60
            # Every chat failed, and most of them more than once.
            while _takeover_retries() - before < 3 * len(chats):
                assert asyncio.get_running_loop().time() < deadline, "the take-overs did not retry"
                await asyncio.sleep(0.05)
            w.pipeline.snapshot_failure = None
            await w.balanced()
        lines = [r for r in caplog.records if "take-over" in r.getMessage()]
        warnings = [r.getMessage() for r in lines if r.levelno >= logging.WARNING]
        assert len(warnings) == 1
        assert "unavailable: RetryableError: partition 3 is held by a replica" in warnings[0]
        assert [r.getMessage() for r in lines if r.levelno == logging.INFO] == [
            "snapshots for the take-over: no longer failing with unavailable"
        ]


def _takeover_failures() -> float:
    labels = {"group": "driver"}
    return REGISTRY.get_sample_value("larkbot_partition_takeover_failures_total", labels) or 0.0


async def test_a_take_over_that_fails_is_given_back_and_tried_again_and_the_replica_is_not_ready_meanwhile(
    bus: Bus, nats_url: str, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening a chat fails while the database is away: the partition's take-over leaves nothing behind,
    readiness names it, and once the database answers the partition is taken over and its chat driven."""
    chat = EVEN[0]
    partition = partition_of(PLATFORM.value, chat)
    away = True
    latest_turn = DriverRepository.latest_turn

    async def failing(repo: DriverRepository, platform: str, chat_id: str) -> object:
        if away and chat_id == chat:
            raise OperationalError("SELECT", {}, ConnectionRefusedError("the database is away"))
        return await latest_turn(repo, platform, chat_id)

    monkeypatch.setattr(DriverRepository, "latest_turn", failing)
    async with world(bus, nats_url, database_url, chats=[chat], replicas=()) as w:
        before = _takeover_failures()
        a = await w.start_replica("a")
        deadline = asyncio.get_running_loop().time() + 60
        while partition not in a.leases.failing:
            assert asyncio.get_running_loop().time() < deadline, "the take-over never failed"
            await asyncio.sleep(0.05)
        assert _takeover_failures() > before
        check = await a.partitions_ready()
        assert not check.ok
        assert f"take-over failing: {partition} (OperationalError)" in check.detail
        # Nothing of the failed take-over is left: no partition, no chat, no lease.
        assert partition not in a.host.partitions
        assert _key(chat) not in a.chats
        assert partition not in a.leases.owned

        away = False
        await w.balanced()
        assert (await a.partitions_ready()).ok
        assert a.leases.failing == {}
        w.queue("probe", chat).append(decide("send_message", "asked"))
        w.queue("primary", chat).append(response(tool_call(tools.SEND, "s", text="back")))
        await w.say(1, 0, chat_id=chat, mentions_me=True)
        await w.tick(1000)
        await w.synced(chat)
        assert w.platform.sent_in(chat) == ["back"]
