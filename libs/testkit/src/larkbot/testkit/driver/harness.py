"""Driver replicas running in-process on a real bus with their neighbours faked (scripted LLM, platform,
pipeline, media) and one manual clock: the world of the driver's scenario tests.

Time moves only through :meth:`World.tick`, which waits until every replica has looked at the new time and
has nothing left to do, so scenarios are deterministic on a loaded machine. Replicas share the database
and the clock, and split the partitions through the real lease bucket (heartbeat 0.2 s). Each replica is
built with a :class:`~.watch.DriverWatch` as its observer: every wait here is a condition over what the
replicas reported (:meth:`World.applied`, :meth:`World.balanced`, :meth:`World.tick`).
"""

from __future__ import annotations

import asyncio
import collections
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from larkbot.canonical.events import TypingSignal
from larkbot.canonical.llm import LLMReply, LLMRequest, TextPart, UserMessage
from larkbot.canonical.names import PARTITIONS, Platform, Service, typing_subject
from larkbot.driver.app import Driver, DriverOptions, DriverService
from larkbot.driver.tools.core import tools
from larkbot.driver.wake.chatstate import ChatState
from larkbot.driver.wake.clock import ManualClock
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import LarkbotConfig
from larkbot.runtime.db import PoolLimits
from larkbot.runtime.serve import Endpoint
from larkbot.runtime.service import ServiceContext, built

from .fake_pipeline import FakePipeline
from .fakes import FakeLLM, FakeMedia, FakePlatform
from .synthetic import response, segment, tool_call
from .watch import DriverWatch

CHAT_ID = "oc_scenario"
PLATFORM = Platform.FEISHU
HEARTBEAT_S = 0.2
#: Short fetches: a stopping replica's consumers end within this (tests start and stop many).
FETCH_TIMEOUT_S = 0.25

Answer = LLMReply | Callable[[LLMRequest], Awaitable[LLMReply]]


def decide(decision: str, reason: str = "because") -> LLMReply:
    return response(tool_call("decide", should_act=decision, reason=reason))


def end_turn() -> LLMReply:
    return response(tool_call(tools.END, "end"))


def summarize(request: LLMRequest) -> LLMReply:
    """A compaction's default answer: names the first and last message ids it was given."""
    log = request.messages[0]
    text = (
        "".join(p.text for p in log.parts if isinstance(p, TextPart)) if isinstance(log, UserMessage) else ""
    )
    ids = re.findall(r'<message id="([^"]+)"', text)
    covered = f"{ids[0]}..{ids[-1]}" if ids else "nothing"
    return response(text=f"summary of {covered} ({len(ids)} messages)")


def share(replica: str, replicas: Sequence[str]) -> int:
    """How many partitions ``replica`` holds once the group has settled (PartitionLeases.desired)."""
    index = sorted(replicas).index(replica)
    return sum(1 for p in range(PARTITIONS) if p % len(replicas) == index)


