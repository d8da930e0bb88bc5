"""Running a service: configuration, logging, the bus, the operations endpoint, signals, shutdown.

A service is a recipe with ``build(ctx)``: once the bus is up it wires the service's components —
declares what it consumes and serves, spawns its loops — and returns them as one frozen value with a
``stop()`` (stop taking work, finish or checkpoint what is in flight). Nothing is filled in later, so a
composition root has no optional attributes (:class:`Buildable`, :class:`Running`). :func:`run` owns
everything else:

1. load and validate ``config.yaml`` — a bad configuration exits with status 2 and the key path;
2. JSON logging with every configured secret masked; traces exported when the environment names an
   OTLP endpoint (:mod:`.tracing`); uvloop;
3. ``/healthz`` (alive at once), ``/readyz`` (``build`` done, bus connected, the service's own checks),
   ``/metrics``;
4. connect to NATS with backoff and apply the idempotent bootstrap;
5. ``build``; wait for SIGTERM/SIGINT or a crashed background task;
6. ``stop``, drain NATS, close the operations endpoint; exit 0 (1 if a task crashed).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from larkbot.canonical.errors import ConfigError
from larkbot.canonical.names import KV_LEASES, Service

from . import leadership, metrics, periodic
from .bootstrap import bootstrap
from .bus import Bus, connect
from .config import LarkbotConfig, ServiceSettings, load_config
from .db import default_sqlite_url
from .http import Check, OpsServer
from .logs import register_secrets, setup_logging
from .tracing import setup_tracing, shutdown_tracing

__all__ = [
    "VERSION",
    "Buildable",
    "Built",
    "Running",
    "ServiceContext",
    "built",
    "data_dir",
    "database_url",
    "freeze_startup_heap",
    "http_port",
    "run",
    "serve",
]

log = logging.getLogger(__name__)

VERSION = "0.1.0"


def data_dir(config: LarkbotConfig) -> str:
    """``LARKBOT_DATA_DIR`` (set by ``larkbot up`` to the directory it locked) wins over the file."""
    return os.environ.get("LARKBOT_DATA_DIR") or config.data_dir


def database_url(config: LarkbotConfig, service: Service) -> str:
    """A service's database: ``services.<name>.database_url``, else SQLite under the data dir. Operator
    commands that open a service's database (``larkbot memory``) use this too."""
    settings = config.services.for_service(service.value)
    if settings.database_url is not None:
        return settings.database_url.get_secret_value()
    return default_sqlite_url(data_dir(config), service.value)


class ServiceContext:
    """What a service gets at start: settings, the bus, readiness registration and task spawning."""

    def __init__(
        self, name: Service, config: LarkbotConfig, bus: Bus, ops: OpsServer, stack: AsyncExitStack
    ) -> None:
        self.name = name
        self.config = config
        self.settings: ServiceSettings = config.services.for_service(name.value)
        self.data_dir = data_dir(config)
        self.bus = bus
        self.ops = ops
        self.stack = stack
        self.stopping = asyncio.Event()
        self.crashed: BaseException | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    def database_url(self) -> str:
        return database_url(self.config, self.name)

    def add_check(self, name: str, check: Callable[[], Awaitable[Check]]) -> None:
        self.ops.add_check(name, check)

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Run a background loop; if it fails, the service stops with exit status 1 (fail loudly)."""
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def every(
        self,
        interval_s: float,
        work: Callable[[], Awaitable[None]],
        name: str,
        *,
        tolerate: tuple[type[BaseException], ...] = (),
    ) -> asyncio.Task[Any]:
        """Run ``work`` now and every ``interval_s`` until the service stops (:mod:`.periodic`)."""
        return self.spawn(periodic.every(interval_s, work, self.stopping, name=name, tolerate=tolerate), name)

    async def lead(
        self, name: str, work: Callable[[], Awaitable[None]] | None, *, replica: str
    ) -> leadership.SingletonLease:
        """Run ``work`` only while this replica holds the service's singleton lease ``name``
        (:mod:`.leadership`); returns the lease (its ``held`` answers "am I the leader now")."""
        lease = await leadership.SingletonLease.open(self.bus.js, KV_LEASES, self.name.value, name, replica)
        self.spawn(lease.run(self.stopping, work), f"lease-{name}")
        return lease

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None and not self.stopping.is_set():
            log.error(
                "background task %s crashed: %s: %s", task.get_name(), type(exc).__name__, exc, exc_info=exc
            )
            self.crashed = exc
            self.stopping.set()

    async def join_tasks(self, timeout_s: float) -> None:
        if not self._tasks:
            return
        _done, pending = await asyncio.wait(set(self._tasks), timeout=timeout_s)
        for task in pending:
            # A loop that does not watch ``stopping`` holds every stop up by ``timeout_s``.
            log.warning("background task %s did not end with the service; cancelled", task.get_name())
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)


class Running(Protocol):
    """A service's wired components, as its ``build`` returned them."""

    async def stop(self) -> None: ...


