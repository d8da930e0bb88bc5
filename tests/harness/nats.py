"""A NATS server of the test's own that can be killed and brought back on the same port with the same
store: what a NATS restart looks like to the services (they reconnect to the URL they know).

The first start is :class:`~larkbot.runtime.natsserver.EmbeddedNats` as is (the server picks a free port);
a restart launches the same binary with the same store and that port pinned.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time
from pathlib import Path

import nats
from nats.js import JetStreamContext

from larkbot.runtime.natsserver import EmbeddedCluster, EmbeddedNats, find_binary

_PINNED = """\
host: 127.0.0.1
port: {port}
max_payload: 8MB
{auth}
jetstream {{
  store_dir: "{store}"
  max_memory_store: 256MB
  max_file_store: 8GB
}}
"""


class RestartableNats(EmbeddedNats):
    """``token``: require this client token (the leak test's canary); such a server is started with
    :meth:`start_on` (``EmbeddedNats.start`` writes no authorization)."""

    def __init__(self, store_dir: Path, *, token: str | None = None) -> None:
        super().__init__(store_dir)
        self.token = token
        self.restarts = 0

    def start_on(self, port: int, timeout_s: float = 20.0) -> str:
        self.port = port
        self._start_pinned(port, timeout_s)
        return self.url

    def _start_pinned(self, port: int, timeout_s: float = 20.0) -> None:
        (self.store_dir / "run").mkdir(parents=True, exist_ok=True)
        conf = self.store_dir / "run" / "pinned.conf"
        auth = f'authorization {{ token: "{self.token}" }}' if self.token else ""
        conf.write_text(
            _PINNED.format(port=port, auth=auth, store=self.store_dir / "jetstream"), encoding="utf-8"
        )
        with open(self.store_dir / "nats-server.log", "ab") as out:
            self.proc = subprocess.Popen(
                [find_binary(), "-c", str(conf)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"nats-server exited with {self.proc.returncode} on restart")
            with socket.socket() as sock:
                sock.settimeout(0.2)
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.05)
        raise AssertionError(f"nats-server did not listen on {port} within {timeout_s:g} s")

    async def restart(self, down_s: float) -> None:
        """SIGKILL, stay down ``down_s`` seconds, start again on the same port and store."""
        port = self.port
        assert port is not None
        await asyncio.to_thread(self.kill)
        await asyncio.sleep(down_s)
        await asyncio.to_thread(self._start_pinned, port)
        self.restarts += 1


class ClusterNats:
    """A 3-node JetStream cluster whose servers the chaos run kills one at a time: each :meth:`restart`
    SIGKILLs the next victim of ``victims`` and starts it again on its ports with its store.

    A victim is ``follower`` (a server leading neither ``EVENTS`` nor the leases bucket), or a stream
    whose current leader is killed (``EVENTS``, ``KV_leases``), looked up in the stream's cluster info
    at the moment of the kill."""

    def __init__(self, root: Path, victims: tuple[str, ...]) -> None:
        self.cluster = EmbeddedCluster(root, 3, log_dir=root)
        self.victims = list(victims)
        self.killed: list[tuple[str, str]] = []  # (victim role, server name)
        self.js: JetStreamContext | None = None

    @property
    def url(self) -> str:
        return self.cluster.url

    def start(self) -> str:
        return self.cluster.start()

    def stop(self) -> None:
        self.cluster.stop()

    async def ready(self, js: JetStreamContext, timeout_s: float = 90.0) -> None:
        """Until the cluster has elected its meta leader: before that, every JetStream request times out."""
        self.js = js
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                await js.account_info()
                return
            except (
                nats.errors.TimeoutError,
                nats.js.errors.ServiceUnavailableError,
                nats.js.errors.APIError,
            ):
                if time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.2)

    async def _leader(self, stream: str) -> str:
        assert self.js is not None, "ClusterNats.js is set once a client is connected"
        info = await self.js.stream_info(stream)
        assert info.cluster is not None
        assert info.cluster.leader
        return info.cluster.leader

    async def restart(self, down_s: float) -> None:
        role = self.victims.pop(0)
        if role == "follower":
            leaders = {await self._leader("EVENTS"), await self._leader("KV_leases")}
            names = [s.member.name for s in self.cluster.servers if s.member is not None]
            name = next(n for n in names if n not in leaders)
        else:
            name = await self._leader(role)
        server = self.cluster.by_name(name)
        self.killed.append((role, name))
        await asyncio.to_thread(server.kill)
        await asyncio.sleep(down_s)
        await asyncio.to_thread(server.start)
