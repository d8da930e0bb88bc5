"""The alerting rules fire when they should and stay silent when they should (``promtool test rules``), and
every alert leads an operator to its runbook."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
ALERT_TESTS = ROOT / "deploy" / "prometheus" / "alerts_test.yml"
OPERATIONS = ROOT / "docs" / "operations.md"


def alerts() -> dict[str, dict[str, Any]]:
    rules = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))
    return {rule["alert"]: rule for group in rules["groups"] for rule in group["rules"] if "alert" in rule}


def test_promtool_runs_the_unit_tests_of_every_alert() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian's prometheus package; .ci/run installs it)")
    result = subprocess.run(
        [promtool, "test", "rules", str(ALERT_TESTS)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout + result.stderr


def test_every_alert_has_a_case_that_fires_it_and_one_that_must_not() -> None:
    tests = yaml.safe_load(ALERT_TESTS.read_text(encoding="utf-8"))
    assert tests["rule_files"] == [ALERTS.name]
    firing: set[str] = set()
    silent: set[str] = set()
    for case in tests["tests"]:
        for check in case["alert_rule_test"]:
            (firing if check["exp_alerts"] else silent).add(check["alertname"])
            for expected in check["exp_alerts"]:
                # The whole alert is checked, its runbook link and summary included.
                assert set(expected["exp_annotations"]) == {"runbook_url", "summary"}, case["name"]
    names = set(alerts())
    assert names - firing == set(), "alerts no case fires"
    assert names - silent == set(), "alerts no case shows silent"
    assert (firing | silent) - names == set(), "cases of alerts that do not exist"


def _anchors(markdown: str) -> set[str]:
    """GitHub's anchors of the headings: lower case, punctuation dropped, spaces as hyphens."""
    anchors = set()
    for line in markdown.splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", title)))
    return anchors


def test_every_alert_links_its_runbook_in_docs_operations() -> None:
    anchors = _anchors(OPERATIONS.read_text(encoding="utf-8"))
    for name, rule in alerts().items():
        url = rule["annotations"]["runbook_url"]
        assert url == f"docs/operations.md#{name.lower()}", name
        assert name.lower() in anchors, f"docs/operations.md has no section {name}"
