"""The shell tools (``bash``, ``kill_task``, ``read_task_output``) and the watcher of background tasks.
The rules are in :mod:`.core.shell`, the operating-system side in :mod:`.processes`; docs/driver.md
"Shell tools" is the operator's view. Not a sandbox. One module, ~400 lines: the three tools and the
watcher share the task store and the look at a task's files; split, each half would import the other.

Each ``bash`` call is a task: a row in ``driver_shell_tasks``, written before the command starts, and a
directory of files (:mod:`.processes`). The command runs detached from the driver, so a task outlives the
driver process that started it.

Decisions:

- A task's end is read from its ``status`` file, never from a wait on a child: the same look serves a
  call waiting for its command (every 10 ms, doubling to 100 ms), the watcher (every
  ``shell.poll_interval_s``) and a driver that restarted while tasks ran. A task with no status file
  and no live process left (killed from outside, the machine restarted) is ``lost``.
- Tasks belong to the host that started them (``socket.gethostname()``); each replica watches its host's
  rows. A running row whose ``background`` is unset belongs to a call still waiting for it; once it is
  older than ``shell.max_timeout_s`` (no call waits longer) it is adopted as a background task, which is
  how a command whose call died with its driver still gets announced.
- Ending a task is a conditional update of its row (``running`` → its end): whoever writes it counts it
  and, for a background task, announces it. Announcing is publish, then mark announced: a crash between
  the two publishes again after the restart, and the event's ``Nats-Msg-Id`` and the pipeline's dedup key
  make the copy a duplicate.
- The command text is logged at debug only; task ids and outcomes at info.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from larkbot.canonical.errors import ConfigError
from larkbot.canonical.events import RuntimeEvent
from larkbot.driver.tools.core import tools
from larkbot.driver.wake.clock import Clock
from larkbot.driver.wake.core.protocol import ToolRun
from larkbot.runtime.config import LarkbotConfig, ShellSettings

from .. import metrics
from . import processes
from .core import shell as core
from .core.shell import Task, TaskStatus
from .processes import Ended, TaskFiles
from .task_store import TaskStore

log = logging.getLogger(__name__)

Publish = Callable[[RuntimeEvent], Awaitable[None]]
#: How often the watcher removes expired tasks.
SWEEP_INTERVAL_S: Final = 3600.0


def shell_dirs(settings: ShellSettings, data_dir: str) -> tuple[Path, Path]:
    """The working directory and the tasks' directory (defaults under ``<data_dir>/shell``)."""
    base = Path(data_dir) / "shell"
    working = Path(settings.working_dir) if settings.working_dir else base / "work"
    return working, Path(settings.output_dir) if settings.output_dir else base / "tasks"


def check_settings(config: LarkbotConfig, environ: Mapping[str, str]) -> None:
    """What validating the file cannot see: the environment and the file system."""
    settings = config.shell
    leaks = core.leaking(settings.env_passthrough, environ, config.secret_values())
    if leaks:
        problems = [
            (f"shell.env_passthrough.{i}", "its value holds one of the service's secrets") for i in leaks
        ]
        raise ConfigError(*problems[0], more=problems[1:])
    if any(chat.shell_enabled for chat in config.chats.values()):
        executable = settings.executable
        if not (os.path.isabs(executable) and os.access(executable, os.X_OK)):
            raise ConfigError("shell.executable", "must be the absolute path of an executable file")


