"""Real services as child processes with one configuration, for end-to-end and fault-injection tests and
for the benches that run the services as a deployment does (``larkbot bench --only scale``,
``make bench-load``).

The harness writes a configuration file (free loopback ports, SQLite under a temporary directory, or the
PostgreSQL of ``TEST_DATABASE_URL``), starts ``python -m larkbot.cli run <service>`` for each service,
waits for ``/readyz``, and can SIGKILL and restart any of them. Logs go to ``<dir>/logs/<service>.log``.
A process can be pinned to cores of its own (:attr:`ServiceProcess.cores`); :meth:`Stack.scrape` reads a
metric from a service's ``/metrics``, :meth:`Stack.rss_bytes` its resident memory and
:meth:`Stack.cpu_seconds` the CPU time it used.
"""

from __future__ import annotations

import asyncio
import functools
import os
import random
import re
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import yaml

if TYPE_CHECKING:
    from larkbot.ingress_feishu.fake.server import FakeFeishu
    from larkbot.ingress_telegram.fake import FakeBotApi

READY_TIMEOUT_S = 120.0
#: How long :func:`until` waits unless told: generous, on a loaded 2-core machine.
WAIT_S = 90.0
#: Every service of a deployment, in the order a stack starts them.
SERVICES = ("llm-gateway", "media", "pipeline", "driver", "ingress-feishu", "ingress-telegram")
#: The fake model's key (``LlmEndpointSettings.api_key``): not a credential of any provider.
LLM_API_KEY = "sk-e2e-" + "0" * 24


#: Ports handed out by this process, never handed out twice.
_HANDED_OUT: set[int] = set()


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def _worker_share(start: int, stop: int) -> tuple[int, int]:
    """The part of ``[start, stop)`` this test process draws from: under pytest-xdist (``make test`` runs
    the suite in parallel processes) each worker takes its own slice, so two workers never hand out the
    same port for listeners their children bind later."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if not worker.startswith("gw") or count <= 1:
        return start, stop
    index = int(worker[2:]) % count
    width = (stop - start) // count
    return start + index * width, start + (index + 1) * width


def free_port() -> int:
    """A loopback port free now, for a listener a child process binds later.

    Taken below the kernel's ephemeral range: a port that ``bind(0)`` hands out is one that any outgoing
    connection on the machine may take next, and a stack that starts a minute later (``make up``
    installing first) then finds its inspector's port held by another process's client socket (seen on
    a loaded machine: the inspector restarting with "port in use" until the test gave up)."""
    low, _high = _ephemeral_range()
    start, stop = _worker_share(*((20000, low) if low > 21000 else (low // 2, low)))
    for _ in range(200):
        port = random.randrange(start, stop)
        if port in _HANDED_OUT:
            continue
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    with socket.socket() as sock:  # a machine with no free port below the range: any free one
        sock.bind(("127.0.0.1", 0))
        any_port: int = sock.getsockname()[1]
        return any_port


async def until(
    condition: Callable[[], Awaitable[bool] | bool], what: str, timeout_s: float = WAIT_S
) -> None:
    """Wait for ``condition`` (re-checked every 50 ms), failing with ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = condition()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        await asyncio.sleep(0.05)


