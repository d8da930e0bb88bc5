"""``larkbot up``: the local stack — embedded NATS, bootstrap, every service supervised as a child.

Children run ``python -m larkbot.cli run <service>`` in their own session (so a terminal Ctrl-C reaches
only this supervisor, which then stops them in order), log JSON lines to ``data/logs/<service>.log``,
and are restarted with backoff when they die. A child that exits with status 2 (invalid configuration)
is not restarted: the stack stops and says why.
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
from urllib.parse import urlsplit

import aiohttp

from larkbot.canonical.errors import ConfigError
from larkbot.canonical.names import SERVICE_PORTS, Service
from larkbot.runtime.bootstrap import bootstrap
from larkbot.runtime.bus import connect
from larkbot.runtime.config import LarkbotConfig, load_config
from larkbot.runtime.natsserver import EmbeddedNats, NatsServerError

from .main import SERVICE_MODULES

STOP_TIMEOUT_S = 25.0


@dataclass
class Child:
    service: str
    port: int
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


def _port(config: LarkbotConfig, service: str) -> int:
    configured = config.services.for_service(service).http_port
    return configured if configured is not None else SERVICE_PORTS[Service(service)]


def _spawn(child: Child, env: dict[str, str]) -> None:
    child.log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(child.log_path, "ab") as out:
        child.proc = subprocess.Popen(
            [sys.executable, "-m", "larkbot.cli", *(child.argv or ("run", child.service))],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**env, "LARKBOT_HTTP_PORT": str(child.port)},
            start_new_session=True,
        )
    child.state = "starting"


async def _probe(session: aiohttp.ClientSession, child: Child) -> None:
    try:
        async with session.get(f"http://127.0.0.1:{child.port}{child.ready_path}") as resp:
            body = await resp.json(content_type=None)
            if resp.status == 200:
                child.state = "ready"
                child.detail = ""
            else:
                child.state = "not ready"
                failing = [
                    f"{k}: {v['detail']}" for k, v in body.get("checks", {}).items() if not v.get("ok")
                ]
                child.detail = "; ".join(failing)
    except (aiohttp.ClientError, TimeoutError, ValueError):
        child.state = "starting"


def _print_table(children: list[Child], started: float) -> None:
    print(f"\n[{time.monotonic() - started:5.1f} s]")
    for c in children:
        pid = c.proc.pid if c.proc and c.proc.poll() is None else "-"
        extra = f"  ({c.detail})" if c.detail else ""
        where = f"http://127.0.0.1:{c.port}"
        print(f"  {c.service:<17} {c.state:<10} {where}  pid {pid}  restarts {c.restarts}{extra}")
    sys.stdout.flush()


async def _supervise(config: LarkbotConfig, children: list[Child], env: dict[str, str], nats_url: str) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    bus = await connect(config.nats, "up", url=nats_url, give_up_after_s=30)
    try:
        await bootstrap(bus.js)
    finally:
        await bus.close()
    print(f"NATS at {nats_url}: streams, consumers and buckets declared")

    for child in children:
        _spawn(child, env)
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
                    child.detail = f"exited with status {code}, restarting in {delay:.0f} s"
                    child.restarts += 1
                if (
                    child.proc is None
                    and not child.fatal
                    and now >= child.next_start
                    and child.state == "exited"
                ):
                    _spawn(child, env)
            await asyncio.gather(*(_probe(session, c) for c in children if c.proc is not None))
            view = "|".join(f"{c.service}:{c.state}:{c.detail}:{c.restarts}" for c in children)
            if view != last_view:
                _print_table(children, started)
                last_view = view
            if not announced and all(c.state == "ready" for c in children):
                announced = True
                services = [c for c in children if c.service != "playground"]
                extra = " (and the playground)" if len(services) < len(children) else ""
                print(
                    f"\nall {len(services)} services ready{extra} in {time.monotonic() - started:.1f} s. "
                    f"Logs: {children[0].log_path.parent}/<service>.log. Ctrl-C stops the stack."
                )
                if extra:
                    print('talk to the bot:  uv run larkbot say "hello @LarkBot, what is new?"')
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


def _playground_argv(config: LarkbotConfig, control_port: int) -> tuple[str, ...]:
    """The playground serves the fake Bot API and fake model where the configuration points."""
    argv = ["playground", "--control-port", str(control_port)]
    if config.telegram is not None and urlsplit(config.telegram.api_base).port:
        argv += ["--telegram-port", str(urlsplit(config.telegram.api_base).port)]
    fakes = [e for e in config.llm.endpoints.values() if e.fake and urlsplit(e.base_url).port]
    if fakes:
        argv += ["--llm-port", str(urlsplit(fakes[0].base_url).port)]
    return tuple(argv)


def up(
    *,
    config_path: str | None,
    data_dir: str,
    services: list[str] | None,
    playground: bool = False,
    playground_port: int = 9189,
) -> int:
    try:
        config = load_config(config_path)
    except ConfigError as exc:
        print(exc.report(), file=sys.stderr)
        return 2
    data = Path(data_dir).resolve()
    env = dict(os.environ)
    if config_path:
        env["LARKBOT_CONFIG"] = str(Path(config_path).resolve())
    nats: EmbeddedNats | None = None
    nats_url = os.environ.get("NATS_URL")
    if not nats_url:
        nats = EmbeddedNats(data / "nats", log_file=data / "logs" / "nats-server.log")
        (data / "logs").mkdir(parents=True, exist_ok=True)
        try:
            nats_url = nats.start()
        except NatsServerError as exc:
            print(f"cannot start NATS: {exc}", file=sys.stderr)
            return 1
        print(f"embedded NATS (JetStream, store {data / 'nats'}) listening on {nats_url}")
    env["NATS_URL"] = nats_url
    env["LARKBOT_DATA_DIR"] = str(data)
    names = services or list(SERVICE_MODULES)
    children = [Child(name, _port(config, name), data / "logs" / f"{name}.log") for name in names]
    if playground:
        children.insert(
            0,
            Child(
                "playground",
                playground_port,
                data / "logs" / "playground.log",
                argv=_playground_argv(config, playground_port),
                ready_path="/transcript",
            ),
        )
    try:
        status = asyncio.run(_supervise(config, children, env, nats_url))
    except KeyboardInterrupt:
        status = 0
    finally:
        print("\nstopping…")
        _stop_children(children)
        if nats is not None:
            nats.stop()
            print("  nats-server       stopped")
    return status
