"""The shell tools' rules, without I/O: what a task is, how long a ``bash`` call waits, the environment a
command gets, how output is cut for the model, and the runtime event that announces a background task's
completion (docs/driver.md "Shell tools").

Decisions:

- A ``bash`` call waits at most ``min(timeout_seconds, shell.max_timeout_s, time left in the turn less
  one model call)``: a command still running then is *not* killed; it continues as a background task and
  the result says so. Bounding the wait by the turn's deadline keeps the model able to read the result
  in the same turn.
- A command's environment is built from scratch (``PATH``, ``HOME``, ``LANG`` and the variables named in
  ``shell.env_passthrough``); the driver's own environment is never inherited.
- Output is cut in the middle (both ends kept around a marker): the first lines say what ran, the last
  ones how it ended. A completion event carries only the tail.
- The completion event's ``dedup_key`` is ``task:<task id>`` and everything it says comes from the task's
  row, so publishing it again after a crash is a duplicate, never a second event.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from larkbot.canonical.events import RuntimeEvent
from larkbot.canonical.names import Platform

TaskStatus = Literal["running", "done", "failed", "killed", "lost"]
#: The runtime event's ``type``.
TASK_DONE: Final = "task_done"
TASK_ID: Final = re.compile(r"^task_[0-9a-f]{10}$")
#: Characters of the command shown in the completion event.
EVENT_COMMAND_CHARS: Final = 200
LANG: Final = "C.UTF-8"


@dataclass(frozen=True, slots=True)
class Task:
    task_id: str
    platform: str
    chat_id: str
    call_key: str
    host: str
    #: The process group of the task (its launcher's pid); ``None`` until the command was started.
    pgid: int | None
    command: str
    intention: str | None
    status: TaskStatus
    #: The command outlived its ``bash`` call; its completion is announced by a runtime event.
    background: bool
    #: The completion event was published (or none is due: a short command, a killed task).
    announced: bool
    exit_code: int | None
    output_bytes: int | None
    started_at_ms: int
    finished_at_ms: int | None

    @property
    def running(self) -> bool:
        return self.status == "running"

    @property
    def duration_s(self) -> float | None:
        if self.finished_at_ms is None:
            return None
        return max(0, self.finished_at_ms - self.started_at_ms) / 1000


def finished_status(exit_code: int) -> TaskStatus:
    return "done" if exit_code == 0 else "failed"


def parse_exit_code(text: str) -> int | None:
    """The exit status the wrapper wrote (one decimal line), or ``None`` when the file says anything else."""
    stripped = text.strip()
    return int(stripped) if stripped.isascii() and stripped.isdigit() else None


def wait_cap_s(requested_s: float, max_s: float, deadline_ms: int, now_ms: int, reserve_ms: int) -> float:
    """How long a ``bash`` call waits for its command (see the module docstring); never negative."""
    left_s = (deadline_ms - now_ms - reserve_ms) / 1000
    return max(0.0, min(requested_s, max_s, left_s))


def child_env(
    path: str, home: str, passthrough: tuple[str, ...], environ: Mapping[str, str]
) -> dict[str, str]:
    """A command's whole environment: built here, never inherited (a name not set in ``environ`` is left
    out)."""
    env = {"PATH": path, "HOME": home, "LANG": LANG}
    for name in passthrough:
        value = environ.get(name)
        if value is not None:
            env[name] = value
    return env


def leaking(passthrough: tuple[str, ...], environ: Mapping[str, str], secrets: list[str]) -> list[int]:
    """Indexes of passed-through variables whose value holds one of the service's secrets."""
    return [
        i
        for i, name in enumerate(passthrough)
        if (value := environ.get(name)) and any(s and s in value for s in secrets)
    ]


def ends(total: int, limit: int) -> tuple[int, int]:
    """How many bytes to show from the beginning and from the end of ``total`` bytes of output, at most
    ``limit`` in all (the whole output when it fits: ``(total, 0)``)."""
    if total <= limit:
        return total, 0
    head = limit // 2
    return head, limit - head


def shown(head: bytes, tail: bytes, total: int) -> str:
    """The output as the model sees it: ``head`` and ``tail`` around a marker for what lies between."""
    omitted = total - len(head) - len(tail)
    if omitted <= 0:
        return decode(head + tail)
    return f"{decode(head)}\n[... {omitted} bytes omitted ...]\n{decode(tail)}"


def shown_tail(tail: bytes, total: int) -> str:
    """The end of the output, with a marker when something before it is left out."""
    omitted = total - len(tail)
    return decode(tail) if omitted <= 0 else f"[... {omitted} earlier bytes ...]\n{decode(tail)}"


def decode(data: bytes) -> str:
    # A cut can split a multi-byte character; it shows as one replacement character.
    return data.decode("utf-8", errors="replace")


def short_result(exit_code: int | None, seconds: float, output: str) -> str:
    status = f"exit status {exit_code}" if exit_code is not None else "ended without an exit status"
    return f"{status} after {seconds:.1f} s\n{output or '(no output)'}"


def background_result(task_id: str, cap_s: float, output: str) -> str:
    head = (
        f"still running after {cap_s:.1f} s: it continues as background task {task_id}. Its completion "
        "will arrive as a runtime event; read_task_output shows its output, kill_task stops it."
    )
    return f"{head}\noutput so far:\n{output}" if output else f"{head}\n(no output yet)"


def state_line(task: Task) -> str:
    """One line saying where a task stands (``kill_task`` / ``read_task_output`` results)."""
    if task.running:
        return f"task {task.task_id} is running"
    if task.status == "killed":
        return f"task {task.task_id} was killed"
    if task.status == "lost":
        return f"task {task.task_id} ended without an exit status (its process disappeared)"
    return f"task {task.task_id} finished with exit status {task.exit_code}"


def page(data: bytes, start: int, total: int) -> str:
    """A ``read_task_output`` page: where it lies in the output, then the text."""
    end = start + len(data)
    more = f"; next offset {end}" if end < total else ""
    return f"bytes {start}-{end} of {total}{more}\n{decode(data)}"


def resolve_offset(offset: int, total: int) -> int:
    """A negative offset counts from the end; both are clamped to the file."""
    return max(0, total + offset) if offset < 0 else min(offset, total)


def completion_event(
    task: Task, output_tail: str, *, received_at_ms: int, utc_offset_min: int
) -> RuntimeEvent:
    """The runtime event announcing a finished background task (see the module docstring)."""
    assert task.finished_at_ms is not None
    attributes: list[tuple[str, str]] = [("task_id", task.task_id), ("status", task.status)]
    if task.exit_code is not None:
        attributes.append(("exit_status", str(task.exit_code)))
    duration = task.duration_s
    attributes.append(("duration_s", f"{duration or 0.0:.1f}"))
    attributes.append(("output_bytes", str(task.output_bytes or 0)))
    if task.intention:
        attributes.append(("intention", task.intention))
    command = " ".join(task.command.split())
    if len(command) > EVENT_COMMAND_CHARS:
        command = command[: EVENT_COMMAND_CHARS - 3] + "..."
    attributes.append(("command", command))
    return RuntimeEvent(
        platform=Platform(task.platform),
        chat_id=task.chat_id,
        dedup_key=f"task:{task.task_id}",
        received_at_ms=received_at_ms,
        timestamp_sec=task.finished_at_ms // 1000,
        utc_offset_min=utc_offset_min,
        type=TASK_DONE,
        attributes=tuple(attributes),
        text=output_tail or None,
    )