class World:
    def __init__(
        self,
        bus: Bus,
        nats_url: str,
        clock: ManualClock,
        config: LarkbotConfig,
        chat_id: str,
        database_pool: PoolLimits | None = None,
    ):
        self.bus = bus
        self.nats_url = nats_url
        self.clock = clock
        self.config = config
        self.chat_id = chat_id
        self.t0 = clock.now_ms()
        self.pipeline = FakePipeline(bus, PLATFORM, chat_id)
        self.platform = FakePlatform(bus, PLATFORM, self.pipeline, clock.now_ms)
        self.media = FakeMedia(bus)
        self.llm = FakeLLM(bus, self._answer)
        self.answers: dict[tuple[str, str], collections.deque[Answer]] = collections.defaultdict(
            collections.deque
        )
        self.replicas: dict[str, tuple[Driver, AsyncExitStack]] = {}
        self.watches: dict[str, DriverWatch] = {}
        #: Each running replica's service context (``stopping`` is set when a background task crashed).
        self.contexts: dict[str, ServiceContext] = {}
        self.database_pool = database_pool

    # -- the scripted model ---------------------------------------------------------------------------
    def queue(self, purpose: str, chat_id: str | None = None) -> collections.deque[Answer]:
        """Answers to the next requests of ``purpose`` (probe / primary) for a chat."""
        return self.answers[(chat_id or self.chat_id, purpose)]

    @property
    def probe_answers(self) -> collections.deque[Answer]:
        return self.queue("probe")

    @property
    def primary_answers(self) -> collections.deque[Answer]:
        return self.queue("primary")

    async def _answer(self, request: LLMRequest) -> LLMReply:
        chat_id = (request.chat_key or "").partition(":")[2]
        queue = self.queue(request.purpose, chat_id)
        default = (
            decide("no_action", "nothing to add")
            if request.purpose == "probe"
            else summarize(request)
            if request.purpose == "compaction"
            else end_turn()
        )
        answer = queue.popleft() if queue else default
        if callable(answer):
            return await answer(request)
        return answer.model_copy(update={"request_id": request.request_id})

    def requests(self, purpose: str, chat_id: str | None = None) -> list[LLMRequest]:
        key = f"{PLATFORM.value}:{chat_id or self.chat_id}"
        return [r for r in self.llm.by_purpose(purpose) if r.chat_key == key]

    # -- replicas -------------------------------------------------------------------------------------
    async def start_replica(self, name: str) -> Driver:
        watch = DriverWatch()
        options = DriverOptions(
            clock=self.clock,
            replica=name,
            lease_heartbeat_s=HEARTBEAT_S,
            fetch_timeout_s=FETCH_TIMEOUT_S,
            memory_maintenance=False,
            observer=watch,
            database_pool=self.database_pool,
        )
        recipe = DriverService(self.config, options)
        stack = AsyncExitStack()
        service = await stack.enter_async_context(
            built(Service.DRIVER, recipe, self.config, nats_url=self.nats_url)
        )
        driver = service.components
        self.replicas[name] = (driver, stack)
        self.watches[name] = watch
        self.contexts[name] = service.ctx
        return driver

    async def stop_replica(self, name: str) -> None:
        """A clean leave (SIGTERM): the replica hands its partitions back."""
        _driver, stack = self.replicas.pop(name)
        del self.contexts[name]
        await stack.aclose()
        del self.watches[name]

    def watch(self, replica: str | None = None) -> DriverWatch:
        """What a replica (default: the first running) reported."""
        return self.watches[replica or next(iter(self.replicas))]

    async def balanced(self) -> None:
        """Wait until every running replica holds its share of the partitions, chats taken over."""
        names = list(self.replicas)
        for name in names:
            watch, expected = self.watches[name], share(name, names)
            await watch.until(lambda w=watch, n=expected: w.holds(n))  # type: ignore[misc]

    async def applied(self, chat_id: str, seq: int, *, replica: str | None = None) -> ChatState:
        """Wait until ``replica`` (default: the first running) drives the chat and its copy of the context
        has reached ``seq``."""
        name = replica or next(iter(self.replicas))
        driver = self.replicas[name][0]
        key = f"{PLATFORM.value}:{chat_id}"

        def reached() -> bool:
            state = driver.chats.get(key)
            return state is not None and state.context.seq >= seq

        await self.watches[name].until(reached)
        return driver.chats[key]

    @property
    def driver(self) -> Driver:
        return next(iter(self.replicas.values()))[0]

    def owner(self, chat_id: str | None = None) -> Driver:
        return self.replicas[self._owner(chat_id)][0]

    def _owner(self, chat_id: str | None) -> str:
        key = f"{PLATFORM.value}:{chat_id or self.chat_id}"
        holders = [name for name, (d, _) in self.replicas.items() if key in d.chats]
        assert len(holders) == 1, f"{key} is held by {len(holders)} replicas"
        return holders[0]

    @property
    def chat(self) -> ChatState:
        return self.owner().chats[f"{PLATFORM.value}:{self.chat_id}"]

    # -- input and time -------------------------------------------------------------------------------
    async def say(self, n: int, at: int, *, chat_id: str | None = None, **flags: Any) -> ChatState:
        """Message ``n`` from a member (``sender``/``name`` in ``flags``) received at ``t0 + at``."""
        chat = chat_id or self.chat_id
        seq = await self.pipeline.append(segment(n, at_ms=self.t0 + at, **flags), chat_id=chat)
        return await self.applied(chat, seq, replica=self._owner(chat))

    async def typing(self, user_id: str, at: int) -> None:
        signal = TypingSignal(platform=PLATFORM, chat_id=self.chat_id, user_id=user_id, at_ms=self.t0 + at)
        chat = self.chat
        await self.bus.publish_core(typing_subject(PLATFORM.value, self.chat_id), signal)
        await self.watch(self._owner(None)).until(lambda: chat.schedule.last_typing_ms == signal.at_ms)

    async def quiet_then_asked(
        self,
        *,
        quiet_reason: str = "small talk",
        reason: str = "asked the bot",
        answer: LLMReply | None = None,
        asked: str = "@Lark are you there?",
        **first: Any,
    ) -> None:
        """Two wake-ups: "hello all" (``first`` overrides the message's flags) left alone with
        ``quiet_reason``; then ``asked`` mentioning the bot, answered with ``answer`` (default: one
        ``send_message``). Returns once both are done and the chat is in sync."""
        self.probe_answers.append(decide("no_action", quiet_reason))
        await self.say(1, 0, **{"text": "hello all", **first})
        await self.tick(1000)
        self.probe_answers.append(decide("send_message", reason))
        self.primary_answers.append(answer or response(tool_call(tools.SEND, "c0", text="hi!")))
        await self.say(2, 2000, text=asked, mentions_me=True)
        await self.tick(3000)
        await self.synced()

    async def synced(self, chat_id: str | None = None) -> ChatState:
        """Wait until the chat's owner holds everything the pipeline published (e.g. the bot's sends)."""
        chat = chat_id or self.chat_id
        return await self.applied(chat, self.pipeline.log(chat).seq, replica=self._owner(chat))

    async def tick(self, to: int) -> None:
        """Move the clock to ``t0 + to`` and wait until every chat of every replica has settled."""
        self.clock.advance(self.t0 + to - self.clock.now_ms())
        for name, (driver, _stack) in list(self.replicas.items()):
            watch = self.watches[name]
            for state in list(driver.chats.values()):
                await watch.settled(state)
                # A compaction started by the wake-up runs beside it; wait for it, and for what its
                # new context wakes.
                while (task := state.compaction.task) is not None and not task.done():
                    await asyncio.wait_for(asyncio.shield(task), 60)
                    await watch.settled(state)


