"""The shell tools: ``bash`` (output, exit status, truncation, the time cap turning a command into a
background task, the child's environment), ``read_task_output``, ``kill_task``, the watcher (completion
announced once as a runtime event, a restarted driver resuming, lost tasks, the retention sweep), the
configuration's checks, and a background task's completion waking the chat on the real bus.

Commands wait on a FIFO the test writes to, so nothing here depends on how long a command takes."""

from __future__ import annotations

import asyncio
import errno
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from larkbot.canonical.errors import ConfigError
from larkbot.canonical.events import RuntimeEvent
from larkbot.canonical.fingerprint import event_msg_id
from larkbot.canonical.llm import LLMRequest, TextPart, ToolResultMessage, UserMessage
from larkbot.driver import metrics
from larkbot.driver.app import MIGRATIONS
from larkbot.driver.shell import processes
from larkbot.driver.shell.core import shell as core
from larkbot.driver.shell.shell import ShellAccess, ShellTasks, check_settings
from larkbot.driver.shell.task_store import TaskStore
from larkbot.driver.tables import shell_tasks
from larkbot.driver.tools.core import tools
from larkbot.driver.wake.clock import ManualClock
from larkbot.driver.wake.core.turn import ToolRun
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import LarkbotConfig, ShellSettings, parse_config
from larkbot.runtime.db import create_engine, migrate
from larkbot.testkit.driver.harness import decide, end_turn, world
from larkbot.testkit.driver.synthetic import response, tool_call

T0 = 1_800_000_000_000
CHAT = ("feishu", "oc_shell")
WAIT_S = 30.0


async def until(
    predicate: Callable[[], Awaitable[bool] | bool], what: str, timeout_s: float = WAIT_S
) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        result = predicate()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def release(fifo: Path, data: str = "payload\n") -> None:
    """Write to ``fifo`` once its reader (a task's command) has it open."""

    def attempt() -> bool:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # no reader yet
                return False
            raise
        try:
            os.write(fd, data.encode())
        finally:
            os.close(fd)
        return True

    await until(attempt, f"a reader of {fifo.name}")


def sample(counter: Any, *labels: str) -> float:
    return float(counter.labels(*labels)._value.get())


class Shell:
    """A ``ShellTasks`` on a real database and real files, with a manual clock and the published events
    collected."""

    def __init__(self, engine_url: str, root: Path, **settings: Any) -> None:
        self.root = root
        self.engine = create_engine(engine_url)
        self.published: list[RuntimeEvent] = []
        self.settings = ShellSettings(
            working_dir=str(root / "work"),
            output_dir=str(root / "tasks"),
            max_timeout_s=30,
            **settings,
        )
        self.clock = ManualClock(T0)
        self.store = TaskStore(self.engine)
        self.keys = iter(range(1_000_000))

    def tasks(self, environ: dict[str, str] | None = None, host: str = "host-a") -> ShellTasks:
        tasks = ShellTasks(
            self.store,
            self.settings,
            self.clock,
            host=host,
            working_dir=self.root / "work",
            output_dir=self.root / "tasks",
            environ=environ or {},
            publish=self._publish,
            utc_offset_min=lambda _platform, _chat: 480,
        )
        tasks.prepare()
        return tasks

    async def _publish(self, event: RuntimeEvent) -> None:
        self.published.append(event)

    async def bash(
        self,
        tasks: ShellTasks,
        command: str,
        timeout_s: float = 20,
        *,
        chat: tuple[str, str] = CHAT,
        **extra: Any,
    ) -> tuple[bool, str]:
        key = extra.pop("key", None) or f"key-{next(self.keys)}"
        args = {"command": command, "timeout_seconds": timeout_s, **extra}
        return await tasks.bash(*chat, args, key, T0 + 60_000, 0)


@pytest.fixture
async def shell(tmp_path: Path) -> AsyncIterator[Shell]:
    s = Shell(f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}", tmp_path)
    await migrate(s.engine, MIGRATIONS)
    try:
        yield s
    finally:
        await s.engine.dispose()


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "gate"
    os.mkfifo(path)
    return path


