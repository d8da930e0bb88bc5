"""A driver running in-process on a real bus with its neighbours faked (scripted LLM, platform, pipeline)
and a manual clock: the scenario tests' and the playground's world.

Time moves only through :meth:`World.tick`, which waits until the driver has looked at the new time and
has nothing left to do, so scenarios are deterministic on a loaded machine.
"""

from __future__ import annotations

import collections
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from larkbot.canonical.events import TypingSignal
from larkbot.canonical.llm import LLMReply, LLMRequest
from larkbot.canonical.names import Platform, Service, typing_subject
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import LarkbotConfig
from larkbot.runtime.service import running

from .adapters.chatstate import ChatState
from .adapters.clock import ManualClock
from .app import DriverService
from .core import tools
from .fakes import FakeLLM, FakePipeline, FakePlatform
from .synthetic import response, segment, tool_call

CHAT_ID = "oc_scenario"
PLATFORM = Platform.FEISHU

Answer = LLMReply | Callable[[LLMRequest], Awaitable[LLMReply]]


def decide(decision: str, reason: str = "because") -> LLMReply:
    return response(tool_call("decide", should_act=decision, reason=reason))


def end_turn() -> LLMReply:
    return response(tool_call(tools.END, "end"))


class World:
    def __init__(self, bus: Bus, clock: ManualClock, driver: DriverService) -> None:
        self.bus = bus
        self.clock = clock
        self.driver = driver
        self.t0 = clock.now_ms()
        self.pipeline = FakePipeline(bus, PLATFORM, CHAT_ID)
        self.platform = FakePlatform(bus, PLATFORM, self.pipeline, clock.now_ms)
        self.llm = FakeLLM(bus, self._answer)
        self.probe_answers: collections.deque[Answer] = collections.deque()
        self.primary_answers: collections.deque[Answer] = collections.deque()

    async def _answer(self, request: LLMRequest) -> LLMReply:
        queue = self.probe_answers if request.purpose == "probe" else self.primary_answers
        default = decide("no_action", "nothing to add") if request.purpose == "probe" else end_turn()
        answer = queue.popleft() if queue else default
        if callable(answer):
            return await answer(request)
        return answer.model_copy(update={"request_id": request.request_id})

    async def say(self, n: int, at: int, **flags: Any) -> ChatState:
        """Message ``n`` from a member (``sender``/``name`` in ``flags``) received at ``t0 + at``."""
        seq = await self.pipeline.append(segment(n, at_ms=self.t0 + at, **flags))
        return await self.driver.applied(PLATFORM.value, CHAT_ID, seq)

    async def typing(self, user_id: str, at: int) -> None:
        signal = TypingSignal(platform=PLATFORM, chat_id=CHAT_ID, user_id=user_id, at_ms=self.t0 + at)
        chat = self.chat
        await self.bus.publish_core(typing_subject(PLATFORM.value, CHAT_ID), signal)
        await self.driver.until(lambda: chat.schedule.last_typing_ms == signal.at_ms)

    async def synced(self) -> ChatState:
        """Wait until the driver holds everything the pipeline published (e.g. the bot's own sends)."""
        return await self.driver.applied(PLATFORM.value, CHAT_ID, self.pipeline.seq)

    @property
    def chat(self) -> ChatState:
        return self.driver.chats[f"{PLATFORM.value}:{CHAT_ID}"]

    async def tick(self, to: int) -> None:
        """Move the clock to ``t0 + to`` and wait until the driver has settled."""
        self.clock.advance(self.t0 + to - self.clock.now_ms())
        await self.chat.settled()


@asynccontextmanager
async def world(bus: Bus, nats_url: str, database_url: str, **chat: Any) -> AsyncIterator[World]:
    config = LarkbotConfig.model_validate(
        {
            "services": {"driver": {"database_url": database_url, "http_host": "127.0.0.1"}},
            "utc_offset_min": 480,
            "chats": {"default": {"display_name": "Lark", **chat}, f"{PLATFORM.value}:{CHAT_ID}": {}},
        }
    )
    clock = ManualClock(1_800_000_000_000)
    driver = DriverService(config, clock=clock)
    w = World(bus, clock, driver)
    await w.pipeline.start()
    await w.platform.endpoint.start()
    await w.llm.endpoint.start()
    try:
        async with running(Service.DRIVER, driver, config, nats_url=nats_url):
            yield w
    finally:
        await w.llm.endpoint.stop()
        await w.platform.endpoint.stop()
        await w.pipeline.stop()
