"""The `larkbot` command line: configuration checks an operator relies on."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from larkbot.cli.main import main


def test_config_check_accepts_a_good_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(
        "maintainers: [ou_admin]\n"
        "chats:\n  default: {initial_delay_ms: 500}\n  'feishu:oc_team': {}\n  'telegram:-1001': {}\n",
        encoding="utf-8",
    )
    assert main(["config", "check", str(good)]) == 0
    assert "ok (2 chat(s)" in capsys.readouterr().out


def test_config_check_rejects_a_broken_file_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("chats:\n  default:\n    probe_timeout_s: -1\n", encoding="utf-8")
    assert main(["config", "check", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "chats.default.probe_timeout_s" in err


def test_shipped_configurations_are_valid(capsys: pytest.CaptureFixture[str]) -> None:
    root = Path(__file__).resolve().parents[1]
    for path in sorted((root / "config").glob("*.yaml")):
        assert main(["config", "check", str(path)]) == 0, capsys.readouterr().err


def test_a_service_refuses_to_start_on_a_broken_config(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    bad = tmp_path / "bad.yaml"
    bad.write_text("services:\n  pipeline:\n    http_port: not-a-port\n", encoding="utf-8")
    env = {**os.environ, "LARKBOT_CONFIG": str(bad)}
    proc = subprocess.run(
        [sys.executable, "-m", "larkbot.cli", "run", "pipeline"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2
    assert "services.pipeline.http_port" in proc.stderr


def test_config_check_lists_every_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "services:\n  pipeline: {http_port: not-a-port}\n"
        "chats:\n  default: {probe_timeout_s: -1, bot_exchange_cap: 0}\n"
        "telegram: {bot_token: '${LARKBOT_TEST_UNSET_A}', api_base: '${LARKBOT_TEST_UNSET_B}'}\n",
        encoding="utf-8",
    )
    # Interpolation first: every variable that is missing, not only the first.
    assert main(["config", "check", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "LARKBOT_TEST_UNSET_A" in err
    assert "LARKBOT_TEST_UNSET_B" in err
    bad.write_text(
        bad.read_text().replace("${LARKBOT_TEST_UNSET_A}", "x").replace("${LARKBOT_TEST_UNSET_B}", "y")
    )
    assert main(["config", "check", str(bad)]) == 2
    err = capsys.readouterr().err
    for path in (
        "services.pipeline.http_port",
        "chats.default.probe_timeout_s",
        "chats.default.bot_exchange_cap",
    ):
        assert path in err, err
    assert "more problem" not in err
    assert str(bad) in err


def test_config_check_names_maintainer_and_blocked_user_problems(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "maintainers: [ou_admin, ' ou_admin']\n"
        "chats:\n  'feishu:oc_team': {blocked_users: [ou_spam, ou_admin]}\n",
        encoding="utf-8",
    )
    assert main(["config", "check", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "maintainers.1: duplicates the id at index 0" in err
    bad.write_text(
        "maintainers: [ou_admin]\nchats:\n  'feishu:oc_team': {blocked_users: [ou_spam, ou_admin]}\n",
        encoding="utf-8",
    )
    assert main(["config", "check", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "chats.feishu:oc_team.blocked_users.1: a maintainer cannot be a blocked user" in err


def test_up_names_the_configuration_file_it_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("chats:\n  default: {probe_timeout_s: -1}\n", encoding="utf-8")
    monkeypatch.setenv("LARKBOT_CONFIG", str(bad))  # what `make up` passes
    monkeypatch.chdir(tmp_path)
    assert main(["up"]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err
    assert "chats.default.probe_timeout_s" in err


def test_help_lists_every_command_the_readme_names(capsys: pytest.CaptureFixture[str]) -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`larkbot ([a-z][a-z-]*)", readme))
    assert {"up", "run", "fake-llm", "say"} <= named
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    listed = capsys.readouterr().out
    for command in sorted(named):
        assert re.search(rf"^\s+{command}\s", listed, re.M), f"`larkbot --help` does not list {command}"


def test_fake_llm_takes_its_own_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["fake-llm", "--help"])
    assert exited.value.code == 0
    assert "--script" in capsys.readouterr().out


def test_bench_without_the_testkit_says_what_is_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # As in a deployment image, which leaves the development dependency out.
    monkeypatch.setitem(sys.modules, "larkbot.testkit.bench.report", None)
    assert main(["bench", "--quick"]) == 2
    assert "larkbot-testkit" in capsys.readouterr().err


def test_bench_only_runs_the_parts_named_and_reports_progress_on_stderr(
    nats_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("NATS_URL", nats_url)
    assert main(["bench", "--quick", "--json", "--only", "limits"]) == 0
    out, err = capsys.readouterr()
    report = json.loads(out)  # stdout is the report alone
    assert list(report["bench_seconds"]) == ["limits"]
    assert report["limits"]["reduce_render_events_per_s"] > 0
    assert report["turn_overhead_ms"] is None
    assert report["ratios"]["turn_overhead_ms"]["floor_ms"] > 0
    assert report["ratios"]["null_because"]["pipeline_to_ceiling"] == "the pipeline part did not run (--only)"
    # Every null figure says why.
    nulls = {key for key, value in report.items() if value is None}
    assert "turn_overhead_ms" in nulls
    assert set(report["null_because"]) == nulls
    assert report["null_because"]["turn_overhead_ms"] == "the turn part did not run (--only)"
    lines = err.splitlines()
    assert lines[0] == "[bench 1/1] limits …"
    assert re.fullmatch(r"\[bench 1/1\] limits done in \d+ s", lines[-1])


def test_bench_refuses_an_unknown_part_naming_the_parts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--only", "limits,nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown bench part nope" in err
    assert "limits, llm_gateway, pipeline" in err