@asynccontextmanager
async def world(
    bus: Bus,
    nats_url: str,
    database_url: str,
    *,
    chats: Sequence[str] = (CHAT_ID,),
    replicas: Sequence[str] = ("a",),
    llm: dict[str, Any] | None = None,
    fake_llm: bool = True,
    memory: dict[str, Any] | None = None,
    maintainers: Sequence[str] = (),
    shell: dict[str, Any] | None = None,
    audit: dict[str, Any] | None = None,
    reminder_delivery: dict[str, Any] | None = None,
    deployment_dry_run: bool = False,
    database_pool: PoolLimits | None = None,
    **chat: Any,
) -> AsyncIterator[World]:
    """``llm``: the configuration's ``llm`` section (endpoints with their windows); ``fake_llm=False``
    leaves ``llm.generate`` to a real gateway the caller runs; ``memory``: the configuration's ``memory``
    section; ``maintainers``: the configuration's maintainer ids; ``shell``: the configuration's ``shell``
    section; ``audit``: the configuration's ``audit`` section; ``reminder_delivery``: the top-level
    ``reminders`` section; ``deployment_dry_run``: the top-level ``dry_run``; ``database_pool``: the
    replicas' connection pool (default: the runtime's); ``chat``: settings of every chat."""
    config = LarkbotConfig.model_validate(
        {
            "services": {"driver": {"database_url": database_url, "http_host": "127.0.0.1"}},
            "utc_offset_min": 480,
            "llm": llm or {},
            "memory": memory or {},
            "maintainers": list(maintainers),
            "shell": shell or {},
            "audit": audit or {},
            "reminders": reminder_delivery or {},
            "dry_run": deployment_dry_run,
            "chats": {
                "default": {"display_name": "Lark", **chat},
                **{f"{PLATFORM.value}:{chat_id}": {} for chat_id in chats},
            },
        }
    )
    w = World(bus, nats_url, ManualClock(1_800_000_000_000), config, chats[0], database_pool)
    endpoints: list[Endpoint[Any]] = [w.platform.endpoint, w.media.endpoint]
    if fake_llm:
        endpoints.append(w.llm.endpoint)
    await w.pipeline.start()
    for endpoint in endpoints:
        await endpoint.start()
    try:
        for name in replicas:
            await w.start_replica(name)
        await w.balanced()
        yield w
    finally:
        for name in list(w.replicas):
            await w.stop_replica(name)
        if w.platform.typing_gate is not None:
            w.platform.typing_gate.set()
        for endpoint in endpoints:
            await endpoint.stop()
        await w.pipeline.stop()
