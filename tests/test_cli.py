"""The `larkbot` command line: configuration checks an operator relies on."""

from __future__ import annotations

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
