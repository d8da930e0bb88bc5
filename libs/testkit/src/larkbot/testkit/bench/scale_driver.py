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
and mention it again, ``turns`` times (a reply that has not come within :data:`REPLY_TIMEOUT_S` is
counted ``unanswered`` and the member asks on). A turn's latency runs from the context update's
publication to the ``send_message`` action reaching the platform: the driver's consumer, wake-up, probe,
primary, the write-ahead step and the action request, with every chat of the run waiting on the same
replicas — so under load it includes the queueing. Reported per replica count: ``turns_per_s``,
``turn_ms`` ``{p50, p99}``, ``unanswered``, and per replica the partitions it holds, its chats and the
turns it sent.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import time
from pathlib import Path
from typing import Any

from larkbot.canonical.actions import SendMessageAction
from larkbot.canonical.llm import LLMReply, LLMRequest, TextPart, ToolResultMessage, UserMessage
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
#: A member waits this long for the bot's reply, then asks its next question (the unanswered one is
#: counted): a wake-up that failed for good stays latched until new input.
REPLY_TIMEOUT_S = 60.0
_QUESTION = re.compile(r"question (\d+) from member")
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
        asked = _QUESTION.findall(_text(request))
        reply = response(tool_call(tools.SEND, "c0", text=f"answer {asked[-1] if asked else '?'}"))
    return reply.model_copy(update={"request_id": request.request_id})


def _text(request: LLMRequest) -> str:
    return "".join(
        part.text
        for message in request.messages
        if isinstance(message, UserMessage)
        for part in message.parts
        if isinstance(part, TextPart)
    )


class _Turns:
    """Each chat's turn in flight: the member's question published, the bot's reply to it awaited (a late
    reply to an earlier question does not count for a later one)."""

    def __init__(self) -> None:
        self.waiting: dict[str, tuple[str, asyncio.Future[float]]] = {}
        self.unanswered = 0

    def sent(self, action: SendMessageAction) -> None:
        text, waiter = self.waiting.get(action.chat_id, ("", None))
        if waiter is not None and action.text == text and not waiter.done():
            waiter.set_result(time.monotonic())

    def expect(self, chat_id: str, question: int) -> asyncio.Future[float]:
        waiter: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self.waiting[chat_id] = (f"answer {question}", waiter)
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
                        reply = in_flight.expect(chat, k)
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
                        try:
                            timed.append(await asyncio.wait_for(reply, REPLY_TIMEOUT_S) - started)
                        except TimeoutError:
                            in_flight.unanswered += 1

                # One turn in every chat first, not timed: a chat's first wake-up also pays for
                # connections and caches the replica fills once.
                warm: list[float] = []
                await asyncio.gather(*(member(i, chat, range(1), warm) for i, chat in enumerate(chats)))
                sent_before = await _sent(stack, names, 0, len(warm))
                in_flight.unanswered = 0
                cpu_before = [stack.cpu_seconds(name) or 0.0 for name in names]
                bench_before = time.process_time()
                started = time.perf_counter()
                await asyncio.gather(
                    *(member(i, chat, range(1, turns + 1), latencies) for i, chat in enumerate(chats))
                )
                elapsed = time.perf_counter() - started
                bench_cpu = time.process_time() - bench_before
                cpu = [
                    (stack.cpu_seconds(name) or 0.0) - before
                    for name, before in zip(names, cpu_before, strict=True)
                ]
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
        "unanswered": in_flight.unanswered,
        "seconds": round(elapsed, 3),
        "turns_per_s": round(len(latencies) / elapsed, 1),
        "turn_ms": quantiles(latencies),
        "partitions_owned": held,
        "chats_driven": driven,
        "turns_sent": sent,
        "cores": [sorted(stack.services[name].cores or ()) for name in names],
        # CPU per timed turn: each replica's, and this process's (the stand-ins of the pipeline, the
        # model and the platform, which decode every request the replicas send).
        "cpu_ms_per_turn": {
            "replicas": [round(seconds * 1000 / max(1, len(latencies)), 2) for seconds in cpu],
            "bench": round(bench_cpu * 1000 / max(1, len(latencies)), 2),
        },
    }


async def measure_driver(
    nats_url: str, base_url: str, quick: bool, root: Path, counts: tuple[int, ...]
) -> list[dict[str, Any]]:
    """The driver with each replica count of ``counts`` in turn (quick: 10 chats of 3 turns, else 50 of 8;
    each chat's first turn before them is not timed)."""
    chats, turns = (10, 3) if quick else (50, 8)
    runs = []
    for index, replicas in enumerate(counts):
        note(f"scale: {replicas} driver replica(s), {chats} chats × {turns} turns")
        runs.append(await _run(nats_url, base_url, replicas, chats, turns, root / f"d{index}"))
    return runs
