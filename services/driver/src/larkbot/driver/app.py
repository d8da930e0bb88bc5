"""Composition root of the driver: hold a share of the context partitions, follow the rendered context and
typing of their configured chats, schedule wake-ups per chat, and run them (probe → primary turn) against
the LLM gateway and the ingress.

Partitions are leased in the ``leases`` bucket (group ``driver``, :mod:`larkbot.runtime.partitions`); each
held partition is consumed through its own durable consumer ``driver-pNN`` (see
:mod:`.wake.ownership`). Typing arrives on core ``typing.>`` at every replica (a
``runtime.subscribe.Subscription``); only the holder of the chat uses it. Owns the ``driver_*`` tables,
shared by all replicas, and the ``rate-limits`` bucket (:mod:`.ratelimit.limiter`).

:class:`DriverService` is the recipe (``runtime.service.Buildable``): the configuration and the replica's
:class:`DriverOptions`; its ``build(ctx)`` wires one frozen :class:`Driver` whose ``stop()`` hands the
partitions back. Tests run it with ``runtime.service.built``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from larkbot.canonical.errors import ConfigError, RetryableError
from larkbot.canonical.events import RuntimeEvent, TypingSignal
from larkbot.canonical.fingerprint import event_msg_id
from larkbot.canonical.names import KV_LEASES, PARTITIONS, Service, events_subject
from larkbot.runtime import periodic
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import LarkbotConfig
from larkbot.runtime.db import DatabaseUnavailable, PoolLimits, create_engine, migrate
from larkbot.runtime.http import Check
from larkbot.runtime.partitions import PartitionLeases
from larkbot.runtime.process import deployment_offset_min, replica_id
from larkbot.runtime.retry import Backoff, RetryPolicy
from larkbot.runtime.serve import model_decoder
from larkbot.runtime.service import ServiceContext, run
from larkbot.runtime.subscribe import Subscription

from . import metrics
from .audit.audit import AuditStore
from .audit.requestlog import RequestStore
from .memory.consolidator import Consolidator
from .memory.memories import MemoryStore
from .observer import UNOBSERVED, DriverObserver
from .ratelimit.limiter import KvWindows, RateLimiter
from .reminders.reminders import ReminderDelivery
from .reminders.store import ReminderStore
from .shell.shell import ShellTasks, check_settings, shell_dirs
from .shell.task_store import TaskStore
from .wake.chatstate import ChatState
from .wake.clients import BusClients
from .wake.clock import Clock, SystemClock
from .wake.ownership import DEFAULT_NAME, ChatHost
from .wake.repository import DriverRepository
from .wake.runner import WakePolicy, WakeRunner, WakeStores

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).parent / "migrations"
AUDIT_SWEEP_INTERVAL_S = 3600.0
#: Singleton work, each led by one replica through its lease (``driver.singleton.<name>`` in ``leases``).
MEMORY_MAINTENANCE = "memory-maintenance"
AUDIT_RETENTION = "audit-retention"
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


@dataclass(frozen=True, slots=True)
class DriverOptions:
    """Replica settings that are not configuration (tests and benchmarks change them)."""

    clock: Clock = field(default_factory=SystemClock)
    #: This replica's name in the lease group (unique per process in production).
    replica: str = field(default_factory=replica_id)
    lease_heartbeat_s: float = LEASE_HEARTBEAT_S
    #: How long an idle partition consumer's fetch waits; a stopping consumer ends within it.
    fetch_timeout_s: float = 1.0
    #: Run the scheduled memory maintenance loop (off: passes run only when called,
    #: ``consolidator.maintain()``).
    memory_maintenance: bool = True
    #: Shell tasks belong to the host that runs them.
    hostname: str = field(default_factory=socket.gethostname)
    #: Told of partition, context, typing and chat-loop changes (``larkbot.driver.observer``).
    observer: DriverObserver = UNOBSERVED
    #: The database's connection pool (``None``: the runtime's default for the database).
    database_pool: PoolLimits | None = None


@dataclass(frozen=True, slots=True)
class Driver:
    """A running driver replica: everything :meth:`DriverService.build` wired, fixed once built."""

    config: LarkbotConfig
    replica: str
    repo: DriverRepository
    clients: BusClients
    runner: WakeRunner
    memories: MemoryStore
    audit: AuditStore
    requests: RequestStore
    shell: ShellTasks
    consolidator: Consolidator
    host: ChatHost
    leases: PartitionLeases
    leasing: asyncio.Task[Any]
    typing: Subscription[TypingSignal]

    @property
    def chats(self) -> dict[str, ChatState]:
        """The chats this replica drives now."""
        return self.host.held

    async def database_ready(self) -> Check:
        await self.repo.ping()
        return Check(True, self.repo.engine.dialect.name)

    async def partitions_ready(self) -> Check:
        settled = self.leases.settled.is_set() and self.host.ready
        detail = f"{len(self.host.partitions)} partitions, {len(self.host.held)} chats"
        if settled:
            return Check(True, detail)
        failing = self.leases.failing_detail()
        return Check(False, f"taking over: {detail}" + (f"; {failing}" if failing else ""))

    async def stop(self) -> None:
        await self.typing.stop()
        self.host.stop_all()
        self.leases.stop()
        # Releasing waits for each chat's step in progress; serve() bounds the wait.
        await asyncio.wait({self.leasing})
        await self.runner.close()


@dataclass(frozen=True, slots=True)
class DriverService:
    """The driver's recipe: the configuration, checked against the environment and with the persona
    files read at construction (a problem exits with status 2 before the bus is touched), and the
    replica's options; :meth:`build` wires a :class:`Driver` once the bus is up."""

    config: LarkbotConfig
    options: DriverOptions = field(default_factory=DriverOptions)
    personas: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        check_settings(self.config, os.environ)
        # The one derived field of a frozen recipe, set once here.
        object.__setattr__(self, "personas", _read_personas(self.config))
        warn_unreachable_shell(self.config)

    async def build(self, ctx: ServiceContext) -> Driver:
        config, options = self.config, self.options
        utc_offset_min = deployment_offset_min(config.utc_offset_min)
        engine = create_engine(ctx.database_url(), pool=options.database_pool)
        ctx.stack.push_async_callback(engine.dispose)
        await migrate(engine, MIGRATIONS)
        repo = DriverRepository(engine)
        clients = BusClients(ctx.bus, clock=options.clock, reask=RetryPolicy.of(config.retry.action_reask))
        memories = MemoryStore(engine)
        audit = AuditStore(engine)
        requests = RequestStore(engine)
        reminders = ReminderStore(engine)
        working_dir, output_dir = shell_dirs(config.shell, ctx.data_dir)
        shell = ShellTasks(
            TaskStore(engine),
            config.shell,
            options.clock,
            host=options.hostname,
            working_dir=working_dir,
            output_dir=output_dir,
            environ=os.environ,
            publish=partial(_publish_event, ctx.bus),
            utc_offset_min=partial(_utc_offset_of, config, utc_offset_min),
        )
        runner = WakeRunner(
            clients,
            repo,
            options.clock,
            WakeStores(
                memories=memories,
                shell=shell,
                audit=audit,
                requests=requests,
                rates=RateLimiter(await KvWindows.open(ctx.bus.js)),
                reminders=reminders,
            ),
            WakePolicy(
                llm=config.llm,
                memory=config.memory,
                audit=config.audit,
                maintainers=frozenset(config.maintainers),
                utc_offset_min=utc_offset_min,
                dry_run=config.dry_run,
            ),
        )
        host = ChatHost(
            config,
            js=ctx.bus.js,
            repo=repo,
            clients=clients,
            runner=runner,
            clock=options.clock,
            personas=self.personas,
            spawn=ctx.spawn,
            observer=options.observer,
            fetch_timeout_s=options.fetch_timeout_s,
        )
        leases = PartitionLeases(
            await ctx.bus.js.key_value(KV_LEASES),
            LEASE_GROUP,
            options.replica,
            PARTITIONS,
            on_acquire=host.acquire,
            on_release=host.release,
            heartbeat_s=options.lease_heartbeat_s,
            backoff=Backoff.of(config.retry.background),
        )
        typing = Subscription(
            ctx.bus, "typing.>", model_decoder(TypingSignal), partial(_on_typing, host, options.observer)
        )
        await typing.start()
        leasing = ctx.spawn(leases.run(), "partition-leases")
        consolidator = Consolidator(
            memories,
            clients,
            options.clock,
            runner.sizing,
            config.memory,
            name_of=partial(_persona_name, config, host),
        )
        if options.memory_maintenance:
            # One replica maintains memories: the holder of the singleton lease.
            maintain = partial(consolidator.run, ctx.stopping)
            await ctx.lead(MEMORY_MAINTENANCE, maintain, replica=options.replica)
        if any(chat.shell_enabled for chat in config.chats.values()):
            # Also resumes watching the tasks a previous process of this host left running.
            shell.prepare()
            watched = (RetryableError, OSError)  # the database or the file system away: next round
            ctx.every(config.shell.poll_interval_s, shell.watch_once, "shell-tasks", tolerate=watched)
        if any(chat.reminders.enabled for chat in config.chats.values()):
            # Every replica delivers the reminders of the chats it holds (reminders.reminders).
            delivery = ReminderDelivery(
                reminders,
                config.reminders,
                options.clock,
                held=lambda: host.held,
                publish=partial(_publish_event, ctx.bus),
                utc_offset_min=partial(_utc_offset_of, config, utc_offset_min),
            )
            ctx.every(
                config.reminders.poll_interval_s, delivery.round, "reminders", tolerate=(RetryableError,)
            )
        if config.audit.enabled:
            # One replica sweeps, hourly: well within a retention counted in days.
            sweep = partial(_sweep_audit, audit, requests, options.clock, config.audit.retention_days)
            swept = partial(
                periodic.every,
                AUDIT_SWEEP_INTERVAL_S,
                sweep,
                ctx.stopping,
                name=AUDIT_RETENTION,
                tolerate=(DatabaseUnavailable,),  # the database busy: the next round sweeps
            )
            await ctx.lead(AUDIT_RETENTION, swept, replica=options.replica)
        driver = Driver(
            config=config,
            replica=options.replica,
            repo=repo,
            clients=clients,
            runner=runner,
            memories=memories,
            audit=audit,
            requests=requests,
            shell=shell,
            consolidator=consolidator,
            host=host,
            leases=leases,
            leasing=leasing,
            typing=typing,
        )
        ctx.add_check("database", driver.database_ready)
        ctx.add_check("partitions", driver.partitions_ready)
        log.info("driver replica %s started", options.replica)
        return driver


