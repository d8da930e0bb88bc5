"""One ``larkbot up`` per data directory.

``larkbot up`` holds an exclusive ``flock`` on ``<data_dir>/larkbot-up.lock`` for its whole life and
writes there who holds it (pid, configuration, NATS URL, the processes it started). Its children — the NATS
server, the services, the playground — inherit the descriptor, so the lock outlives a supervisor killed
with SIGKILL for as long as anything it started still runs: a second stack can never open the same NATS
store or SQLite files. The file stays behind after a clean stop; the lock, not the file, says whether the
directory is in use.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any

LOCK_NAME = "larkbot-up.lock"


class DataDirBusy(Exception):
    """Another ``larkbot up`` (or what it started) holds the data directory."""

    def __init__(self, data_dir: Path, holder: dict[str, Any]) -> None:
        self.data_dir = data_dir
        self.holder = holder
        super().__init__(describe_holder(data_dir, holder))


def describe_holder(data_dir: Path, holder: dict[str, Any]) -> str:
    pid = holder.get("pid")
    if not isinstance(pid, int):
        return f"the data directory {data_dir} is in use by another `larkbot up` that is still starting"
    since = holder.get("started_at")
    when = time.strftime(" since %Y-%m-%d %H:%M:%S", time.localtime(since)) if since else ""
    facts = [f"pid {pid}{when}", f"configuration {holder.get('config') or '(defaults)'}"]
    if holder.get("nats_url"):
        facts.append(f"NATS {holder['nats_url']}")
    if holder.get("playground"):
        facts.append(f"playground {holder['playground']}")
    text = f"the data directory {data_dir} is in use by another `larkbot up` ({', '.join(facts)})"
    if _alive(pid):
        return text + ": stop it first (Ctrl-C in its terminal), or give this stack another data_dir"
    children = holder.get("children") or {}
    running = [f"{name} (pid {child})" for name, child in children.items() if _alive(child)]
    still = ", ".join(running) if running else "processes it started"
    return f"{text}; pid {pid} has exited but {still} still hold the directory: stop them first"


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class DataDirLock:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.path = data_dir / LOCK_NAME
        self.fd: int | None = None
        self.holder: dict[str, Any] = {}

    def acquire(self, **holder: Any) -> None:
        """Take the lock or raise :class:`DataDirBusy` naming who holds it."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 1 << 16, 0).decode("utf-8", "replace")
            os.close(fd)
            try:
                found = json.loads(text)
            except ValueError:
                found = {}  # the holder has not written yet
            raise DataDirBusy(self.data_dir, found if isinstance(found, dict) else {}) from None
        self.fd = fd
        self.update(pid=os.getpid(), started_at=time.time(), children={}, **holder)

    def update(self, **fields: Any) -> None:
        if self.fd is None:
            raise RuntimeError("the data directory lock is not held")
        self.holder.update(fields)
        data = json.dumps(self.holder, sort_keys=True).encode()
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data, 0)

    def child_started(self, name: str, pid: int) -> None:
        self.update(children={**self.holder.get("children", {}), name: pid})

    def release(self) -> None:
        """Close this process's descriptor; the lock is free once no child holds it either."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
