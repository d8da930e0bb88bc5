"""The driver's half of ``larkbot bench --only scale``: one and then two ``larkbot run driver`` processes
on PostgreSQL, each pinned to a core of its own where the machine has them.

Its neighbours are the testkit's stand-ins in the bench process, on the real bus: the pipeline
(:class:`~..driver.fake_pipeline.FakePipeline` publishes each member's message as a context update on the
partitioned ``CONTEXT`` stream and answers the snapshots of a take-over), the model
(:class:`~..driver.fakes.FakeLLM` on ``llm.generate``, answering at once: the probe decides
``send_message``, the primary sends) and the platform (:class:`~..driver.fakes.FakePlatform` on
``actions.feishu``). No gateway and no ingress: the figure is the driver's, and Telegram's or Feishu's
send pacing, which an ingress must honour, would otherwise cap it.

The load is a closed loop: ``chats`` members each mention the bot in their own chat, wait for its reply
and mention it again, ``turns`` times. A turn's latency runs from the context update's publication to the
``send_message`` action reaching the platform: the driver's consumer, wake-up, probe, primary, the
write-ahead step and the action request, with every chat of the run waiting on the same replicas — so
under load it includes the queueing. Reported per replica count: ``turns_per_s``, ``turn_ms``
``{p50, p99}``, and per replica the partitions it holds, its chats and the turns it sent.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from pathlib import Path
from typing import Any

from larkbot.canonical.actions import SendMessageAction
from larkbot.canonical.llm import LLMReply, LLMRequest, ToolResultMessage
from larkbot.canonical.names import PARTITIONS, Platform
from larkbot.driver.tools.core import tools
from larkbot.runtime.bus import connect
from larkbot.runtime.config import NatsSettings
from larkbot.runtime.serve import Endpoint

from ..databases import fresh_postgres
from ..driver.fake_pipeline import FakePipeline
from ..driver.fakes import FakeLLM, FakePlatform
from ..driver.harness import decide, end_turn, summarize
from ..driver.synthetic import response, segment, tool_call
from ..stack import Stack, until
from .limits import quantiles
from .progress import note

__all__ = ["measure_driver"]

READY_TIMEOUT_S = 180.0
TURN_TIMEOUT_S = 300.0
PARTITIONS_HELD = "larkbot_driver_partitions"
CHATS_DRIVEN = "larkbot_driver_chats"
TURNS = "larkbot_driver_turns_total"


async def _answer(request: LLMRequest) -> LLMReply:
    """The model, answering at once: act on every mention, send one reply, then end the turn."""
    if request.purpose == "probe":
        reply = decide("send_message", "mentioned")
    elif request.purpose == "compaction":
        reply = summarize(request)
    elif isinstance(request.messages[-1], ToolResultMessage):
        reply = end_turn()
    else:
        reply = response(tool_call(tools.SEND, "c0", text="on it"))
    return reply.model_copy(update={"request_id": request.request_id})


class _Turns:
    """Each chat's turn in flight: the member's mention published, the bot's reply awaited."""

    def __init__(self) -> None:
        self.waiting: dict[str, asyncio.Future[float]] = {}

    def sent(self, action: SendMessageAction) -> None:
        waiter = self.waiting.pop(action.chat_id, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(time.monotonic())

    def expect(self, chat_id: str) -> asyncio.Future[float]:
        waiter: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self.waiting[chat_id] = waiter
        return waiter


async def _settled(stack: Stack, names: list[str]) -> None:
    async def balanced() -> bool:
        statuses = [(await stack.readyz(name))[0] for name in names]
        held = [await stack.scrape(name, PARTITIONS_HELD) for name in names]
        return all(status == 200 for status in statuses) and sum(held) == PARTITIONS and min(held) > 0

    await until(balanced, f"{len(names)} driver replica(s) ready and balanced", READY_TIMEOUT_S)


async def _sent(stack: Stack, names: list[str], before: int, turns: int) -> list[int]:
    """Each replica's sent turns, once they add up to ``turns`` more than ``before``: a turn is counted
    when its last step is persisted, a moment after its send reached the platform."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        sent = [int(await stack.scrape(name, TURNS, outcome="sent")) for name in names]
        if sum(sent) - before >= turns or time.monotonic() > deadline:
            return sent
        await asyncio.sleep(0.1)


async def _run(
    nats_url: str, base_url: str, replicas: int, chats_count: int, turns: int, root: Path
) -> dict[str, Any]:
    tag = secrets.token_hex(3)
    chats = [f"oc_dscale_{tag}_{i}" for i in range(chats_count)]
    latencies: list[float] = []
    in_flight = _Turns()
    bus = await connect(NatsSettings(), "bench-scale-driver", url=nats_url, give_up_after_s=30)
    pipeline = FakePipeline(bus, Platform.FEISHU, chats[0])
    platform = FakePlatform(
        bus, Platform.FEISHU, pipeline, lambda: int(time.time() * 1000), on_sent=in_flight.sent
    )
    llm = FakeLLM(bus, _answer, keep=False)
    endpoints: list[Endpoint[Any]] = [platform.endpoint, llm.endpoint]
    try:
        await pipeline.start()
        for endpoint in endpoints:
            await endpoint.start()
        async with fresh_postgres(base_url, ("driver",), prefix="larkbot_bench_dscale") as urls:
            stack = Stack(
                root / f"driver-{replicas}",
                nats_url,
                {
                    "utc_offset_min": 480,
                    "services": {"driver": {"database_url": urls["driver"], "log_level": "WARNING"}},
                    "chats": {
                        "default": {"display_name": "Lark", "initial_delay_ms": 0},
                        **{f"feishu:{chat}": {} for chat in chats},
                    },
                },
            )
            names = stack.add_pinned("driver", replicas)
            try:
                await stack.up()
                await _settled(stack, names)
                held = [int(await stack.scrape(name, PARTITIONS_HELD)) for name in names]
                driven = [int(await stack.scrape(name, CHATS_DRIVEN)) for name in names]

                async def member(index: int, chat: str, rounds: range, timed: list[float]) -> None:
                    for k in rounds:
                        reply = in_flight.expect(chat)
                        started = time.monotonic()
                        message = segment(
                            10_000_000 + k,
                            sender=f"ou_member_{index}",
                            name=f"Member {index}",
                            at_ms=int(time.time() * 1000),
                            text=f"@Lark question {k} from member {index}?",
                            mentions_me=True,
                        )
                        await pipeline.append(message, chat_id=chat)
                        timed.append(await asyncio.wait_for(reply, TURN_TIMEOUT_S) - started)

                # One turn in every chat first, not timed: a chat's first wake-up also pays for
                # connections and caches the replica fills once.
                await asyncio.gather(*(member(i, chat, range(1), []) for i, chat in enumerate(chats)))
                sent_before = await _sent(stack, names, 0, len(chats))
                started = time.perf_counter()
                await asyncio.gather(
                    *(member(i, chat, range(1, turns + 1), latencies) for i, chat in enumerate(chats))
                )
                elapsed = time.perf_counter() - started
                sent_after = await _sent(stack, names, sum(sent_before), len(latencies))
                sent = [after - before for after, before in zip(sent_after, sent_before, strict=True)]
            finally:
                await stack.down()
    finally:
        for endpoint in endpoints:
            await endpoint.stop()
        await pipeline.stop()
        await bus.close()
    return {
        "replicas": replicas,
        "chats": chats_count,
        "turns": len(latencies),
        "seconds": round(elapsed, 3),
        "turns_per_s": round(len(latencies) / elapsed, 1),
        "turn_ms": quantiles(latencies),
        "partitions_owned": held,
        "chats_driven": driven,
        "turns_sent": sent,
        "cores": [sorted(stack.services[name].cores or ()) for name in names],
    }


async def measure_driver(nats_url: str, base_url: str, quick: bool, root: Path) -> list[dict[str, Any]]:
    """The driver with one and then two replicas (quick: 20 chats of 3 turns, else 200 of 5; each chat's
    first turn before them is not timed)."""
    chats, turns = (20, 3) if quick else (200, 5)
    runs = []
    for replicas in (1, 2):
        note(f"scale: {replicas} driver replica(s), {chats} chats × {turns} turns")
        runs.append(await _run(nats_url, base_url, replicas, chats, turns, root))
    return runs
