"""The operating-system side of shell tasks: starting a command detached from the driver, telling whether
it still runs, stopping it, and reading its files. Everything here blocks; callers run it in a thread.

A task's directory ``<output_dir>/<task id>/`` holds ``command`` (the command text), ``output`` (its
stdout and stderr) and, once it ended, ``status`` (its exit status as one decimal line, written by the
wrapper to a temporary name and renamed into place, so a reader never sees half of it).

The command is started through a launcher that runs in a session of its own (``setsid``), forks the
wrapper into the background and exits at once. The task is then nobody's child in the driver: it lives on
when the driver dies (SIGKILL included) or stops, the driver never has a child to reap, and the task's
process group is the launcher's pid (a process group outlives its leader while members remain, and its id
is not reused meanwhile).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from .core import shell as core

#: ``$1`` is ``/bin/sh``, ``$2`` the wrapper, ``$3`` the shell of the command, ``$4`` the task directory.
_LAUNCHER: Final = '"$1" -c "$2" larkbot-task "$3" "$4" </dev/null >/dev/null 2>&1 &'
_WRAPPER: Final = (
    '"$1" "$2/command" >"$2/output" 2>&1 </dev/null; s=$?; '
    'printf "%s\\n" "$s" >"$2/status.tmp" && mv -f "$2/status.tmp" "$2/status"'
)
_SH: Final = "/bin/sh"
#: How long a SIGKILLed group is waited for.
KILL_WAIT_S: Final = 5.0


@dataclass(frozen=True, slots=True)
class TaskFiles:
    task_dir: Path

    @property
    def command(self) -> Path:
        return self.task_dir / "command"

    @property
    def output(self) -> Path:
        return self.task_dir / "output"

    @property
    def status(self) -> Path:
        return self.task_dir / "status"


@dataclass(frozen=True, slots=True)
class Ended:
    """What a finished task left: its exit status (``None``: the status file says nothing readable),
    how long ago it ended (wall time, from the status file), and the size of its output."""

    exit_code: int | None
    age_ms: int
    output_bytes: int


def create(files: TaskFiles, command: str) -> None:
    files.task_dir.mkdir(mode=0o700)
    files.command.write_text(command, encoding="utf-8")


def launch(files: TaskFiles, executable: str, cwd: Path, env: dict[str, str]) -> int:
    """Start the command of ``files`` detached (module docstring); returns its process group."""
    argv = [_SH, "-c", _LAUNCHER, "larkbot-launch", _SH, _WRAPPER, executable, str(files.task_dir)]
    launcher = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    launcher.wait()
    return launcher.pid


def ended(files: TaskFiles) -> Ended | None:
    """The task's end, or ``None`` while it has no status file."""
    try:
        text = files.status.read_text(encoding="utf-8")
        written_ns = files.status.stat().st_mtime_ns
    except FileNotFoundError:
        return None
    age_ms = max(0, (time.time_ns() - written_ns) // 1_000_000)
    return Ended(core.parse_exit_code(text), age_ms, size(files.output))


def look(files: TaskFiles, pgid: int | None) -> Ended | bool:
    """The task's end, else whether it still runs (``False``: no live process and no status file)."""
    found = ended(files)
    if found is not None:
        return found
    if pgid is not None and group_alive(pgid):
        return True
    # It may have ended between the two looks.
    found = ended(files)
    return found if found is not None else False


def group_alive(pgid: int) -> bool:
    """Whether any process of the group is alive. Zombies do not count: an init that does not reap
    orphans leaves the finished wrapper as one."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path("/proc")
    if not (proc / "self" / "stat").exists():
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # the process ended while we looked
        # ``pid (comm) state ppid pgrp ...``; comm may hold spaces and parentheses.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False


def stop_group(pgid: int, grace_s: float) -> bool:
    """SIGTERM to the group; SIGKILL to what is left after ``grace_s``. Whether the group is gone (a
    process in uninterruptible sleep may outlast even SIGKILL for a while)."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    if _gone_within(pgid, grace_s):
        return True
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    return _gone_within(pgid, KILL_WAIT_S)


def _gone_within(pgid: int, seconds: float) -> bool:
    until = time.monotonic() + seconds
    delay = 0.01
    while group_alive(pgid):
        if time.monotonic() >= until:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
    return True


def size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def read_ends(path: Path, limit: int) -> str:
    """The file's beginning and end within ``limit`` bytes, as the model sees them (``""``: no file)."""
    try:
        with path.open("rb") as f:
            total = os.fstat(f.fileno()).st_size
            head_n, tail_n = core.ends(total, limit)
            head = f.read(head_n)
            tail = b""
            if tail_n:
                f.seek(total - tail_n)
                tail = f.read(tail_n)
    except FileNotFoundError:
        return ""
    return core.shown(head, tail, total)


def read_tail(path: Path, limit: int) -> str:
    try:
        with path.open("rb") as f:
            total = os.fstat(f.fileno()).st_size
            f.seek(max(0, total - limit))
            return core.shown_tail(f.read(limit), total) if limit else ""
    except FileNotFoundError:
        return ""


def read_range(path: Path, offset: int, limit: int) -> tuple[bytes, int, int] | None:
    """``limit`` bytes from ``offset`` (negative: from the end): the bytes, where they start, the file's
    size; ``None`` when there is no file."""
    try:
        with path.open("rb") as f:
            total = os.fstat(f.fileno()).st_size
            start = core.resolve_offset(offset, total)
            f.seek(start)
            return f.read(limit), start, total
    except FileNotFoundError:
        return None


def remove(task_dir: Path) -> None:
    # Removed already (by another replica of this host) is what we wanted.
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(task_dir)