class ShellTasks:
    """One per driver process: runs ``bash`` calls, answers ``kill_task`` / ``read_task_output`` and
    watches this host's tasks."""

    def __init__(
        self,
        store: TaskStore,
        settings: ShellSettings,
        clock: Clock,
        *,
        host: str,
        working_dir: Path,
        output_dir: Path,
        environ: Mapping[str, str],
        publish: Publish,
        utc_offset_min: Callable[[str, str], int],
    ) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock
        self.host = host
        self.working_dir = working_dir
        self.output_dir = output_dir
        self.env = core.child_env(settings.path, str(working_dir), settings.env_passthrough, environ)
        self.publish = publish
        self.utc_offset_min = utc_offset_min
        #: Tasks whose ``bash`` call waits for them in this process.
        self._waiting: set[str] = set()
        #: When the watcher next removes expired tasks (``time.monotonic``; at its first round).
        self._next_sweep = 0.0

    def prepare(self) -> None:
        self.working_dir.mkdir(parents=True, exist_ok=True)
        self.output_dir.mkdir(parents=True, exist_ok=True, mode=0o700)

    def files(self, task_id: str) -> TaskFiles:
        return TaskFiles(self.output_dir / task_id)

    # -- the tools ------------------------------------------------------------------------------------
    async def bash(
        self,
        platform: str,
        chat_id: str,
        args: dict[str, Any],
        call_key: str,
        deadline_ms: int,
        reserve_ms: int,
    ) -> tuple[bool, str]:
        """Run ``args["command"]``: its result, or its hand-over to the background (:mod:`.core.shell`)."""
        existing = await self.store.by_call(call_key)
        if existing is not None:
            return True, _ran_already(existing)
        running = await self.store.running_count(self.host)
        if running >= self.settings.max_tasks:
            metrics.SHELL_CALLS.labels("refused").inc()
            return False, (
                f"refused: the most tasks this host runs at once ({running}) are running; stop one with "
                "kill_task or wait for one to finish"
            )
        task = _new_task(platform, chat_id, call_key, self.host, args, self.clock.now_ms())
        files = self.files(task.task_id)
        try:
            await asyncio.to_thread(processes.create, files, task.command)
        except OSError as exc:
            return self._not_started(task, exc)
        stored = await self.store.add(task)
        if stored.task_id != task.task_id:
            await asyncio.to_thread(processes.remove, files.task_dir)
            return True, _ran_already(stored)
        log.info("shell task %s starting", task.task_id)
        log.debug("shell task %s runs: %s", task.task_id, task.command)
        self._waiting.add(task.task_id)
        try:
            try:
                pgid = await asyncio.to_thread(
                    processes.launch, files, self.settings.executable, self.working_dir, self.env
                )
            except OSError as exc:
                await self.store.finish(
                    task.task_id,
                    "failed",
                    exit_code=None,
                    output_bytes=0,
                    finished_at_ms=self.clock.now_ms(),
                    announced=True,
                )
                return self._not_started(task, exc)
            await self.store.started(task.task_id, pgid)
            now = self.clock.now_ms()
            cap = core.wait_cap_s(
                float(args["timeout_seconds"]), self.settings.max_timeout_s, deadline_ms, now, reserve_ms
            )
            started = time.monotonic()
            end = await self._wait(files, cap)
            waited = time.monotonic() - started
            if end is None:
                await self.store.to_background(task.task_id)
        finally:
            self._waiting.discard(task.task_id)
        output = await asyncio.to_thread(processes.read_ends, files.output, self.settings.max_output_bytes)
        if end is None:
            metrics.SHELL_CALLS.labels("timeout_to_task").inc()
            log.info("shell task %s continues in the background", task.task_id)
            return True, core.background_result(task.task_id, cap, output)
        await self.store.finish(
            task.task_id,
            core.finished_status(end.exit_code) if end.exit_code is not None else "lost",
            exit_code=end.exit_code,
            output_bytes=end.output_bytes,
            finished_at_ms=self.clock.now_ms(),
            announced=True,
        )
        metrics.SHELL_CALLS.labels("ok").inc()
        log.info("shell task %s ended with exit status %s", task.task_id, end.exit_code)
        return True, core.short_result(end.exit_code, waited, output)

    def _not_started(self, task: Task, exc: OSError) -> tuple[bool, str]:
        metrics.SHELL_CALLS.labels("error").inc()
        log.warning("shell task %s could not start: %s", task.task_id, type(exc).__name__)
        return False, f"error: the command could not be started ({type(exc).__name__})"

    async def _wait(self, files: TaskFiles, cap_s: float) -> Ended | None:
        """The task's end if it comes within ``cap_s`` seconds.

        A poll of the task's status file, not a retry: nothing failed, the command is still running, and
        its end is read from the file (never from a wait on the child, see the module docstring). The
        look grows from 10 ms to 100 ms so a short command answers at once and a long one costs ten looks
        a second; ``cap_s`` bounds it. The retry policy (``runtime.retry``) is for failures."""
        loop = asyncio.get_running_loop()
        until = loop.time() + cap_s
        delay = 0.01
        while (end := await asyncio.to_thread(processes.ended, files)) is None:
            left = until - loop.time()
            if left <= 0:
                return None
            await asyncio.sleep(min(delay, left))
            delay = min(delay * 2, 0.1)
        return end

    async def _of_chat(self, platform: str, chat_id: str, task_id: str) -> Task | str:
        task = await self.store.get(task_id) if core.TASK_ID.match(task_id) else None
        if task is None or (task.platform, task.chat_id) != (platform, chat_id):
            return f"error: no task {task_id!r} in this chat"
        return task

    async def kill(self, platform: str, chat_id: str, task_id: str) -> tuple[bool, str]:
        task = await self._of_chat(platform, chat_id, task_id)
        if isinstance(task, str):
            return False, task
        if task.running and task.host == self.host:
            # It may have ended since the watcher last looked: then it is not killed, it ended.
            end = await asyncio.to_thread(processes.ended, self.files(task.task_id))
            if end is not None:
                await self._finish(task, end)
                task = await self.store.get(task.task_id) or task
        if not task.running:
            return True, f"nothing to stop: {core.state_line(task)}"
        if task.host != self.host:
            return (
                False,
                f"error: task {task.task_id} runs on another host ({task.host}); it is stopped there",
            )
        output_bytes = await asyncio.to_thread(processes.size, self.files(task.task_id).output)
        won = await self.store.finish(
            task.task_id,
            "killed",
            exit_code=None,
            output_bytes=output_bytes,
            finished_at_ms=self.clock.now_ms(),
            announced=True,
        )
        if not won:
            return True, f"nothing to stop: {core.state_line(await self.store.get(task.task_id) or task)}"
        stopped = task.pgid is None or await asyncio.to_thread(
            processes.stop_group, task.pgid, self.settings.kill_grace_s
        )
        metrics.BACKGROUND_TASKS.labels("killed").inc()
        log.info("shell task %s killed", task.task_id)
        if not stopped:
            return True, f"task {task.task_id} killed; some of its processes have not exited yet"
        return True, f"task {task.task_id} killed"

    async def read(self, platform: str, chat_id: str, args: dict[str, Any]) -> tuple[bool, str]:
        task = await self._of_chat(platform, chat_id, args["task_id"])
        if isinstance(task, str):
            return False, task
        most = self.settings.max_output_bytes
        limit = min(int(args.get("limit", most)), most)
        output = self.files(task.task_id).output
        found = await asyncio.to_thread(processes.read_range, output, int(args.get("offset", 0)), limit)
        if found is None:
            return False, f"{core.state_line(task)}; its output is not kept on this host"
        data, start, total = found
        return True, f"{core.state_line(task)}\n{core.page(data, start, total)}"

    # -- the watcher ----------------------------------------------------------------------------------
    async def watch_once(self) -> None:
        """One round of the watcher (run every ``poll_interval_s`` by ``ServiceContext.every``): look at
        this host's open tasks; remove expired ones when an hour has passed since the last removal."""
        await self.poll_once()
        if time.monotonic() >= self._next_sweep:
            self._next_sweep = time.monotonic() + SWEEP_INTERVAL_S
            await self.sweep_once()

    async def poll_once(self) -> None:
        """One look at every open task of this host: record the ends, announce the background ones."""
        adopt_before = self.clock.now_ms() - round(self.settings.max_timeout_s * 1000)
        for task in await self.store.open(self.host):
            if task.running:
                if task.task_id in self._waiting:
                    continue
                if not task.background:
                    if task.started_at_ms > adopt_before:
                        continue  # a call of another replica on this host still waits for it
                    await self.store.to_background(task.task_id)
                    task = await self.store.get(task.task_id) or task
                seen = await asyncio.to_thread(processes.look, self.files(task.task_id), task.pgid)
                if seen is True:
                    continue
                await self._finish(task, seen if isinstance(seen, Ended) else None)
                task = await self.store.get(task.task_id) or task
            if not task.running and task.background and not task.announced:
                await self.announce(task)
        metrics.RUNNING_TASKS.set(await self.store.running_count(self.host))

    async def _finish(self, task: Task, end: Ended | None) -> None:
        """Record a running task's end (``None``: lost)."""
        now = self.clock.now_ms()
        status: TaskStatus = "lost"
        if end is not None and end.exit_code is not None:
            status = core.finished_status(end.exit_code)
        # When it ended, on this clock: it may have ended while no driver was running.
        at_ms = max(task.started_at_ms, now - end.age_ms) if end is not None else now
        output = self.files(task.task_id).output
        won = await self.store.finish(
            task.task_id,
            status,
            exit_code=end.exit_code if end is not None else None,
            output_bytes=end.output_bytes
            if end is not None
            else await asyncio.to_thread(processes.size, output),
            finished_at_ms=at_ms,
            announced=not task.background,
        )
        if won and task.background:
            metrics.BACKGROUND_TASKS.labels(status).inc()
            log.info("shell task %s ended: %s", task.task_id, status)

    async def announce(self, task: Task) -> None:
        """Publish the completion event of a finished background task, then mark it announced."""
        output = self.files(task.task_id).output
        tail = await asyncio.to_thread(processes.read_tail, output, self.settings.event_output_bytes)
        event = core.completion_event(
            task,
            tail,
            received_at_ms=self.clock.now_ms(),
            utc_offset_min=self.utc_offset_min(task.platform, task.chat_id),
        )
        await self.publish(event)
        await self.store.announced(task.task_id)
        log.info("shell task %s announced", task.task_id)

    async def sweep_once(self) -> int:
        """Remove this host's tasks that finished more than ``retention_days`` ago, rows and files; returns
        how many."""
        cutoff_ms = self.clock.now_ms() - round(self.settings.retention_days * 86_400_000)
        expired = await self.store.expired(self.host, cutoff_ms)
        for task_id in expired:
            await asyncio.to_thread(processes.remove, self.files(task_id).task_dir)
        if expired:
            log.info("removed %d expired shell tasks", len(expired))
        return len(expired)