R = TypeVar("R", bound=Running)
R_co = TypeVar("R_co", bound=Running, covariant=True)


@runtime_checkable
class Buildable(Protocol[R_co]):
    """A service recipe: its settings and options, then ``build(ctx)`` once the bus is up."""

    async def build(self, ctx: ServiceContext) -> R_co: ...


def http_port(name: Service, config: LarkbotConfig) -> int:
    override = os.environ.get("LARKBOT_HTTP_PORT")
    if override:
        return int(override)
    return config.services.http_port(name.value)


async def serve(
    name: Service,
    app: Buildable[Running],
    config: LarkbotConfig,
    *,
    stop_timeout_s: float = 20.0,
    stopping: asyncio.Event | None = None,
    nats_url: str | None = None,
    port: int | None = None,
    started: Callable[[ServiceContext], None] | None = None,
    built: Callable[[Running], None] | None = None,
) -> int:
    """Run ``app`` until SIGTERM/SIGINT (or until ``stopping`` is set, for in-process use in tests).
    ``built`` receives what a :class:`Buildable`'s ``build`` returned."""
    settings = config.services.for_service(name.value)
    metrics.SERVICE_INFO.labels(name.value, VERSION).set(1)
    metrics.SERVICE_START_TIME.labels(name.value).set(time.time())
    ops = OpsServer(name.value, settings.http_host, http_port(name, config) if port is None else port)
    if stopping is None:
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stopping.set)

    bus_holder: list[Bus] = []

    async def bus_ready() -> Check:
        if not bus_holder:
            return Check(False, "connecting to NATS")
        return Check(
            bus_holder[0].connected, "connected" if bus_holder[0].connected else "NATS connection lost"
        )

    # Ready only once ``build`` has returned: until then the service's own checks (partitions held,
    # consumers running) are not registered yet, and a readiness made of the bus alone would admit
    # traffic (or a rollout's next pod) to a replica that has not taken over anything.
    started_up: list[bool] = []

    async def build_done() -> Check:
        return Check(True, "built") if started_up else Check(False, "starting")

    ops.add_check("start", build_done)
    ops.add_check("nats", bus_ready)
    await ops.start()
    async with AsyncExitStack() as stack:
        stack.push_async_callback(ops.stop)

        async def on_state(state: str) -> None:
            metrics.BUS_CONNECTED.labels(name.value).set(1 if state == "reconnected" else 0)
            if state == "reconnected":
                metrics.BUS_RECONNECTS.labels(name.value).inc()
            metrics.set_bus_server(name.value, bus_holder[0].server if bus_holder else "")

        connect_task = asyncio.create_task(
            connect(config.nats, name.value, url=nats_url or os.environ.get("NATS_URL"), on_state=on_state)
        )
        stop_wait = asyncio.create_task(stopping.wait())
        await asyncio.wait({connect_task, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
        if not connect_task.done():
            connect_task.cancel()
            await asyncio.gather(connect_task, return_exceptions=True)
            log.info("stopped before NATS answered")
            return 0
        bus = connect_task.result()
        bus_holder.append(bus)
        metrics.BUS_CONNECTED.labels(name.value).set(1)
        metrics.set_bus_server(name.value, bus.server)
        stack.push_async_callback(bus.close, config.nats.drain_timeout_s)
        await bootstrap(bus.js, config.jetstream)

        ctx = ServiceContext(name, config, bus, ops, stack)
        ctx.stopping = stopping
        stop: Callable[[], Awaitable[None]]
        components = await app.build(ctx)
        stop = components.stop
        started_up.append(True)
        if built is not None:
            built(components)

        async def ready_gauge() -> None:
            ready, _ = await ops.readiness()
            metrics.SERVICE_READY.labels(name.value).set(1 if ready else 0)

        gauge = asyncio.create_task(periodic.every(5.0, ready_gauge, stopping, name="readiness gauge"))
        log.info("%s started", name.value)
        if started is not None:
            started(ctx)
        await stop_wait
        await gauge
        log.info("%s stopping", name.value)
        try:
            await asyncio.wait_for(stop(), timeout=stop_timeout_s)
        except TimeoutError:
            log.error("stop did not finish within %.0f s", stop_timeout_s)
        await ctx.join_tasks(timeout_s=5.0)
        crashed = ctx.crashed
    log.info("%s stopped", name.value)
    return 1 if crashed is not None else 0


def run(name: Service, factory: Callable[[LarkbotConfig], Buildable[Running]]) -> int:
    """Entry point of ``larkbot run <service>``: returns the process exit status."""
    setup_logging(name.value)
    try:
        # Its own view: the secrets of other services are withheld (config._secrets).
        config = load_config(service=name.value)
    except ConfigError as exc:
        print(f"larkbot {name.value}: {exc.report()}", file=sys.stderr)
        return 2
    register_secrets(config.secret_values())
    logging.getLogger().setLevel(config.services.for_service(name.value).log_level)
    try:
        app = factory(config)
    except ConfigError as exc:
        print(f"larkbot {name.value}: {exc.report()}", file=sys.stderr)
        return 2
    setup_tracing(name.value)
    try:
        return _run_loop(serve(name, app, config, started=freeze_startup_heap))
    finally:
        shutdown_tracing()


def freeze_startup_heap(_ctx: ServiceContext | None = None) -> None:
    """Move what is alive once the service has started (imported modules, pydantic, SQLAlchemy and
    aiogram models, the service's own set-up) into the permanent generation, so that full collections
    no longer walk it; reference counting still frees it. Only for a process that runs one service
    (``larkbot run``), not in-process tests. Measured in the turn benchmark: full collections of the
    ingress-telegram process took 90–180 ms each (the driver's and the gateway's ~70 ms) and made its
    worst turns."""
    gc.collect()
    gc.freeze()


def _run_loop(main: Coroutine[Any, Any, int]) -> int:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on every supported platform
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)


@dataclass(frozen=True)
class Built(Generic[R]):
    """A service running in-process: what its ``build`` returned, and the context it was built in (the
    bus, the operations endpoint's ``ops.bound_port``, ``stopping``)."""

    components: R
    ctx: ServiceContext


@asynccontextmanager
async def built(
    name: Service, recipe: Buildable[R], config: LarkbotConfig, *, nats_url: str, timeout_s: float = 60.0
) -> AsyncIterator[Built[R]]:
    """Run a :class:`Buildable` service in-process (tests, benchmarks): yields its wired components and
    context once built, stops it the way SIGTERM does on exit and asserts a clean exit."""
    stopping = asyncio.Event()
    ready: asyncio.Future[Built[R]] = asyncio.get_running_loop().create_future()
    parts: list[Running] = []

    def on_started(ctx: ServiceContext) -> None:
        # ``recipe.build`` returned it, so it is an R.
        ready.set_result(Built(parts[0], ctx))  # type: ignore[arg-type]

    task = asyncio.create_task(
        serve(
            name,
            recipe,
            config,
            stopping=stopping,
            nats_url=nats_url,
            port=0,
            built=parts.append,
            started=on_started,
        )
    )
    pending: set[asyncio.Future[Any]] = {task, ready}
    await asyncio.wait(pending, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    if not ready.done():
        stopping.set()
        ready.cancel()
        status = await asyncio.wait_for(task, timeout_s)
        raise RuntimeError(f"{name.value} did not start (exit status {status})")
    try:
        yield ready.result()
    finally:
        stopping.set()
        status = await asyncio.wait_for(task, timeout_s)
        if status != 0:
            raise RuntimeError(f"{name.value} stopped with status {status}")
