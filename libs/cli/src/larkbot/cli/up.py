"""``larkbot up``: the local stack — embedded NATS, bootstrap, every service supervised as a child.

Children run ``python -m larkbot.cli run <service>`` in their own session (so a terminal Ctrl-C reaches
only this supervisor, which then stops them in order), log JSON lines to ``<data_dir>/logs/<service>.log``,
and are restarted with backoff when they die. A child that exits with status 2 (invalid configuration)
is not restarted: the stack stops and says why.

Before anything starts, the data directory is locked (``datalock``: a second stack on the same directory is
refused, naming the first) and every port the stack will listen on is checked; a port taken later, which
makes a service exit, is shown in the status table, not only in that service's log.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from larkbot.canonical.errors import ConfigError
from larkbot.runtime.bootstrap import bootstrap
from larkbot.runtime.bus import connect
from larkbot.runtime.config import DEFAULT_CONFIG_PATH, LarkbotConfig, load_config
from larkbot.runtime.natsserver import EmbeddedNats, NatsServerError

from .datalock import DataDirBusy, DataDirLock
from .main import SERVICE_MODULES
from .stack import (
    DEFAULT_PLAYGROUND_PORT,
    Endpoint,
    inspector_endpoint,
    ops_endpoints,
    page_token_headers,
    playground_ports,
    port_taken,
    readiness,
    say_command,
)

STOP_TIMEOUT_S = 25.0


@dataclass
class Child:
    service: str
    endpoint: Endpoint
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    next_start: float = 0.0
    state: str = "starting"
    detail: str = ""
    fatal: str = ""
    ready_since: float | None = field(default=None)
    #: ``larkbot`` arguments of the child; a service by default.
    argv: tuple[str, ...] = ()
    ready_path: str = "/readyz"
    ready_headers: dict[str, str] = field(default_factory=dict)


def _spawn(child: Child, env: dict[str, str], lock: DataDirLock) -> None:
    child.log_path.parent.mkdir(parents=True, exist_ok=True)
    assert lock.fd is not None
    with open(child.log_path, "ab") as out:
        child.proc = subprocess.Popen(
            [sys.executable, "-m", "larkbot.cli", *(child.argv or ("run", child.service))],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**env, "LARKBOT_HTTP_PORT": str(child.endpoint.port)},
            start_new_session=True,
            pass_fds=(lock.fd,),
        )
    lock.child_started(child.service, child.proc.pid)
    child.state = "starting"


async def _probe(session: aiohttp.ClientSession, child: Child) -> None:
    found = await readiness(session, child.endpoint.url + child.ready_path, child.ready_headers)
    # A child that does not answer yet is still starting (it is alive: dead ones are not probed).
    child.state = "starting" if found.state == "not answering" else found.state
    child.detail = found.detail if found.state == "not ready" else ""


def _print_table(children: list[Child], started: float) -> None:
    print(f"\n[{time.monotonic() - started:5.1f} s]")
    for c in children:
        pid = c.proc.pid if c.proc and c.proc.poll() is None else "-"
        extra = f"  ({c.detail})" if c.detail else ""
        where = c.endpoint.url
        print(f"  {c.service:<17} {c.state:<10} {where}  pid {pid}  restarts {c.restarts}{extra}")
    sys.stdout.flush()


async def _supervise(
    config: LarkbotConfig, children: list[Child], env: dict[str, str], nats_url: str, lock: DataDirLock
) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    bus = await connect(config.nats, "up", url=nats_url, give_up_after_s=30)
    try:
        await bootstrap(bus.js, config.jetstream)
    finally:
        await bus.close()
    print(f"NATS at {nats_url}: streams, consumers and buckets declared")

    for child in children:
        _spawn(child, env, lock)
    started = time.monotonic()
    last_view = ""
    announced = False
    status = 0
    timeout = aiohttp.ClientTimeout(total=2)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        while not stop.is_set():
            now = time.monotonic()
            for child in children:
                proc = child.proc
                if proc is not None and proc.poll() is not None:
                    code = proc.returncode
                    child.proc = None
                    child.state = "exited"
                    if code == 2:
                        child.fatal = (
                            f"{child.service} exited with status 2 (invalid configuration): "
                            f"see {child.log_path}"
                        )
                        stop.set()
                        status = 2
                        continue
                    delay = min(30.0, 2.0 ** min(child.restarts, 5))
                    child.next_start = now + delay
                    taken = port_taken(child.endpoint)
                    why = f": {taken}" if taken else ""
                    child.detail = f"exited with status {code}{why}, restarting in {delay:.0f} s"
                    child.restarts += 1
                if (
                    child.proc is None
                    and not child.fatal
                    and now >= child.next_start
                    and child.state == "exited"
                ):
                    _spawn(child, env, lock)
            await asyncio.gather(*(_probe(session, c) for c in children if c.proc is not None))
            view = "|".join(f"{c.service}:{c.state}:{c.detail}:{c.restarts}" for c in children)
            if view != last_view:
                _print_table(children, started)
                last_view = view
            if not announced and all(c.state == "ready" for c in children):
                announced = True
                services = [c for c in children if c.service not in ("playground", "inspector")]
                extra = " (and the playground)" if any(c.service == "playground" for c in children) else ""
                print(
                    f"\nall {len(services)} services ready{extra} in {time.monotonic() - started:.1f} s. "
                    f"Logs: {children[0].log_path.parent}/<service>.log. Ctrl-C stops the stack."
                )
                if extra:
                    print(f"talk to the bot:  {say_command(children[0].endpoint.port)}")
                    token = " (add ?token=<inspector.access_token>)" if children[0].ready_headers else ""
                    print(f"or in the browser: {children[0].endpoint.url}/{token}")
                for child in children:
                    if child.service == "inspector":
                        print(f"inspector (why the bot spoke or stayed silent): {child.endpoint.url}/")
                sys.stdout.flush()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=1.0)
    for child in children:
        if child.fatal:
            print(child.fatal, file=sys.stderr)
    return status


def _stop_children(children: list[Child]) -> None:
    # An orderly stop is bounded by STOP_TIMEOUT_S; a second Ctrl-C (or the signal a wrapper such as
    # `uv run` forwards again) must not abandon children and the NATS server half-stopped.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for child in children:
        if child.proc is not None and child.proc.poll() is None:
            child.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for child in children:
        if child.proc is None:
            continue
        try:
            child.proc.wait(max(0.1, deadline - time.monotonic()))
            print(f"  {child.service:<17} stopped (status {child.proc.returncode})")
        except subprocess.TimeoutExpired:
            child.proc.kill()
            child.proc.wait()
            print(f"  {child.service:<17} killed after {STOP_TIMEOUT_S:.0f} s")


def _children(
    config: LarkbotConfig, data: Path, services: list[str], playground_port: int | None, *, inspector: bool
) -> tuple[list[Child], list[Endpoint]]:
    """The children to run and every endpoint the stack will listen on; the whole stack (no service
    named) runs the web inspector too."""
    logs = data / "logs"
    children = [
        Child(endpoint.name, endpoint, logs / f"{endpoint.name}.log")
        for endpoint in ops_endpoints(config, services)
    ]
    if inspector:
        endpoint = inspector_endpoint(config)
        children.append(
            Child("inspector", endpoint, logs / "inspector.log", argv=("inspector",), ready_path="/readyz")
        )
    listeners = [child.endpoint for child in children]
    if playground_port is not None:
        ports = playground_ports(config, playground_port)
        argv = ["playground"] + [f"--{name}-port={port}" for name, port in ports.items()]
        control = Endpoint("playground", "127.0.0.1", playground_port)
        children.insert(
            0,
            Child(
                "playground",
                control,
                logs / "playground.log",
                argv=tuple(argv),
                ready_path="/transcript",
                ready_headers=page_token_headers(config),
            ),
        )
        listeners += [Endpoint(f"playground {name}", "127.0.0.1", port) for name, port in ports.items()]
    return children, listeners


def _config_source(config_path: str | None) -> str | None:
    source = config_path or os.environ.get("LARKBOT_CONFIG")
    if source is None and Path(DEFAULT_CONFIG_PATH).exists():
        source = DEFAULT_CONFIG_PATH
    return str(Path(source).resolve()) if source else None


def up(
    *,
    config_path: str | None,
    data_dir: str | None,
    services: list[str] | None,
    playground: bool = False,
    playground_port: int = DEFAULT_PLAYGROUND_PORT,
) -> int:
    try:
        config = load_config(config_path)
    except ConfigError as exc:
        print(exc.report(), file=sys.stderr)
        return 2
    # The flag overrides the file only when given.
    data = Path(data_dir if data_dir is not None else config.data_dir).resolve()
    source = _config_source(config_path)
    lock = DataDirLock(data)
    try:
        lock.acquire(
            config=source,
            data_dir=str(data),
            playground=f"http://127.0.0.1:{playground_port}" if playground else None,
        )
    except DataDirBusy as exc:
        print(f"larkbot up: {exc}", file=sys.stderr)
        return 1
    try:
        return _run_stack(
            config,
            source,
            data,
            services or list(SERVICE_MODULES),
            playground_port if playground else None,
            lock,
            inspector=not services,
        )
    finally:
        lock.release()


def _run_stack(
    config: LarkbotConfig,
    source: str | None,
    data: Path,
    services: list[str],
    playground_port: int | None,
    lock: DataDirLock,
    *,
    inspector: bool,
) -> int:
    children, listeners = _children(config, data, services, playground_port, inspector=inspector)
    taken = [(endpoint, why) for endpoint in listeners if (why := port_taken(endpoint))]
    if taken:
        print("larkbot up: not starting, the stack cannot listen where it is configured to:", file=sys.stderr)
        for endpoint, why in taken:
            print(f"  {endpoint.name} on {endpoint.host}:{endpoint.port}: {why}", file=sys.stderr)
        return 1
    env = dict(os.environ)
    if source:
        env["LARKBOT_CONFIG"] = source
    env["LARKBOT_DATA_DIR"] = str(data)
    nats: EmbeddedNats | None = None
    status = 1
    try:
        nats_url = os.environ.get("NATS_URL")
        if not nats_url:
            (data / "logs").mkdir(parents=True, exist_ok=True)
            assert lock.fd is not None
            nats = EmbeddedNats(
                data / "nats", log_file=data / "logs" / "nats-server.log", pass_fds=(lock.fd,)
            )
            try:
                nats_url = nats.start()
            except NatsServerError as exc:
                print(f"cannot start NATS: {exc}", file=sys.stderr)
                return 1
            assert nats.proc is not None
            lock.child_started("nats-server", nats.proc.pid)
            print(f"embedded NATS (JetStream, store {data / 'nats'}) listening on {nats_url}")
        lock.update(nats_url=nats_url)
        env["NATS_URL"] = nats_url
        status = asyncio.run(_supervise(config, children, env, nats_url, lock))
    except KeyboardInterrupt:
        status = 0
    finally:
        print("\nstopping…")
        _stop_children(children)
        if nats is not None:
            nats.stop()
            print("  nats-server       stopped")
    return status
