"""Writes prometheusrule.yaml beside it: deploy/prometheus/alerts.yml as a PrometheusRule, the same groups
compose's Prometheus loads (`make k8s-rules` runs it; tests/test_k8s_components.py fails when the two
differ)."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ALERTS = HERE.parents[3] / "deploy" / "prometheus" / "alerts.yml"
OUT = HERE / "prometheusrule.yaml"

HEADER = """\
# Generated from deploy/prometheus/alerts.yml by prometheusrule.py (`make k8s-rules`); do not edit.
# The rules' runbooks: docs/operations.md.
"""


def render() -> str:
    groups = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))["groups"]
    rule = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": "larkbot",
            "labels": {"app.kubernetes.io/part-of": "larkbot", "release": "kube-prometheus-stack"},
        },
        "spec": {"groups": groups},
    }
    return HEADER + yaml.safe_dump(rule, sort_keys=False, width=120, allow_unicode=True)


if __name__ == "__main__":
    OUT.write_text(render(), encoding="utf-8")
    sys.stdout.write(f"wrote {OUT}\n")