def task_id_in(text: str) -> str:
    found = re.search(r"task_[0-9a-f]{10}", text)
    assert found is not None, text
    return found.group()


# -- the pure rules -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("total", "limit", "expected"),
    [(10, 20, (10, 0)), (20, 20, (20, 0)), (21, 20, (10, 10)), (1000, 7, (3, 4))],
)
def test_output_ends_within_the_limit(total: int, limit: int, expected: tuple[int, int]) -> None:
    assert core.ends(total, limit) == expected


def test_output_as_the_model_sees_it() -> None:
    assert core.shown(b"abc", b"", 3) == "abc"
    assert core.shown(b"ab", b"yz", 10) == "ab\n[... 6 bytes omitted ...]\nyz"
    assert core.shown_tail(b"xyz", 3) == "xyz"
    assert core.shown_tail(b"xyz", 10) == "[... 7 earlier bytes ...]\nxyz"
    # A cut through a multi-byte character shows one replacement character, never an error.
    assert core.shown("é".encode()[:1], b"", 1) == "\ufffd"
    assert [core.parse_exit_code(t) for t in ("0\n", "137\n", "", "x", "-1")] == [0, 137, None, None, None]


def test_the_completion_event_is_the_same_event_whenever_it_is_published() -> None:
    task = core.Task(
        task_id="task_0123456789",
        platform="feishu",
        chat_id="oc_1",
        call_key="k",
        host="h",
        pgid=1,
        command="make   test\n",
        intention=None,
        status="failed",
        background=True,
        announced=False,
        exit_code=2,
        output_bytes=5,
        started_at_ms=T0,
        finished_at_ms=T0 + 61_500,
    )
    first = core.completion_event(task, "tail", received_at_ms=T0 + 62_000, utc_offset_min=480)
    again = core.completion_event(task, "tail", received_at_ms=T0 + 900_000, utc_offset_min=0)
    assert (
        event_msg_id(first)
        == event_msg_id(again)
        == f"feishu:task:task_0123456789#{event_msg_id(first)[-16:]}"
    )
    assert first.attributes == (
        ("task_id", "task_0123456789"),
        ("status", "failed"),
        ("exit_status", "2"),
        ("duration_s", "61.5"),
        ("output_bytes", "5"),
        ("command", "make test"),
    )
    assert first.timestamp_sec == (T0 + 61_500) // 1000


# -- bash ---------------------------------------------------------------------------------------------
async def test_a_short_command_returns_its_exit_status_and_output(shell: Shell) -> None:
    tasks = shell.tasks()
    before = sample(metrics.SHELL_CALLS, "ok")
    ok, text = await shell.bash(tasks, "echo out; echo err >&2; printf 'café'; exit 3")
    assert ok
    first, _, body = text.partition("\n")
    assert re.fullmatch(r"exit status 3 after \d+\.\d s", first)
    assert body == "out\nerr\ncafé"
    assert sample(metrics.SHELL_CALLS, "ok") == before + 1
    assert await shell.store.open("host-a") == ()  # ended; a short command has nothing to announce

    ok, text = await shell.bash(tasks, "true")
    assert text.endswith("\n(no output)")


async def test_long_output_keeps_its_head_and_tail(shell: Shell) -> None:
    shell.settings = shell.settings.model_copy(update={"max_output_bytes": 200})
    tasks = shell.tasks()
    _, text = await shell.bash(tasks, "seq 1 5000")
    body = text.partition("\n")[2]
    total = sum(len(f"{n}\n") for n in range(1, 5001))
    assert body.startswith("1\n2\n3\n")
    assert body.endswith("4999\n5000\n")
    assert f"\n[... {total - 200} bytes omitted ...]\n" in body
    assert len(body) < 200 + 40