def _new_task(
    platform: str, chat_id: str, call_key: str, host: str, args: dict[str, Any], now_ms: int
) -> Task:
    return Task(
        task_id=f"task_{secrets.token_hex(5)}",
        platform=platform,
        chat_id=chat_id,
        call_key=call_key,
        host=host,
        pgid=None,
        command=args["command"],
        intention=args.get("intention") or None,
        status="running",
        background=False,
        announced=False,
        exit_code=None,
        output_bytes=None,
        started_at_ms=now_ms,
        finished_at_ms=None,
    )


def _ran_already(task: Task) -> str:
    # The step is redone after a crash: its command ran (or runs) already and is not run twice.
    return f"this call ran already as task {task.task_id}: {core.state_line(task)}"


@dataclass(frozen=True, slots=True)
class ShellAccess:
    """The shell side of one chat's wake-up."""

    tasks: ShellTasks
    #: The chat's ``shell_enabled``.
    enabled: bool
    #: Time a ``bash`` call leaves in the turn for the model call that reads its result.
    reserve_ms: int

    async def call(self, call: ToolRun, platform: str, chat_id: str) -> tuple[bool, str]:
        if not self.enabled:
            if call.name == tools.BASH:
                metrics.SHELL_CALLS.labels("refused").inc()
            return False, "error: the shell tools are off in this chat"
        if call.name == tools.BASH:
            return await self.tasks.bash(
                platform, chat_id, call.args, call.idempotency_key, call.deadline_ms, self.reserve_ms
            )
        if call.name == tools.KILL_TASK:
            return await self.tasks.kill(platform, chat_id, call.args["task_id"])
        return await self.tasks.read(platform, chat_id, call.args)
