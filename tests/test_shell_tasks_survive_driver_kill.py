"""A background task outlives a SIGKILLed driver, and its completion still reaches the chat as a runtime
event once the driver is back (issue 17).

The services run as processes (llm-gateway, pipeline, driver, ingress-feishu); the member is a maintainer,
so the gate offers the shell tools for their request. A member asks;
the model starts two commands with ``bash``, each waiting on a FIFO the test holds, so both become
background tasks. Once that turn is stored, the driver is SIGKILLed. Task A ends while no driver runs; the
driver restarts; task B ends once the new process drives the chat again. Each completion enters the
pipeline once (``events`` row, rendered ``<runtime-event>`` segment) and wakes the chat (a probe sees it).

Why the two waits (together their absence failed a CI run; reproduced by forcing both). A kill before the turn
is stored leaves its chain open, and the restarted driver continues it without the probe, taking every input
then pending with it (``World.turn_stored``). And the restarted driver is ready once it holds its share of the
partitions: while the killed process's membership outlives its leases (it died between renewing the one and
the others), that share is half of them, and the chat's partition follows when the membership expires. In that
run the chat was taken over 12 s after the restart, after B had ended; one continuation took A and B, and no
probe ran. Waiting for the chat to be held makes B end while the chat is driven, so that B wakes it on its
own.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from tests.harness.world import World, world

from larkbot.canonical.llm import AssistantMessage, ToolCallPart, ToolResultMessage
from larkbot.canonical.names import Platform
from larkbot.driver.shell.processes import group_alive
from larkbot.llm_gateway.fake import Action, FakeCall, Reply
from larkbot.runtime.bus import Bus, connect
from larkbot.runtime.config import NatsSettings
from larkbot.runtime.db import create_engine
from larkbot.testkit.payloads import feishu_text, feishu_user
from larkbot.testkit.stack import until

CHAT = "oc_shell_survives"
MEMBER = feishu_user(1)
SERVICES = ("llm-gateway", "pipeline", "driver", "ingress-feishu")


def _text(call: FakeCall) -> str:
    return call.raw.decode("utf-8", "replace")


@dataclass
class ShellScript:
    """``#bash`` from a member: the probe activates, the primary starts ``commands`` with ``bash`` (one
    step), then ends its turn. Anything else (the runtime events) the probe lets pass."""

    commands: tuple[str, ...]
    probes: list[FakeCall] = field(default_factory=list)
    primaries: list[FakeCall] = field(default_factory=list)

    def __call__(self, call: FakeCall) -> Action:
        names = {tool.name for tool in call.request.tools}
        if "decide" in names:
            self.probes.append(call)
            woken_by_member = "#bash" in _text(call) and "runtime-event" not in _text(call)
            decision = "send_message" if woken_by_member else "no_action"
            return Reply.tool_call("decide", {"should_act": decision, "reason": "scripted"}, call_id="d")
        self.primaries.append(call)
        started = any(
            isinstance(m, AssistantMessage)
            and any(isinstance(p, ToolCallPart) and p.name == "bash" for p in m.parts)
            for m in call.request.messages
        )
        if started or "bash" not in names:
            return Reply.tool_call("end_turn", {}, call_id="e")
        parts = tuple(
            ToolCallPart(
                id=f"b{i}",
                name="bash",
                arguments_json=json.dumps(
                    {"command": command, "timeout_seconds": 1, "intention": f"task {i}"}
                ),
            )
            for i, command in enumerate(self.commands)
        )
        return Reply(parts=parts)


async def release(fifo: Path) -> None:
    """Write a line to ``fifo`` once its reader (the task's command) has it open."""

    def attempt() -> bool:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                return False
            raise
        try:
            os.write(fd, f"released {fifo.name}\n".encode())
        finally:
            os.close(fd)
        return True

    await until(attempt, f"a reader of {fifo.name}")


async def task_rows(w: World) -> list[Any]:
    engine = create_engine(w.database_urls["driver"])
    try:
        async with engine.connect() as conn:
            query = "SELECT task_id, pgid, status, background, announced, intention FROM driver_shell_tasks"
            return list((await conn.execute(text(query + " ORDER BY intention"))).all())
    finally:
        await engine.dispose()


async def runtime_rows(w: World) -> list[Any]:
    return [r for r in await w.event_rows("feishu", CHAT) if r.kind == "runtime"]


@pytest.fixture
async def shell_bus(nats_url: str) -> AsyncIterator[Bus]:
    bus = await connect(NatsSettings(), "shell-tests", url=nats_url, give_up_after_s=30)
    try:
        yield bus
    finally:
        await bus.close(drain_timeout_s=5)


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
async def test_a_background_task_reaches_the_chat_after_the_driver_is_killed(
    database: str, tmp_path: Path, shell_bus: Bus, nats_url: str
) -> None:
    postgres = os.environ.get("TEST_DATABASE_URL")
    if database == "postgres" and not postgres:
        pytest.skip("PostgreSQL runs need TEST_DATABASE_URL")
    fifos = (tmp_path / "gate-a", tmp_path / "gate-b")
    for fifo in fifos:
        os.mkfifo(fifo)
    script = ShellScript(tuple(f"cat {fifo}; echo done-{fifo.name}" for fifo in fifos))
    config = {
        "maintainers": [MEMBER],
        "shell": {
            "working_dir": str(tmp_path / "work"),
            "output_dir": str(tmp_path / "tasks"),
            "poll_interval_s": 0.2,
        },
    }
    groups: list[int] = []
    async with world(
        tmp_path / "stack",
        shell_bus,
        nats_url,
        script,
        {f"feishu:{CHAT}": {"shell_enabled": True}},
        database=database,
        postgres_url=postgres,
        services=SERVICES,
        config=config,
        # -P: the script's directory holds tests/harness/nats.py, which must not shadow the nats package.
    ) as w:
        try:
            envelope = feishu_text(
                CHAT, 1, "#bash run both", sender=MEMBER, create_time_ms=time.time_ns() // 10**6
            )
            assert await w.feishu.long_connection.push(envelope) == 200

            async def both_in_background() -> bool:
                rows = await task_rows(w)
                return len(rows) == 2 and all(r.background and r.status == "running" for r in rows)

            await until(both_in_background, "two background tasks")
            rows = await task_rows(w)
            groups.extend(r.pgid for r in rows)
            task_a, task_b = (r.task_id for r in rows)  # ordered by intention: task 0 (gate-a), task 1
            await until(lambda: len(script.primaries) >= 2, "the turn's second step")
            results = [m for m in script.primaries[1].request.messages if isinstance(m, ToolResultMessage)]
            assert len(results) == 2
            await until(lambda: w.turn_stored("feishu", CHAT), "the turn stored")

            await w.stack.kill("driver")
            assert all(group_alive(g) for g in groups)  # the tasks did not die with the driver

            await release(fifos[0])
            await until(lambda: (tmp_path / "tasks" / task_a / "status").exists(), "task A's end")
            await w.stack.start("driver")
            await w.stack.wait_ready("driver")

            async def drives_the_chat() -> bool:
                return await w.metric("driver", "larkbot_driver_chats") == 1

            await until(drives_the_chat, "the restarted driver holding the chat")
            await w.stack.wait_ready("driver")  # the chat's partition taken over: its loop runs
            await release(fifos[1])

            async def both_in_the_chat() -> bool:
                keys = sorted(r.dedup_key for r in await runtime_rows(w))
                return keys == sorted((f"task:{task_a}", f"task:{task_b}"))

            await until(both_in_the_chat, "both completions in the pipeline's events")

            async def both_seen_by_the_probe() -> bool:
                seen = "\n".join(_text(c) for c in script.probes)
                return f'task_id=\\"{task_a}\\"' in seen and f'task_id=\\"{task_b}\\"' in seen

            await until(both_seen_by_the_probe, "the chat woken by both completions")

            snapshot = await w.snapshot(Platform.FEISHU, CHAT)
            runtime = [s for s in snapshot.segments if s.node_type == "runtime"]
            assert len(runtime) == 2
            for task_id, fifo in zip((task_a, task_b), fifos, strict=True):
                (xml,) = [s.xml for s in runtime if f'task_id="{task_id}"' in s.xml]
                assert xml.startswith('<runtime-event type="task_done" t="')
                assert f'task_id="{task_id}" status="done" exit_status="0"' in xml
                assert f"released {fifo.name}\ndone-{fifo.name}\n</runtime-event>" in xml
            assert all(r.announced and r.status == "done" for r in await task_rows(w))
            # Both ends were recorded by the restarted driver, each once.
            assert await w.metric("driver", "larkbot_driver_background_tasks_total", outcome="done") == 2
        finally:
            for group in groups:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(group, 9)
