"""Composition root of the driver: hold a share of the context partitions, follow the rendered context and
typing of their configured chats, schedule wake-ups per chat, and run them (probe → primary turn) against
the LLM gateway and the ingress.

Partitions are leased in the ``leases`` bucket (group ``driver``, :mod:`larkbot.runtime.partitions`); each
held partition is consumed through its own durable consumer ``driver-pNN`` (see
:mod:`.wake.ownership`). Typing arrives on core ``typing.>`` at every replica; only the holder of the
chat uses it. Owns the ``driver_*`` tables, shared by all replicas.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from pathlib import Path
from typing import Any

from nats.aio.msg import Msg

from larkbot.canonical.codec import decode
from larkbot.canonical.errors import ConfigError, ContractError
from larkbot.canonical.events import RuntimeEvent, TypingSignal
from larkbot.canonical.fingerprint import event_msg_id
from larkbot.canonical.names import KV_LEASES, PARTITIONS, Service, events_subject
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import LarkbotConfig
from larkbot.runtime.db import create_engine, migrate
from larkbot.runtime.http import Check
from larkbot.runtime.partitions import PartitionLeases
from larkbot.runtime.process import deployment_offset_min, replica_id
from larkbot.runtime.retry import RetryPolicy
from larkbot.runtime.service import ServiceContext, data_dir, run

from . import metrics
from .audit.audit import AuditStore
from .audit.requestlog import RequestStore
from .memory.consolidator import Consolidator
from .memory.memories import MemoryStore
from .observer import UNOBSERVED, DriverObserver
from .shell.shell import ShellTasks, check_settings, shell_dirs
from .shell.task_store import TaskStore
from .wake.chatstate import ChatState
from .wake.clients import BusClients
from .wake.clock import Clock, SystemClock
from .wake.ownership import DEFAULT_NAME, ChatHost
from .wake.repository import DriverRepository
from .wake.runner import WakeRunner

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).parent / "migrations"
AUDIT_SWEEP_INTERVAL_S = 3600.0
LEASE_GROUP = "driver"
#: Lease heartbeat; the ``leases`` bucket's TTL (15 s) must exceed it plus the longest step in progress at
#: a release, which the heartbeat round waits for.
LEASE_HEARTBEAT_S = 3.0


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


def warn_unreachable_shell(config: LarkbotConfig) -> list[str]:
    """Log a warning for each chat with shell tools on and no maintainer configured (the gate can never
    open there); returns those chat keys."""
    if config.maintainers:
        return []
    keys = [key for key, chat in config.chats.items() if key != "default" and chat.shell_enabled]
    for key in keys:
        log.warning(
            "chats.%s.shell_enabled is on but no maintainers are configured: no shell tools there", key
        )
    return keys


class DriverService:
    def __init__(
        self,
        config: LarkbotConfig,
        *,
        clock: Clock | None = None,
        replica: str | None = None,
        lease_heartbeat_s: float = LEASE_HEARTBEAT_S,
        fetch_timeout_s: float = 1.0,
        memory_maintenance: bool = True,
        hostname: str | None = None,
        observer: DriverObserver = UNOBSERVED,
    ) -> None:
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self.personas = _read_personas(config)
        warn_unreachable_shell(config)
        self.utc_offset_min = deployment_offset_min(config.utc_offset_min)
        self.replica = replica or replica_id()
        self.lease_heartbeat_s = lease_heartbeat_s
        #: How long an idle partition consumer's fetch waits; a stopping consumer ends within it.
        self.fetch_timeout_s = fetch_timeout_s
        #: Run the scheduled memory maintenance loop (off: passes run only when called,
        #: ``consolidator.maintain()``).
        self.memory_maintenance = memory_maintenance
        #: Told of partition, context, typing and chat-loop changes (``larkbot.driver.observer``).
        self.observer = observer
        self.repo: DriverRepository | None = None
        self.clients: BusClients | None = None
        self.runner: WakeRunner | None = None
        self.memories: MemoryStore | None = None
        self.audit: AuditStore | None = None
        self.requests: RequestStore | None = None
        self.consolidator: Consolidator | None = None
        self.host: ChatHost | None = None
        self.leases: PartitionLeases | None = None
        self._leases_task: asyncio.Task[Any] | None = None
        check_settings(config, os.environ)
        #: Shell tasks belong to the host that runs them.
        self.hostname = hostname or socket.gethostname()
        self.shell_dirs = shell_dirs(config.shell, data_dir(config))
        self.shell: ShellTasks | None = None
        self._bus: Bus | None = None

    @property
    def chats(self) -> dict[str, ChatState]:
        """The chats this replica drives now."""
        return self.host.held if self.host is not None else {}

    async def start(self, ctx: ServiceContext) -> None:
        engine = create_engine(ctx.database_url())
        ctx.stack.push_async_callback(engine.dispose)
        await migrate(engine, MIGRATIONS)
        self.repo = DriverRepository(engine)
        self.clients = BusClients(
            ctx.bus, clock=self.clock, reask=RetryPolicy.of(self.config.retry.action_reask)
        )
        self.memories = MemoryStore(engine)
        self.audit = AuditStore(engine)
        self.requests = RequestStore(engine)
        self._bus = ctx.bus
        working_dir, output_dir = self.shell_dirs
        self.shell = ShellTasks(
            TaskStore(engine),
            self.config.shell,
            self.clock,
            host=self.hostname,
            working_dir=working_dir,
            output_dir=output_dir,
            environ=os.environ,
            publish=self._publish_event,
            utc_offset_min=self._utc_offset_of,
        )
        self.runner = WakeRunner(
            self.clients,
            self.repo,
            self.clock,
            self.config.llm,
            self.utc_offset_min,
            memories=self.memories,
            memory=self.config.memory,
            maintainers=frozenset(self.config.maintainers),
            shell=self.shell,
            audit=self.audit,
            audit_settings=self.config.audit,
            requests=self.requests,
            dry_run=self.config.dry_run,
        )
        self.host = ChatHost(
            self.config,
            js=ctx.bus.js,
            repo=self.repo,
            clients=self.clients,
            runner=self.runner,
            clock=self.clock,
            personas=self.personas,
            spawn=ctx.spawn,
            observer=self.observer,
            fetch_timeout_s=self.fetch_timeout_s,
        )
        self.leases = PartitionLeases(
            await ctx.bus.js.key_value(KV_LEASES),
            LEASE_GROUP,
            self.replica,
            PARTITIONS,
            on_acquire=self.host.acquire,
            on_release=self.host.release,
            heartbeat_s=self.lease_heartbeat_s,
        )
        sub = await ctx.bus.nc.subscribe("typing.>", cb=self.on_typing)
        ctx.stack.push_async_callback(sub.unsubscribe)
        self._leases_task = ctx.spawn(self.leases.run(), "partition-leases")
        self.consolidator = Consolidator(
            self.memories,
            self.clients,
            self.clock,
            self.runner.sizing,
            self.config.memory,
            name_of=self._persona_name,
            is_leader=self._leads_maintenance,
        )
        if self.memory_maintenance:
            ctx.spawn(self.consolidator.run(ctx.stopping), "memory-maintenance")
        if any(chat.shell_enabled for chat in self.config.chats.values()):
            # Also resumes watching the tasks a previous process of this host left running.
            self.shell.prepare()
            ctx.spawn(self.shell.run(ctx.stopping), "shell-tasks")
        if self.config.audit.enabled:
            ctx.spawn(self._sweep_audit(ctx.stopping), "audit-retention")
        ctx.add_check("database", self._database_ready)
        ctx.add_check("partitions", self._partitions_ready)
        log.info("driver replica %s started", self.replica)

    async def _sweep_audit(self, stopping: asyncio.Event) -> None:
        # Every replica sweeps: deleting what is past retention is idempotent, and hourly is well
        # within a retention counted in days. Ends with the service (a stop never waits for it).
        assert self.audit is not None
        assert self.requests is not None
        retention_days = self.config.audit.retention_days
        while not stopping.is_set():
            now = self.clock.now_ms()
            removed = await self.audit.sweep(now, retention_days)
            if removed:
                log.info("audit trail: removed %d records past retention", removed)
            swept = await self.requests.sweep(now, retention_days)
            if swept.requests or swept.blocks or swept.sent:
                log.info(
                    "request log: removed %d requests, %d blocks, %d sent ids past retention",
                    swept.requests,
                    swept.blocks,
                    swept.sent,
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), AUDIT_SWEEP_INTERVAL_S)

    async def _publish_event(self, event: RuntimeEvent) -> None:
        assert self._bus is not None
        subject = events_subject(event.platform.value, event.chat_id)
        await self._bus.publish(subject, event, msg_id=event_msg_id(event))

    def _utc_offset_of(self, platform: str, chat_id: str) -> int:
        settings = self.config.chat(platform, chat_id)
        configured = settings.utc_offset_min if settings is not None else None
        return configured if configured is not None else self.utc_offset_min

    def _leads_maintenance(self) -> bool:
        # One replica maintains memories: the holder of partition 0 (leases move it on failure).
        return self.leases is not None and 0 in self.leases.owned

    def _persona_name(self, platform: str, chat_id: str) -> str:
        held = self.chats.get(f"{platform}:{chat_id}")
        if held is not None:
            return held.persona.name
        settings = self.config.chat(platform, chat_id)
        return (settings.display_name if settings is not None else None) or DEFAULT_NAME

    async def on_typing(self, msg: Msg) -> None:
        try:
            signal = decode(msg.data, TypingSignal, dict(msg.headers or {}))
        except ContractError as exc:
            metrics.TYPING_SIGNALS.labels("invalid").inc()
            log.warning("ignored typing signal: %s", exc)
            return
        state = self.chats.get(f"{signal.platform.value}:{signal.chat_id}")
        if state is None:
            metrics.TYPING_SIGNALS.labels("not_held").inc()
            return
        state.typing(signal.at_ms)
        metrics.TYPING_SIGNALS.labels("ok").inc()
        self.observer.typing_applied(state)

    async def _database_ready(self) -> Check:
        assert self.repo is not None
        await self.repo.ping()
        return Check(True, self.repo.engine.dialect.name)

    async def _partitions_ready(self) -> Check:
        leases, host = self.leases, self.host
        if leases is None or host is None:
            return Check(False, "starting")
        settled = leases.settled.is_set() and host.ready
        detail = f"{len(host.partitions)} partitions, {len(host.held)} chats"
        return Check(settled, detail if settled else f"taking over: {detail}")

    async def stop(self) -> None:
        if self.host is not None:
            self.host.stop_all()
        if self.leases is not None and self._leases_task is not None:
            self.leases.stop()
            # Releasing waits for each chat's step in progress; serve() bounds the wait.
            await asyncio.wait({self._leases_task})
        if self.runner is not None:
            await self.runner.close()


def main() -> int:
    return run(Service.DRIVER, DriverService)