async def test_a_command_still_running_at_its_cap_becomes_a_background_task(shell: Shell, fifo: Path) -> None:
    tasks = shell.tasks()
    before = sample(metrics.SHELL_CALLS, "timeout_to_task"), sample(metrics.BACKGROUND_TASKS, "done")
    ok, text = await shell.bash(tasks, f"echo started; cat {fifo}; echo finished", 0.2, intention="a build")
    assert ok
    task_id = task_id_in(text)
    assert text.startswith(f"still running after 0.2 s: it continues as background task {task_id}.")
    # What the command wrote within its 0.2 s, if it got that far on a loaded machine.
    assert text.endswith(("output so far:\nstarted\n", "(no output yet)"))
    assert sample(metrics.SHELL_CALLS, "timeout_to_task") == before[0] + 1

    await tasks.poll_once()  # still running: nothing to announce
    assert shell.published == []
    (row,) = await shell.store.open("host-a")
    assert (row.status, row.background, row.announced) == ("running", True, False)

    shell.clock.advance(5000)
    await release(fifo)
    await until(lambda: (shell.root / "tasks" / task_id / "status").exists(), "the task's end")
    await tasks.poll_once()
    (event,) = shell.published
    assert event.dedup_key == f"task:{task_id}"
    assert (event.platform.value, event.chat_id) == CHAT
    assert event.type == "task_done"
    attributes = dict(event.attributes)
    assert [k for k, _ in event.attributes] == [
        "task_id",
        "status",
        "exit_status",
        "duration_s",
        "output_bytes",
        "intention",
        "command",
    ]
    assert attributes["task_id"] == task_id
    assert (attributes["status"], attributes["exit_status"]) == ("done", "0")
    assert attributes["intention"] == "a build"
    assert attributes["command"] == f"echo started; cat {fifo}; echo finished"
    assert attributes["output_bytes"] == str(len("started\npayload\nfinished\n"))
    assert event.text == "started\npayload\nfinished\n"
    assert event.received_at_ms == T0 + 5000
    assert sample(metrics.BACKGROUND_TASKS, "done") == before[1] + 1

    # Announced once: later passes publish nothing.
    await tasks.poll_once()
    assert len(shell.published) == 1
    assert await shell.store.open("host-a") == ()


async def test_the_wait_is_bounded_by_the_turn_deadline(shell: Shell, fifo: Path) -> None:
    assert core.wait_cap_s(30, 60, deadline_ms=T0 + 15_000, now_ms=T0 + 4_000, reserve_ms=2_000) == 9.0
    assert core.wait_cap_s(30, 5, deadline_ms=T0 + 15_000, now_ms=T0, reserve_ms=2_000) == 5.0
    assert core.wait_cap_s(1, 60, deadline_ms=T0 + 15_000, now_ms=T0, reserve_ms=2_000) == 1.0
    assert core.wait_cap_s(30, 60, deadline_ms=T0 + 1_000, now_ms=T0, reserve_ms=2_000) == 0.0
    tasks = shell.tasks()
    # No time left in the turn: the command goes to the background at once.
    ok, text = await tasks.bash(
        *CHAT, {"command": f"cat {fifo}", "timeout_seconds": 20}, "k", T0 + 1_000, 2_000
    )
    assert ok
    assert text.startswith("still running after 0.0 s")
    await release(fifo)


async def test_a_command_gets_only_the_environment_it_is_given(shell: Shell) -> None:
    shell.settings = shell.settings.model_copy(update={"env_passthrough": ("VISIBLE", "UNSET_HERE")})
    environ = {"VISIBLE": "yes", "OPENAI_API_KEY": "sk-driver-secret", "NATS_URL": "nats://x", "PATH": "/x"}
    tasks = shell.tasks(environ)
    _, text = await shell.bash(tasks, "env | sort")
    lines = text.partition("\n")[2].splitlines()
    env = dict(line.split("=", 1) for line in lines)
    # What the shell itself adds (PWD, SHLVL, _) aside, exactly what was built for it.
    assert {k: v for k, v in env.items() if k not in ("PWD", "SHLVL", "_", "OLDPWD")} == {
        "HOME": str(shell.root / "work"),
        "LANG": "C.UTF-8",
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "VISIBLE": "yes",
    }
    assert "sk-driver-secret" not in text
    assert env["PWD"] == str(shell.root / "work")


