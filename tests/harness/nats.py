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

from larkbot.runtime.natsserver import EmbeddedNats, find_binary

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
