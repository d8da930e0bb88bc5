"""``larkbot audit show`` end to end: wake-ups of a driver on the real bus recorded in its database
(SQLite, and PostgreSQL when ``TEST_DATABASE_URL`` is set), then printed by the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.test_cli_memory import larkbot, tables, write_config

from larkbot.canonical.llm import Usage
from larkbot.cli.audit import since_ms
from larkbot.driver.tools.core import tools
from larkbot.runtime.bus import Bus
from larkbot.testkit.driver.harness import CHAT_ID, decide, world
from larkbot.testkit.driver.synthetic import response, tool_call


async def test_audit_show_prints_each_wake_up(
    bus: Bus, nats_url: str, database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with world(bus, nats_url, database_url) as w:
        usage = Usage(input_tokens=1000, output_tokens=20, cache_read_tokens=750)
        await w.quiet_then_asked(
            quiet_reason="just <b>chatter</b>",
            answer=response(tool_call(tools.SEND, "c0", text="hi!"), usage=usage),
            asked="@Lark there?",
        )
    config = str(write_config(tmp_path, database_url))
    chat = f"feishu:{CHAT_ID}"

    status, out, err = await larkbot(capsys, "audit", "show", "--chat", chat, "--config", config)
    assert (status, err) == (0, "")
    quiet, spoke = out.split("\n\n")
    assert "suppressed (debounced)" in quiet
    assert "probe     no_action: just <b>chatter</b>" in quiet
    assert "outcome   silent" in quiet
    assert "probe (debounced)" in spoke
    assert "probe     send_message: asked the bot" in spoke
    assert "primary   1 steps, sends 1, reactions 0, tools send_message×1" in spoke
    assert "in 1000 (cache read 750 = 75%, write 0), out 20" in spoke
    assert "outcome   sent" in spoke
    assert "DRY RUN" not in out

    status, out, _ = await larkbot(capsys, "audit", "show", "--chat", chat, "--json", "--config", config)
    records = json.loads(out)
    assert [(r["path"], r["probe_decision"], r["steps"]) for r in records] == [
        ("suppressed", "no_action", 0),
        ("probe", "send_message", 1),
    ]

    status, out, _ = await larkbot(
        capsys, "audit", "show", "--chat", chat, "--since", "2099-01-01T00:00:00+00:00", "--config", config
    )
    assert (status, out.strip()) == (0, f"no wake-ups of {chat} recorded since 2099-01-01T00:00:00+00:00")


async def test_audit_show_marks_dry_runs(
    bus: Bus, nats_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}"
    async with world(bus, nats_url, db, dry_run=True, dry_run_call_model=False) as w:
        w.probe_answers.append(decide("send_message", "asked"))
        await w.say(1, 0, text="@Lark hi", mentions_me=True)
        await w.tick(1000)
    config = str(write_config(tmp_path, db))
    status, out, _ = await larkbot(capsys, "audit", "show", "--chat", f"feishu:{CHAT_ID}", "--config", config)
    assert status == 0
    assert "[DRY RUN]" in out
    assert "(not called: dry run)" in out
    assert "withheld  typing" in out


async def test_audit_show_refuses_a_chat_without_platform(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = await larkbot(capsys, "audit", "show", "--chat", CHAT_ID)
    assert status == 2
    assert "<platform>:<chat_id>" in err


def test_since_reads_durations_and_iso_times() -> None:
    assert since_ms(None, 10_000_000) == 0
    assert since_ms("2h", 10_000_000) == 10_000_000 - 7_200_000
    assert since_ms("30m", 10_000_000) == 10_000_000 - 1_800_000
    assert since_ms("1970-01-01T00:00:05+00:00", 0) == 5000
    with pytest.raises(ValueError, match="--since"):
        since_ms("yesterday", 0)


async def test_audit_show_before_the_driver_created_its_tables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "driver.db"
    config = str(write_config(tmp_path, f"sqlite+aiosqlite:///{db}"))
    chat = f"feishu:{CHAT_ID}"
    status, out, err = await larkbot(capsys, "audit", "show", "--chat", chat, "--config", config)
    assert (status, out) == (1, "")
    assert "larkbot audit: the driver's database is not ready" in err
    assert tables(db) == []  # only the driver migrates its database