async def _sweep_audit(
    audit: AuditStore, requests: RequestStore, clock: Clock, retention_days: float
) -> None:
    now = clock.now_ms()
    removed = await audit.sweep(now, retention_days)
    if removed:
        log.info("audit trail: removed %d records past retention", removed)
    swept = await requests.sweep(now, retention_days)
    if swept.requests or swept.blocks or swept.sent:
        log.info(
            "request log: removed %d requests, %d blocks, %d sent ids past retention",
            swept.requests,
            swept.blocks,
            swept.sent,
        )


async def _publish_event(bus: Bus, event: RuntimeEvent) -> None:
    subject = events_subject(event.platform.value, event.chat_id)
    await bus.publish(subject, event, msg_id=event_msg_id(event))


def _utc_offset_of(config: LarkbotConfig, deployment_min: int, platform: str, chat_id: str) -> int:
    settings = config.chat(platform, chat_id)
    configured = settings.utc_offset_min if settings is not None else None
    return configured if configured is not None else deployment_min


def _persona_name(config: LarkbotConfig, host: ChatHost, platform: str, chat_id: str) -> str:
    held = host.held.get(f"{platform}:{chat_id}")
    if held is not None:
        return held.persona.name
    settings = config.chat(platform, chat_id)
    return (settings.display_name if settings is not None else None) or DEFAULT_NAME


async def _on_typing(host: ChatHost, observer: DriverObserver, signal: TypingSignal) -> None:
    # One that does not decode is logged and counted by the subscription (larkbot_bus_subscription_*).
    state = host.held.get(f"{signal.platform.value}:{signal.chat_id}")
    if state is None:
        metrics.TYPING_SIGNALS.labels("not_held").inc()
        return
    state.typing(signal.at_ms)
    metrics.TYPING_SIGNALS.labels("ok").inc()
    observer.typing_applied(state)


def main() -> int:
    return run(Service.DRIVER, DriverService)