async def test_the_real_environment_of_the_driver_does_not_reach_a_command(
    shell: Shell, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-driver-only")
    tasks = shell.tasks(dict(os.environ))
    _, text = await shell.bash(tasks, "env")
    assert "sk-ant-driver-only" not in text
    assert "ANTHROPIC_API_KEY" not in text


async def test_a_redone_call_does_not_run_its_command_twice(shell: Shell) -> None:
    tasks = shell.tasks()
    marker = shell.root / "work" / "count"
    _, first = await shell.bash(tasks, f"echo x >> {marker}; echo ran", key="lb-same")
    _, again = await shell.bash(tasks, f"echo x >> {marker}; echo ran", key="lb-same")
    assert first.endswith("\nran\n")
    assert again.startswith("this call ran already as task task_")
    assert again.endswith("finished with exit status 0")
    assert marker.read_text() == "x\n"


async def test_bash_is_refused_while_the_most_tasks_run_and_where_the_shell_is_off(
    shell: Shell, fifo: Path
) -> None:
    shell.settings = shell.settings.model_copy(update={"max_tasks": 1})
    tasks = shell.tasks()
    refused = sample(metrics.SHELL_CALLS, "refused")
    _, text = await shell.bash(tasks, f"cat {fifo}", 0.1)
    task_id = task_id_in(text)
    ok, text = await shell.bash(tasks, "echo hi")
    assert not ok
    assert text.startswith("refused: the most tasks this host runs at once (1) are running")
    assert sample(metrics.SHELL_CALLS, "refused") == refused + 1

    off = ShellAccess(tasks, enabled=False, reserve_ms=0)
    run = ToolRun(0, 0, tools.BASH, {"command": "echo hi", "timeout_seconds": 1}, "k-off", T0 + 60_000)
    assert await off.call(run, *CHAT) == (False, "error: the shell tools are off in this chat")
    assert sample(metrics.SHELL_CALLS, "refused") == refused + 2
    read = ToolRun(0, 1, tools.READ_TASK_OUTPUT, {"task_id": task_id}, "k-off-2", T0 + 60_000)
    assert (await off.call(read, *CHAT))[0] is False
    await release(fifo)


async def test_a_command_that_cannot_start_is_an_error_result(shell: Shell) -> None:
    tasks = shell.tasks()
    (shell.root / "work").rmdir()
    errors = sample(metrics.SHELL_CALLS, "error")
    assert await shell.bash(tasks, "echo hi") == (
        False,
        "error: the command could not be started (FileNotFoundError)",
    )
    assert sample(metrics.SHELL_CALLS, "error") == errors + 1
    (row,) = await _all(shell)
    assert (row.status, row.announced) == ("failed", True)


# -- read_task_output and kill_task -------------------------------------------------------------------
async def test_read_task_output_pages_through_the_output(shell: Shell) -> None:
    shell.settings = shell.settings.model_copy(update={"max_output_bytes": 300})
    tasks = shell.tasks()
    await shell.bash(tasks, "seq 1 1000")
    (row,) = [t for t in await _all(shell) if t.command == "seq 1 1000"]
    total = sum(len(f"{n}\n") for n in range(1, 1001))

    ok, page = await tasks.read(*CHAT, {"task_id": row.task_id, "limit": 10})
    assert ok
    state = f"task {row.task_id} finished with exit status 0"
    assert page == f"{state}\nbytes 0-10 of {total}; next offset 10\n1\n2\n3\n4\n5\n"
    _, page = await tasks.read(*CHAT, {"task_id": row.task_id, "offset": 10, "limit": 6})
    assert page.endswith(f"bytes 10-16 of {total}; next offset 16\n6\n7\n8\n")
    _, page = await tasks.read(*CHAT, {"task_id": row.task_id, "offset": -5})
    assert page.endswith(f"bytes {total - 5}-{total} of {total}\n1000\n")
    # At most max_output_bytes at once.
    _, page = await tasks.read(*CHAT, {"task_id": row.task_id, "limit": 100_000})
    assert f"bytes 0-300 of {total}; next offset 300" in page

    assert await tasks.read(*CHAT, {"task_id": "task_0000000000"}) == (
        False,
        "error: no task 'task_0000000000' in this chat",
    )
    other = await tasks.read("feishu", "oc_other", {"task_id": row.task_id})
    assert other == (False, f"error: no task {row.task_id!r} in this chat")
    assert (await tasks.read(*CHAT, {"task_id": "../../etc"}))[0] is False


async def test_kill_task_stops_the_whole_process_group(shell: Shell, fifo: Path) -> None:
    shell.settings = shell.settings.model_copy(update={"kill_grace_s": 0.2})
    tasks = shell.tasks()
    killed = sample(metrics.BACKGROUND_TASKS, "killed")
    # The command ignores SIGTERM (and so does its child): SIGKILL follows after the grace.
    _, text = await shell.bash(tasks, f"trap '' TERM; cat {fifo} & wait", 0.1)
    task_id = task_id_in(text)
    (row,) = await shell.store.open("host-a")
    assert row.pgid is not None
    assert processes.group_alive(row.pgid)

    assert await tasks.kill("feishu", "oc_other", task_id) == (
        False,
        f"error: no task {task_id!r} in this chat",
    )
    assert await tasks.kill(*CHAT, task_id) == (True, f"task {task_id} killed")
    assert not processes.group_alive(row.pgid)
    assert sample(metrics.BACKGROUND_TASKS, "killed") == killed + 1
    assert await tasks.kill(*CHAT, task_id) == (True, f"nothing to stop: task {task_id} was killed")
    # A killed task is not announced: the model asked for it.
    await tasks.poll_once()
    assert shell.published == []
    stored = await shell.store.get(task_id)
    assert stored is not None
    assert (stored.status, stored.announced) == ("killed", True)


async def test_killing_a_task_that_already_ended_records_its_end(shell: Shell, fifo: Path) -> None:
    tasks = shell.tasks()
    _, text = await shell.bash(tasks, f"cat {fifo}", 0.1)
    task_id = task_id_in(text)
    await release(fifo)
    await until(lambda: (shell.root / "tasks" / task_id / "status").exists(), "the task's end")
    assert await tasks.kill(*CHAT, task_id) == (
        True,
        f"nothing to stop: task {task_id} finished with exit status 0",
    )
    await tasks.poll_once()
    assert [e.dedup_key for e in shell.published] == [f"task:{task_id}"]


# -- the watcher --------------------------------------------------------------------------------------
async def test_a_restarted_driver_announces_what_the_previous_one_started(shell: Shell, fifo: Path) -> None:
    first = shell.tasks()
    _, text = await shell.bash(first, f"cat {fifo}; exit 7", 0.1)
    task_id = task_id_in(text)
    # The task ends while no driver watches it.
    await release(fifo)
    await until(lambda: (shell.root / "tasks" / task_id / "status").exists(), "the task's end")
    restarted = shell.tasks()
    await restarted.poll_once()
    (event,) = shell.published
    assert dict(event.attributes)["status"] == "failed"
    assert dict(event.attributes)["exit_status"] == "7"
    assert event.text == "payload\n"
    # Another host's watcher never touches this host's tasks.
    await shell.tasks(host="host-b").poll_once()
    assert len(shell.published) == 1


async def test_a_call_that_died_with_its_driver_is_adopted_and_announced(shell: Shell, fifo: Path) -> None:
    dead = shell.tasks()
    call = asyncio.create_task(shell.bash(dead, f"cat {fifo}; echo adopted", 25))
    await until(_running_with_pgid(shell), "the command started")
    call.cancel()  # the driver died while its call waited
    with pytest.raises(asyncio.CancelledError):
        await call
    restarted = shell.tasks()
    await restarted.poll_once()
    (row,) = await shell.store.open("host-a")
    assert not row.background  # it may still be some call's: not adopted before max_timeout_s
    shell.clock.advance(31_000)
    await release(fifo)
    await until(lambda: (shell.root / "tasks" / row.task_id / "status").exists(), "the task's end")
    await restarted.poll_once()
    (event,) = shell.published
    assert event.text == "payload\nadopted\n"


async def test_a_task_whose_processes_vanished_is_announced_as_lost(shell: Shell, fifo: Path) -> None:
    tasks = shell.tasks()
    lost = sample(metrics.BACKGROUND_TASKS, "lost")
    _, text = await shell.bash(tasks, f"echo before; cat {fifo}", 0.1)
    task_id = task_id_in(text)
    (row,) = await shell.store.open("host-a")
    assert row.pgid is not None
    output = shell.root / "tasks" / task_id / "output"
    await until(lambda: output.exists() and output.read_text() == "before\n", "the command's first line")
    os.killpg(row.pgid, 9)  # killed from outside: no status file is written
    await until(lambda: not processes.group_alive(row.pgid or 0), "the group gone")
    await tasks.poll_once()
    (event,) = shell.published
    assert dict(event.attributes)["status"] == "lost"
    assert "exit_status" not in dict(event.attributes)
    assert dict(event.attributes)["output_bytes"] == "7"
    assert event.text == "before\n"
    assert sample(metrics.BACKGROUND_TASKS, "lost") == lost + 1
    assert task_id in event.dedup_key


async def test_the_sweep_removes_tasks_past_their_retention(shell: Shell, fifo: Path) -> None:
    tasks = shell.tasks()
    await shell.bash(tasks, "echo old")
    old_id = (await _all(shell))[0].task_id
    _, text = await shell.bash(tasks, f"cat {fifo}", 0.1)
    running_id = task_id_in(text)
    shell.clock.advance(7 * 86_400_000 - 1)
    assert await tasks.sweep_once() == 0
    shell.clock.advance(2)
    assert await tasks.sweep_once() == 1
    assert await shell.store.get(old_id) is None
    assert not (shell.root / "tasks" / old_id).exists()
    # A running task stays, whatever its age.
    assert await shell.store.get(running_id) is not None
    assert (shell.root / "tasks" / running_id).exists()
    await release(fifo)


async def test_task_rows_on_both_databases(database_url: str, tmp_path: Path) -> None:
    s = Shell(database_url, tmp_path)
    await migrate(s.engine, MIGRATIONS)
    try:
        tasks = s.tasks()
        await s.bash(tasks, "echo one", key="lb-k1")
        _, again = await s.bash(tasks, "echo one", key="lb-k1")
        assert again.startswith("this call ran already")
        (row,) = await _all(s)
        assert (row.status, row.exit_code, row.output_bytes, row.background, row.announced) == (
            "done",
            0,
            4,
            False,
            True,
        )
        assert (
            await s.store.finish(
                row.task_id, "killed", exit_code=None, output_bytes=0, finished_at_ms=T0, announced=True
            )
            is False
        )  # only a running task ends
        assert await s.store.running_count("host-a") == 0
    finally:
        await s.engine.dispose()


# -- configuration ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("shell_section", "path"),
    [
        ({"env_passthrough": ["PATH"]}, "shell.env_passthrough"),
        ({"env_passthrough": ["LARKBOT_CONFIG"]}, "shell.env_passthrough"),
        ({"env_passthrough": ["1BAD"]}, "shell.env_passthrough"),
        ({"env_passthrough": ["A", "A"]}, "shell.env_passthrough"),
        ({"max_timeout_s": 0}, "shell.max_timeout_s"),
        ({"max_output_bytes": 10}, "shell.max_output_bytes"),
        ({"retention_days": 0}, "shell.retention_days"),
        ({"max_tasks": 0}, "shell.max_tasks"),
        ({"sandbox": True}, "shell.sandbox"),
    ],
)
def test_invalid_shell_settings_name_their_key(shell_section: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config({"shell": shell_section}, env={})
    assert raised.value.problems[0][0] == path


def test_passing_a_secret_through_or_a_missing_shell_is_a_configuration_error(tmp_path: Path) -> None:
    config = parse_config(
        {
            "shell": {"env_passthrough": ["HARMLESS", "TOKEN_COPY"]},
            "llm": {
                "endpoints": {
                    "main": {
                        "format": "openai-chat",
                        "base_url": "http://x",
                        "model": "m",
                        "api_key": "sk-abcdef",
                    }
                }
            },
        },
        env={},
    )
    check_settings(config, {"HARMLESS": "1", "TOKEN_COPY": "unrelated"})
    with pytest.raises(ConfigError) as raised:
        check_settings(config, {"HARMLESS": "1", "TOKEN_COPY": "Bearer sk-abcdef"})
    assert raised.value.problems == (
        ("shell.env_passthrough.1", "its value holds one of the service's secrets"),
    )


def test_a_chat_with_the_shell_on_needs_an_executable_shell() -> None:
    config = LarkbotConfig.model_validate(
        {"shell": {"executable": "/nonexistent/bash"}, "chats": {"feishu:oc_1": {"shell_enabled": True}}}
    )
    with pytest.raises(ConfigError) as raised:
        check_settings(config, {})
    assert raised.value.problems[0][0] == "shell.executable"
    relative = config.model_copy(update={"shell": ShellSettings(executable="bash")})
    with pytest.raises(ConfigError):
        check_settings(relative, {})


# -- on the bus: the completion wakes the chat ----------------------------------------------------------
def _texts(request: LLMRequest) -> str:
    return "\n".join(
        p.text
        for m in request.messages
        if isinstance(m, UserMessage | ToolResultMessage)
        for p in m.parts
        if isinstance(p, TextPart)
    )


async def test_a_background_task_completion_wakes_the_chat_once(
    bus: Bus, nats_url: str, tmp_path: Path, fifo: Path
) -> None:
    section = {
        "working_dir": str(tmp_path / "work"),
        "output_dir": str(tmp_path / "tasks"),
        "poll_interval_s": 0.05,
    }
    db = f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}"
    # The member is a maintainer: the gate opens the shell tools for their request.
    async with world(bus, nats_url, db, shell=section, maintainers=("ou_alice",), shell_enabled=True) as w:
        w.probe_answers.append(decide("send_message", "asked for a build"))
        command = f"echo building; cat {fifo}; echo built-ok"
        w.primary_answers.extend(
            [
                response(tool_call(tools.BASH, "b", command=command, timeout_seconds=0.2, intention="build")),
                end_turn(),
            ]
        )
        await w.say(1, 0, mentions_me=True)
        await w.tick(1000)
        primaries = w.requests("primary")
        assert len(primaries) == 2
        result = [m for m in primaries[1].messages if isinstance(m, ToolResultMessage)][-1]
        task_id = task_id_in(result.parts[0].text if isinstance(result.parts[0], TextPart) else "")
        assert "continues as background task" in _texts(primaries[1])

        # While it runs, the late-binding message of every request lists it.
        w.probe_answers.append(decide("send_message", "asked how the build goes"))
        w.primary_answers.append(end_turn())
        await w.say(2, 2000, mentions_me=True)
        await w.tick(3500)
        asking = w.requests("primary")[2]
        late = asking.messages[-1]
        assert isinstance(late, UserMessage)
        assert isinstance(late.parts[0], TextPart)
        assert f"- {task_id} (build), running for" in late.parts[0].text

        await release(fifo)
        event = await w.pipeline.runtime_event(f"task:{task_id}")
        assert dict(event.attributes)["status"] == "done"
        await w.synced()
        w.probe_answers.append(decide("no_action", "the build is done; nobody asked more"))
        await w.tick(6000)
        probes = w.requests("probe")
        assert len(probes) == 3
        woken = _texts(probes[2])
        assert f'<runtime-event type="task_done" task_id="{task_id}" status="done" exit_status="0"' in woken
        assert "building\npayload\nbuilt-ok" in woken

        # One more look publishes nothing: the completion was published exactly once.
        shell_tasks = w.driver.shell
        assert shell_tasks is not None
        await shell_tasks.poll_once()
        await bus.flush()
        assert [e.dedup_key for e in w.pipeline.runtime_published] == [f"task:{task_id}"]


async def _all(shell: Shell) -> list[core.Task]:
    async with shell.engine.connect() as conn:
        rows = (await conn.execute(select(shell_tasks.c.task_id).order_by(shell_tasks.c.started_at_ms))).all()
    found = [await shell.store.get(r.task_id) for r in rows]
    return [t for t in found if t is not None]


def _running_with_pgid(shell: Shell) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return any(t.pgid is not None for t in await shell.store.open("host-a"))

    return check
