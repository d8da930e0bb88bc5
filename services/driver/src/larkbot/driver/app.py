"""Composition root of the driver: follow every configured chat's rendered context and typing, schedule
wake-ups per chat, and run them (probe → primary turn) against the LLM gateway and the ingress.

Consumes ``CONTEXT`` through the durable ``driver`` consumer (in order; a gap asks ``pipeline.snapshot``)
and core ``typing.>``. Owns the ``driver_*`` tables. One replica owns every chat (see docs/driver.md for
partitioning).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nats.aio.msg import Msg

from larkbot.canonical.codec import decode
from larkbot.canonical.context import ContextUpdate
from larkbot.canonical.errors import ConfigError, ContractError
from larkbot.canonical.events import TypingSignal
from larkbot.canonical.names import CONSUMER_DRIVER, STREAM_CONTEXT, Service
from larkbot.runtime.config import LarkbotConfig
from larkbot.runtime.consume import Delivery, PullConsumer
from larkbot.runtime.db import create_engine, migrate
from larkbot.runtime.http import Check
from larkbot.runtime.logs import log_context
from larkbot.runtime.service import ServiceContext, run

from . import metrics
from .adapters.chatstate import ChatState, Persona
from .adapters.clients import BusClients
from .adapters.clock import Clock, SystemClock
from .adapters.repository import DriverRepository
from .adapters.runner import WakeRunner
from .core.context import Gap, apply_update, from_snapshot, is_stale

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).parent / "migrations"
DEFAULT_NAME = "LarkBot"


def _read_personas(config: LarkbotConfig) -> dict[str, str]:
    """Persona files of every chat, read once at start-up: a missing file is a configuration error."""
    texts: dict[str, str] = {}
    for key, chat in config.chats.items():
        for index, path in enumerate(chat.persona_files):
            if path in texts:
                continue
            try:
                texts[path] = Path(path).read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigError(
                    f"chats.{key}.persona_files.{index}", f"cannot read the file ({type(exc).__name__})"
                ) from None
    return texts


class DriverService:
    def __init__(self, config: LarkbotConfig, *, clock: Clock | None = None) -> None:
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self.personas = _read_personas(config)
        offset = config.utc_offset_min
        self.utc_offset_min = offset if offset is not None else time.localtime().tm_gmtoff // 60
        self.chats: dict[str, ChatState] = {}
        self.consumer: PullConsumer | None = None
        self.repo: DriverRepository | None = None
        self.clients: BusClients | None = None
        self.runner: WakeRunner | None = None
        self._ctx: ServiceContext | None = None
        self._loops: list[asyncio.Task[Any]] = []
        self._applied = asyncio.Condition()

    async def start(self, ctx: ServiceContext) -> None:
        self._ctx = ctx
        engine = create_engine(ctx.database_url())
        ctx.stack.push_async_callback(engine.dispose)
        await migrate(engine, MIGRATIONS)
        self.repo = DriverRepository(engine)
        self.clients = BusClients(ctx.bus)
        self.runner = WakeRunner(self.clients, self.repo, self.clock, self.config.llm, self.utc_offset_min)
        self.consumer = PullConsumer(ctx.bus.js, STREAM_CONTEXT, CONSUMER_DRIVER, self.on_context)
        ctx.spawn(self.consumer.run(), "consume-context")
        sub = await ctx.bus.nc.subscribe("typing.>", cb=self.on_typing)
        ctx.stack.push_async_callback(sub.unsubscribe)
        ctx.add_check("database", self._database_ready)

    async def chat(self, platform: str, chat_id: str) -> ChatState | None:
        """The chat's state, created (and its loop started) on first sight; ``None`` if not configured."""
        key = f"{platform}:{chat_id}"
        found = self.chats.get(key)
        if found is not None:
            return found
        settings = self.config.chat(platform, chat_id)
        if settings is None:
            return None
        assert self.repo is not None
        assert self.runner is not None
        name = settings.display_name
        if name is None and self.clients is not None:
            identity = await self.clients.identity(platform)
            name = identity.name if identity else None
        persona = Persona(name or DEFAULT_NAME, tuple(self.personas[p] for p in settings.persona_files))
        state = ChatState(platform, chat_id, settings, persona, self.clock)
        latest = await self.repo.latest_turn(platform, chat_id)
        state.load(await self.repo.marks(platform, chat_id), latest is not None and latest.requires_follow_up)
        self.chats[key] = state
        metrics.CHATS.set(len(self.chats))
        assert self._ctx is not None
        # Spawned: a loop that dies outside a wake-up (its own guard) stops the service loudly.
        self._loops.append(self._ctx.spawn(state.loop(self.runner.run, self.repo), f"chat-{key}"))
        return state

    async def on_context(self, delivery: Delivery) -> None:
        update = decode(delivery.data, ContextUpdate, delivery.headers)
        platform = update.platform.value
        with log_context(chat=f"{platform}:{update.chat_id}"):
            state = await self.chat(platform, update.chat_id)
            if state is None:
                metrics.CONTEXT_UPDATES.labels("unconfigured").inc()
                return
            if is_stale(state.context, update):
                metrics.CONTEXT_UPDATES.labels("stale").inc()
                return
            try:
                context = apply_update(state.context, update)
                metrics.CONTEXT_UPDATES.labels("applied").inc()
            except Gap as gap:
                assert self.clients is not None
                log.info("context gap (%s); fetching a snapshot", gap)
                context = from_snapshot(await self.clients.snapshot(platform, update.chat_id))
                metrics.CONTEXT_UPDATES.labels("gap").inc()
            state.set_context(context)
        async with self._applied:
            self._applied.notify_all()

    async def on_typing(self, msg: Msg) -> None:
        try:
            signal = decode(msg.data, TypingSignal, dict(msg.headers or {}))
        except ContractError as exc:
            metrics.TYPING_SIGNALS.labels("invalid").inc()
            log.warning("ignored typing signal: %s", exc)
            return
        state = self.chats.get(f"{signal.platform.value}:{signal.chat_id}")
        if state is None:
            metrics.TYPING_SIGNALS.labels("unknown_chat").inc()
            return
        state.typing(signal.at_ms)
        metrics.TYPING_SIGNALS.labels("ok").inc()
        async with self._applied:
            self._applied.notify_all()

    async def until(self, predicate: Callable[[], bool], timeout_s: float = 30.0) -> None:
        """Wait until ``predicate`` holds, re-checked after every context update and typing signal (tests,
        the benchmark, the playground)."""
        async with self._applied:
            await asyncio.wait_for(self._applied.wait_for(predicate), timeout_s)

    async def applied(self, platform: str, chat_id: str, seq: int, timeout_s: float = 30.0) -> ChatState:
        """Wait until the chat's context has reached ``seq``."""
        key = f"{platform}:{chat_id}"

        def reached() -> bool:
            state = self.chats.get(key)
            return state is not None and state.context.seq >= seq

        await self.until(reached, timeout_s)
        return self.chats[key]

    async def _database_ready(self) -> Check:
        assert self.repo is not None
        await self.repo.ping()
        return Check(True, self.repo.engine.dialect.name)

    async def stop(self) -> None:
        if self.consumer is not None:
            self.consumer.stop()
        for state in self.chats.values():
            state.stop()
        if self._loops:
            # A running wake-up is finished, never preempted; serve() bounds the wait.
            await asyncio.wait(self._loops)


def main() -> int:
    return run(Service.DRIVER, DriverService)
