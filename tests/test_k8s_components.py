"""The Kubernetes base and its components (``deploy/k8s/components``) render with kustomize and are valid
against the schemas a cluster would check them with: Kubernetes' own for built-in kinds
(``kubernetes-validate``), the vendored CRDs of the Prometheus Operator and KEDA for theirs
(``tests/schemas/crds/SOURCES.md``)."""

from __future__ import annotations

import os
import runpy
import shutil
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from larkbot.canonical.names import CONSUMER_MEDIA, STREAM_MEDIA

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "deploy" / "k8s"
COMPONENTS = BASE / "components"
CRDS = Path(__file__).resolve().parent / "schemas" / "crds"
#: The Kubernetes version the built-in kinds are validated against (kubernetes-validate's schemas).
KUBERNETES = "1.33.0"
SERVICES = ("ingress-feishu", "ingress-telegram", "pipeline", "driver", "media", "llm-gateway")

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (kustomize) is not on PATH")


def render(tmp_path: Path, *components: str) -> list[dict[str, Any]]:
    """The base with ``components``, as an overlay of an operator would include them."""
    overlay = tmp_path / "-".join(("overlay", *components))
    overlay.mkdir()
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(BASE, overlay)],
        "components": [os.path.relpath(COMPONENTS / name, overlay) for name in components],
    }
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization), encoding="utf-8")
    kubectl = shutil.which("kubectl")
    assert kubectl is not None
    result = subprocess.run(
        [kubectl, "kustomize", str(overlay)], capture_output=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr.decode()
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc is not None]


@cache
def crd_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) → the openAPIV3Schema of every vendored CRD version."""
    schemas = {}
    for path in CRDS.glob("*.yaml"):
        crd = yaml.safe_load(path.read_text(encoding="utf-8"))
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            schemas[(f"{group}/{version['name']}", kind)] = version["schema"]["openAPIV3Schema"]
    return schemas


def validate(doc: dict[str, Any]) -> None:
    schema = crd_schemas().get((doc["apiVersion"], doc["kind"]))
    if schema is not None:
        # Not checked against the meta-schema: the CRDs' patterns are Go's (``^(?i)…``), which Python's
        # re compiles only where a value is actually matched against them.
        jsonschema.Draft7Validator(schema).validate(doc)
    else:
        kubernetes_validate.validate(doc, KUBERNETES, strict=True)


def of_kind(docs: list[dict[str, Any]], kind: str) -> Iterator[dict[str, Any]]:
    return (doc for doc in docs if doc["kind"] == kind)


@pytest.mark.parametrize(
    "components", [(), ("monitoring",), ("keda",), ("tracing",), ("monitoring", "keda", "tracing")]
)
def test_the_base_and_each_component_render_and_are_valid(
    tmp_path: Path, components: tuple[str, ...]
) -> None:
    docs = render(tmp_path, *components)
    for doc in docs:
        validate(doc)
    kinds = {doc["kind"] for doc in docs}
    assert ("ServiceMonitor" in kinds) == ("monitoring" in components)
    assert ("ScaledObject" in kinds) == ("keda" in components)
    # Two autoscalers must not own one Deployment.
    assert ("HorizontalPodAutoscaler" in kinds) == ("keda" not in components)


def test_the_validation_refuses_what_a_cluster_would() -> None:
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}, "spec": {"ports": "9101"}}
        )
    monitor = {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor", "metadata": {"name": "x"}}
    with pytest.raises(jsonschema.ValidationError):
        validate({**monitor, "spec": {"selector": {}, "endpoints": [{"interval": 15}]}})


def test_every_service_is_scraped_on_its_metrics_port_with_its_name_as_job(tmp_path: Path) -> None:
    docs = render(tmp_path, "monitoring")
    services = {doc["metadata"]["name"]: doc for doc in of_kind(docs, "Service")}
    monitors = {doc["metadata"]["name"]: doc for doc in of_kind(docs, "ServiceMonitor")}
    assert set(monitors) == set(SERVICES)
    for name, monitor in monitors.items():
        service = services[name]
        labels = service["metadata"]["labels"]
        spec = monitor["spec"]
        assert spec["selector"]["matchLabels"].items() <= labels.items()
        assert labels[spec["jobLabel"]] == name  # `job` is the service's name, as the alerts expect
        ports = {port["name"] for port in service["spec"]["ports"]}
        assert [endpoint["port"] for endpoint in spec["endpoints"]] == ["metrics"]
        assert "metrics" in ports
        assert monitor["metadata"]["labels"]["release"]


def test_the_prometheus_rule_is_the_rules_compose_loads(tmp_path: Path) -> None:
    generator = runpy.run_path(str(COMPONENTS / "monitoring" / "prometheusrule.py"))
    committed = (COMPONENTS / "monitoring" / "prometheusrule.yaml").read_text(encoding="utf-8")
    assert committed == generator["render"](), "run `make k8s-rules`"
    (rule,) = of_kind(render(tmp_path, "monitoring"), "PrometheusRule")
    alerts = yaml.safe_load((ROOT / "deploy" / "prometheus" / "alerts.yml").read_text(encoding="utf-8"))
    assert rule["spec"]["groups"] == alerts["groups"]


def test_media_scales_from_zero_on_its_consumer_lag(tmp_path: Path) -> None:
    docs = render(tmp_path, "keda")
    (scaled,) = of_kind(docs, "ScaledObject")
    (media,) = (doc for doc in of_kind(docs, "Deployment") if doc["metadata"]["name"] == "media")
    spec = scaled["spec"]
    assert spec["scaleTargetRef"]["name"] == media["metadata"]["name"]
    assert "replicas" not in media["spec"]  # the autoscaler owns the count
    assert spec["minReplicaCount"] == 0
    (trigger,) = spec["triggers"]
    assert trigger["type"] == "nats-jetstream"
    assert (trigger["metadata"]["stream"], trigger["metadata"]["consumer"]) == (STREAM_MEDIA, CONSUMER_MEDIA)
    assert trigger["metadata"]["natsServerMonitoringEndpoint"].endswith(":8222")


def test_the_tracing_component_names_the_collector_in_every_service(tmp_path: Path) -> None:
    def endpoints(docs: list[dict[str, Any]]) -> dict[str, str | None]:
        found: dict[str, str | None] = {}
        for doc in docs:
            if doc["kind"] != "Deployment":
                continue
            env = {e["name"]: e.get("value") for e in doc["spec"]["template"]["spec"]["containers"][0]["env"]}
            found[doc["metadata"]["name"]] = env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        return found

    traced = endpoints(render(tmp_path, "tracing"))
    assert set(traced) == set(SERVICES)
    assert set(traced.values()) == {"http://otel-collector.observability.svc:4318"}
    assert set(endpoints(render(tmp_path)).values()) == {None}