def metric(text: str, name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` in a Prometheus exposition ``text`` whose labels include ``labels``
    (0 when absent)."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        family, _, label_text = head.partition("{")
        if family != name:
            continue
        found = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', label_text))
        if all(found.get(k) == v for k, v in labels.items()):
            total += float(value)
    return total


@dataclass
class ServiceProcess:
    name: str
    port: int
    log_path: Path
    proc: asyncio.subprocess.Process | None = None
    starts: int = 0
    #: The command that runs it, when not ``python -m larkbot.cli run <name>``.
    argv: tuple[str, ...] | None = None
    #: The service it runs, when ``name`` names a further replica (``pipeline-r2``).
    service: str | None = None
    #: The cores it may run on (``os.sched_setaffinity``); ``None``: wherever the scheduler puts it.
    cores: frozenset[int] | None = None

    @property
    def runs(self) -> str:
        return self.service or self.name


@dataclass
class Stack:
    """A set of services sharing one configuration file and one NATS server."""

    root: Path
    nats_url: str
    config: dict[str, Any]
    services: dict[str, ServiceProcess] = field(default_factory=dict)
    #: Variables given to one service only (its own credentials), by service name.
    service_env: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def config_path(self) -> Path:
        return self.root / "config.yaml"

    def write_config(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        data = dict(self.config)
        data.setdefault("data_dir", str(self.root / "data"))
        services = dict(data.get("services") or {})
        for name, svc in self.services.items():
            if svc.service is None:
                key = name.replace("-", "_")
                services[key] = {**services.get(key, {}), "http_host": "127.0.0.1", "http_port": svc.port}
        data["services"] = services
        self.config_path.write_text(yaml.safe_dump(data, sort_keys=True), encoding="utf-8")
        # A further replica reads the same configuration but for its own operations port.
        for name, svc in self.services.items():
            if svc.service is not None:
                key = svc.service.replace("-", "_")
                own = {**data, "services": {**services, key: {**services[key], "http_port": svc.port}}}
                path = self.root / f"config-{name}.yaml"
                path.write_text(yaml.safe_dump(own, sort_keys=True), encoding="utf-8")
                self.service_env[name] = {
                    **self.service_env.get(svc.service, {}),
                    **self.service_env.get(name, {}),
                    "LARKBOT_CONFIG": str(path),
                }

    def add(self, *names: str) -> None:
        for name in names:
            self.services[name] = ServiceProcess(name, free_port(), self.root / "logs" / f"{name}.log")

    def add_pinned(self, service: str, count: int) -> list[str]:
        """``count`` replicas of ``service`` (:meth:`add`, :meth:`add_replicas`), each pinned to a core of its
        own, in turn over the cores this process may use; their names."""
        cores = sorted(os.sched_getaffinity(0))
        self.add(service)
        self.add_replicas(service, count)
        names = [service] + [f"{service}-r{n}" for n in range(2, count + 1)]
        for index, name in enumerate(names):
            self.services[name].cores = frozenset({cores[index % len(cores)]})
        return names

    def add_replicas(self, service: str, count: int) -> None:
        """``count`` replicas of ``service`` in all: the first is ``service``, then ``<service>-r<n>``."""
        for n in range(2, count + 1):
            name = f"{service}-r{n}"
            log = self.root / "logs" / f"{name}.log"
            self.services[name] = ServiceProcess(name, free_port(), log, service=service)

    def env(self, name: str | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LARKBOT_")}
        env.update(NATS_URL=self.nats_url, LARKBOT_CONFIG=str(self.config_path))
        if name is not None:
            env.update(self.service_env.get(name, {}))
        return env

    async def start(self, name: str) -> None:
        svc = self.services[name]
        svc.log_path.parent.mkdir(parents=True, exist_ok=True)
        pin = None if svc.cores is None else functools.partial(os.sched_setaffinity, 0, svc.cores)
        out = svc.log_path.open("ab")
        try:
            svc.proc = await asyncio.create_subprocess_exec(
                *(svc.argv or (sys.executable, "-m", "larkbot.cli", "run", svc.runs)),
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
                stdin=asyncio.subprocess.DEVNULL,
                env=self.env(name),
                preexec_fn=pin,
            )
        finally:
            out.close()
        svc.starts += 1

    async def wait_ready(self, *names: str, timeout_s: float = READY_TIMEOUT_S) -> None:
        targets = names or tuple(self.services)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http:
            for name in targets:
                svc = self.services[name]
                while True:
                    if svc.proc is not None and svc.proc.returncode is not None:
                        raise AssertionError(f"{name} exited with {svc.proc.returncode}:\n{self.tail(name)}")
                    try:
                        async with http.get(f"http://127.0.0.1:{svc.port}/readyz") as resp:
                            if resp.status == 200:
                                break
                    except (aiohttp.ClientError, TimeoutError):
                        pass
                    if loop.time() > deadline:
                        raise AssertionError(f"{name} not ready in {timeout_s:g} s:\n{self.tail(name)}")
                    await asyncio.sleep(0.1)

    async def up(self) -> None:
        self.write_config()
        for name in self.services:
            await self.start(name)
        await self.wait_ready()

    def running(self, name: str) -> bool:
        proc = self.services[name].proc
        return proc is not None and proc.returncode is None

    def runs_pid(self, pid: int) -> bool:
        """Whether one of the services' current processes has this id and has not ended."""
        return any(
            svc.proc is not None and svc.proc.pid == pid and svc.proc.returncode is None
            for svc in self.services.values()
        )

    def exited(self) -> dict[str, int]:
        """Services whose process ended on its own (not through :meth:`kill` or :meth:`stop`)."""
        return {
            name: svc.proc.returncode
            for name, svc in self.services.items()
            if svc.proc is not None and svc.proc.returncode is not None
        }

    async def metrics(self, name: str) -> str:
        """The service's ``/metrics`` text."""
        port = self.services[name].port
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http,
            http.get(f"http://127.0.0.1:{port}/metrics") as resp,
        ):
            assert resp.status == 200, f"{name} /metrics answered {resp.status}"
            return await resp.text()

    async def scrape(self, name: str, metric_name: str, **labels: str) -> float:
        """``metric_name`` in the service's ``/metrics``, summed over its series whose labels include
        ``labels``."""
        return metric(await self.metrics(name), metric_name, **labels)

    def rss_bytes(self, name: str) -> int | None:
        """The service process's resident memory (``VmRSS``), or ``None`` when it does not run."""
        proc = self.services[name].proc
        if proc is None or proc.returncode is not None:
            return None
        try:
            status = Path(f"/proc/{proc.pid}/status").read_text(encoding="ascii")
        except OSError:
            return None
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return None

    def cpu_seconds(self, name: str) -> float | None:
        """CPU time the service process has used so far (user and system), or ``None`` when it does not
        run."""
        proc = self.services[name].proc
        if proc is None or proc.returncode is not None:
            return None
        try:
            stat = Path(f"/proc/{proc.pid}/stat").read_text(encoding="ascii")
        except OSError:
            return None
        # Fields after the command (which may hold spaces) start at the state; utime and stime are the
        # 14th and 15th fields of the line.
        fields = stat.rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    async def readyz(self, name: str) -> tuple[int, str]:
        port = self.services[name].port
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http,
            http.get(f"http://127.0.0.1:{port}/readyz") as resp,
        ):
            return resp.status, await resp.text()

    async def kill(self, name: str) -> None:
        """SIGKILL: no shutdown hooks, no drain, no acknowledgements of work in hand."""
        proc = self.services[name].proc
        if proc is not None and proc.returncode is None:
            proc.send_signal(signal.SIGKILL)
            await proc.wait()

    async def restart(self, name: str, *, hard: bool = True) -> None:
        if hard:
            await self.kill(name)
        else:
            await self.stop(name)
        await self.start(name)
        await self.wait_ready(name)

    async def stop(self, name: str, timeout_s: float = 60.0) -> int:
        proc = self.services[name].proc
        if proc is None or proc.returncode is not None:
            return proc.returncode if proc is not None and proc.returncode is not None else 0
        proc.send_signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(proc.wait(), timeout_s)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise AssertionError(f"{name} did not stop within {timeout_s:g} s:\n{self.tail(name)}") from None

    async def down(self) -> dict[str, int]:
        codes = {}
        for name in reversed(list(self.services)):
            codes[name] = await self.stop(name)
        return codes

    def tail(self, name: str, lines: int = 40) -> str:
        path = self.services[name].log_path
        if not path.exists():
            return "(no log)"
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])

    def log_text(self, name: str) -> str:
        path = self.services[name].log_path
        return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


def stack_config(
    world_root: Path,
    feishu: FakeFeishu,
    telegram: FakeBotApi,
    llm_url: str,
    chats: dict[str, dict[str, Any]],
    database_urls: dict[str, str],
    chat_defaults: dict[str, Any] | None = None,
    *,
    secrets_: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The configuration file of a test stack (``secrets_`` overrides credentials, for the leak test)."""
    s = secrets_ or {}
    endpoint = {
        "format": "openai-chat",
        "base_url": llm_url,
        "api_key": s.get("llm_api_key", LLM_API_KEY),
        "fake": True,
        "timeout_s": 10,
    }
    services: dict[str, Any] = {name: {"log_level": "INFO"} for name in ("pipeline", "driver")}
    for name, url in database_urls.items():
        services[name] = {**services.get(name, {}), "database_url": url}
    defaults = {
        # Debounce small but realistic; one probe and one primary per wake-up in these runs.
        "initial_delay_ms": 300,
        "typing_extend_ms": 1000,
        "max_delay_ms": 5000,
        "probe_timeout_s": 20,
        "turn_deadline_s": 30,
        **(chat_defaults or {}),
    }
    return {
        "data_dir": str(world_root / "data"),
        "utc_offset_min": 480,
        "services": services,
        "feishu": {
            "app_id": feishu.app_id,
            "app_secret": s.get("app_secret", feishu.app_secret),
            "domain": feishu.url,
        },
        "telegram": {
            "bot_token": s.get("bot_token", telegram.token),
            "api_base": telegram.base_url,
            "polling_timeout_s": 2,
        },
        "llm": {
            "endpoints": {
                "probe": {**endpoint, "model": "fake-probe"},
                "primary": {**endpoint, "model": "fake-primary"},
                "vision": {**endpoint, "model": "fake-vision"},
                "transcription": {**endpoint, "format": "openai-transcription", "model": "fake-whisper"},
            },
            "probe": "probe",
            "primary": "primary",
            "vision": "vision",
            "transcription": "transcription",
            **({"dump_dir": str(world_root / "llm-dumps")} if s.get("dump") else {}),
        },
        "chats": {"default": defaults, **chats},
    }
