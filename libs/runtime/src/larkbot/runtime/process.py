"""Facts about this process that several services need, spelled once.

- :func:`replica_id`: unique per process, usable as a KV key token, a subject token and a consumer name
  (the host name is reduced to ``[A-Za-z0-9_-]``; the pid and three random bytes keep two processes of one
  host — or one restarted with the same pid — apart).
- :func:`deployment_offset_min`: the deployment's UTC offset in minutes — the configured ``utc_offset_min``,
  else the machine's offset now. Services read it once at start-up and freeze it (SPEC §3: a ``+HH:MM``
  suffix only where an event's offset differs from the deployment's).
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import time

__all__ = ["deployment_offset_min", "replica_id"]


def replica_id() -> str:
    host = re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname())[:40] or "host"
    return f"{host}-{os.getpid()}-{secrets.token_hex(3)}"


def deployment_offset_min(configured: int | None) -> int:
    return configured if configured is not None else (time.localtime().tm_gmtoff or 0) // 60
