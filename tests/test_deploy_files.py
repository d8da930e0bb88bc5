"""The deployment files: Dockerfile, docker-compose.yml, deploy/ (NATS, PostgreSQL, the compose config,
Prometheus and Grafana of the ``observability`` profile, the Kubernetes base under deploy/k8s).

No container engine is needed: the compose file is parsed with PyYAML (merge keys resolved) and held to
the facts an operator relies on; the configuration it mounts goes through ``larkbot config check``
in-process; the NATS configuration through ``nats-server -t`` (the workspace's own binary); the readiness
healthcheck one-liner runs against a local HTTP server. The Prometheus configuration must scrape every
service, and every metric the Grafana dashboard queries must be one the services' ``metrics`` modules
define (read from ``prometheus_client``'s registry after importing them).

``test_compose_file_passes_installed_validators`` runs every compose validator found on PATH
(``docker compose`` when the plugin answers, ``docker-compose``, ``check-jsonschema`` with the vendored
compose-spec schema); when none is installed, that test alone is skipped with the reason, and
``test_dockerfile_passes_hadolint`` likewise without ``hadolint``, ``test_k8s_base_renders_with_kustomize``
without ``kubectl``. The structural tests always run; the Kubernetes manifests are checked statically
(parsed with PyYAML and held to the compose file), never against a cluster.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import runpy
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY

from larkbot.canonical.names import OBJECT_STORES, SERVICE_PORTS, STREAMS, StreamSpec
from larkbot.cli.main import main as larkbot_main
from larkbot.runtime.config import LarkbotConfig, NatsSettings, load_config
from larkbot.runtime.natsserver import find_binary
from larkbot.runtime.service import serve

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
CONFIG_FILE = ROOT / "deploy" / "config" / "compose.yaml"
NATS_CONF = ROOT / "deploy" / "nats" / "nats.conf"
INITDB = ROOT / "deploy" / "postgres" / "initdb.sql"
ENV_EXAMPLE = ROOT / "deploy" / "env.example"
PROMETHEUS_CONFIG = ROOT / "deploy" / "prometheus" / "prometheus.yml"
GRAFANA_DIR = ROOT / "deploy" / "grafana"
DASHBOARD = GRAFANA_DIR / "dashboards" / "larkbot.json"
K8S_DIR = ROOT / "deploy" / "k8s"
K8S_KUSTOMIZATION = K8S_DIR / "kustomization.yaml"
K8S_CONFIG = K8S_DIR / "larkbot.yaml"
K8S_SECRET_EXAMPLE = K8S_DIR / "secret.example.yaml"

SERVICES = {service.value: port for service, port in SERVICE_PORTS.items()}
CONFIG_MOUNT = "/etc/larkbot/config.yaml"
#: Dummy values for every variable the compose file and its configuration require.
DUMMY_ENV = {
    "NATS_TOKEN": "dummy-nats-token",
    "POSTGRES_PASSWORD": "dummy-postgres-password",
    "FEISHU_APP_ID": "cli_dummy",
    "FEISHU_APP_SECRET": "dummy-feishu-secret",
    "TELEGRAM_BOT_TOKEN": "123456:dummy-telegram-token",
    "LLM_BASE_URL": "http://llm.invalid/v1",
    "LLM_MODEL": "dummy-model",
    "LLM_API_KEY": "dummy-llm-key",
}
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|API_KEY")
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:[-?][^}]*)?\}")
#: Services of the opt-in profile; everything else starts with a plain ``docker compose up``.
OBSERVABILITY = {"prometheus", "grafana"}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    return loaded


def services_of(compose: Mapping[str, Any]) -> dict[str, Any]:
    services: dict[str, Any] = compose["services"]
    return services


def test_six_services_run_from_one_image_with_their_own_command(compose: dict[str, Any]) -> None:
    services = services_of(compose)
    assert set(SERVICES) <= set(services)
    larkbot = {name: services[name] for name in [*SERVICES, "bootstrap"]}
    assert len({str(s["image"]) for s in larkbot.values()}) == 1
    assert all(s["build"]["context"] == "." for s in larkbot.values())
    assert all(s["build"].get("dockerfile", "Dockerfile") == "Dockerfile" for s in larkbot.values())
    for name in SERVICES:
        assert services[name]["command"] == ["run", name]
        assert services[name]["restart"] == "unless-stopped"
    default = {name for name, service in services.items() if not service.get("profiles")}
    assert default == {*SERVICES, "bootstrap", "nats", "postgres"}
    assert set(services) - default == OBSERVABILITY


def test_every_larkbot_container_mounts_the_checked_config(compose: dict[str, Any]) -> None:
    services = services_of(compose)
    for name in [*SERVICES, "bootstrap"]:
        service = services[name]
        assert f"./deploy/config/compose.yaml:{CONFIG_MOUNT}:ro" in service["volumes"], name
        assert service["environment"]["LARKBOT_CONFIG"] == CONFIG_MOUNT
        assert service["environment"]["NATS_URL"] == "nats://nats:4222"


def test_healthchecks_probe_readyz_on_each_service_port(compose: dict[str, Any]) -> None:
    services = services_of(compose)
    for name, port in SERVICES.items():
        test = services[name]["healthcheck"]["test"]
        assert test[:3] == ["CMD", "python", "-c"], name
        assert f"http://127.0.0.1:{port}/readyz" in test[3], name
    assert "healthcheck" not in services["bootstrap"]


@contextmanager
def answering_readyz(status: int) -> Iterator[int]:
    """A local HTTP server answering ``GET /readyz`` with ``status``; yields its port."""

    class Readyz(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status if self.path == "/readyz" else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass  # request lines would only clutter the test output

    server = ThreadingHTTPServer(("127.0.0.1", 0), Readyz)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.mark.parametrize(("status", "healthy"), [(200, True), (503, False)])
def test_healthcheck_one_liner_follows_readyz_status(
    compose: dict[str, Any], status: int, healthy: bool
) -> None:
    """The exact command of the pipeline's healthcheck, pointed at a local server answering ``status``."""
    code = services_of(compose)["pipeline"]["healthcheck"]["test"][3]
    with answering_readyz(status) as port:
        code = code.replace(f"127.0.0.1:{SERVICES['pipeline']}", f"127.0.0.1:{port}")
        assert str(port) in code
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, check=False)
    assert (result.returncode == 0) is healthy, result.stderr.decode()


def test_nats_runs_jetstream_with_8mb_payload_from_its_config(compose: dict[str, Any]) -> None:
    nats = services_of(compose)["nats"]
    assert str(nats["image"]).startswith("nats:")
    assert nats["command"] == ["-c", "/etc/nats/nats.conf"]
    assert "./deploy/nats/nats.conf:/etc/nats/nats.conf:ro" in nats["volumes"]
    assert "nats-data:/data" in nats["volumes"]
    assert "js-enabled-only=true" in " ".join(nats["healthcheck"]["test"])
    conf = NATS_CONF.read_text(encoding="utf-8")
    assert re.search(r"^max_payload: 8MB$", conf, re.MULTILINE)
    assert StreamSpec("X", ("x",)).max_msg_size == 8 * 1024 * 1024  # NATS' "8MB" is 8 MiB
    assert re.search(r"^jetstream \{\n\s+store_dir: /data/jetstream$", conf, re.MULTILINE)
    assert re.search(r"token: \$NATS_TOKEN$", conf, re.MULTILINE)


def test_nats_config_is_accepted_by_nats_server() -> None:
    """``nats-server -t`` parses the file (and resolves ``$NATS_TOKEN``) without starting."""
    env = {**os.environ, "NATS_TOKEN": DUMMY_ENV["NATS_TOKEN"]}
    ok = subprocess.run(
        [find_binary(), "-c", str(NATS_CONF), "-t"], capture_output=True, env=env, timeout=60, check=False
    )
    assert ok.returncode == 0, ok.stderr.decode()
    env.pop("NATS_TOKEN")
    unset = subprocess.run(
        [find_binary(), "-c", str(NATS_CONF), "-t"], capture_output=True, env=env, timeout=60, check=False
    )
    assert unset.returncode != 0
    assert "NATS_TOKEN" in (unset.stdout + unset.stderr).decode()


def _bytes(size: str) -> int:
    """``20GB`` / ``25Gi`` as bytes (NATS' GB and Kubernetes' Gi are both powers of 1024)."""
    number, unit = re.fullmatch(r"(\d+)\s*(GB|Gi|MB|Mi)", size).groups()  # type: ignore[union-attr]
    return int(number) * 1024 ** (3 if unit in ("GB", "Gi") else 2)


def test_jetstream_storage_holds_every_bounded_asset() -> None:
    """The server's file store (compose and Helm) is bounded, above what the bounded assets may hold."""
    bounded = sum(s.max_bytes for s in STREAMS if s.max_bytes > 0)
    bounded += sum(o.max_bytes for o in OBJECT_STORES if o.max_bytes > 0)
    conf = NATS_CONF.read_text(encoding="utf-8")
    found = re.search(r"^\s+max_file_store: (\S+)$", conf, re.MULTILINE)
    assert found, "deploy/nats/nats.conf sets no max_file_store"
    assert _bytes(found.group(1)) > 2 * bounded
    helm = yaml.safe_load((ROOT / "deploy" / "nats" / "helm-values.yaml").read_text(encoding="utf-8"))
    cluster, jetstream = helm["config"]["cluster"], helm["config"]["jetstream"]
    assert (cluster["enabled"], cluster["replicas"], jetstream["enabled"]) == (True, 3, True)
    store = jetstream["fileStore"]
    assert _bytes(store["pvc"]["size"]) > _bytes(store["maxSize"]) > 2 * bounded
    assert helm["config"]["merge"]["max_payload"] == "<< 8MB >>"
    assert helm["promExporter"]["enabled"] is True
    k8s = yaml.safe_load(K8S_CONFIG.read_text(encoding="utf-8"))
    assert k8s["jetstream"]["replicas"] == cluster["replicas"]


def test_init_job_runs_before_every_service(compose: dict[str, Any]) -> None:
    services = services_of(compose)
    boot = services["bootstrap"]
    assert boot["command"][0] == "bootstrap"
    assert boot["restart"] == "no"
    assert boot["depends_on"] == {"nats": {"condition": "service_healthy"}}
    for name in SERVICES:
        needs = services[name]["depends_on"]
        assert needs["bootstrap"] == {"condition": "service_completed_successfully"}, name
        assert needs["nats"] == {"condition": "service_healthy"}, name
    for name in ("pipeline", "driver"):
        assert services[name]["depends_on"]["postgres"] == {"condition": "service_healthy"}


def test_postgres_creates_the_databases_the_config_names(compose: dict[str, Any]) -> None:
    postgres = services_of(compose)["postgres"]
    assert "./deploy/postgres/initdb.sql:/docker-entrypoint-initdb.d/10-larkbot.sql:ro" in postgres["volumes"]
    assert any(v.startswith("postgres-data:") for v in postgres["volumes"])
    assert postgres["healthcheck"]["test"][:4] == ["CMD", "pg_isready", "-h", "127.0.0.1"]
    created = set(re.findall(r"CREATE DATABASE (\w+) OWNER larkbot;", INITDB.read_text(encoding="utf-8")))
    config = checked_config()
    for name in ("pipeline", "driver"):
        url = config.services.for_service(name).database_url
        assert url is not None, name
        assert url.get_secret_value().startswith("postgresql+asyncpg://larkbot:")
        assert url.get_secret_value().rsplit("/", 1)[1] in created


def test_no_secret_is_written_inline(compose: dict[str, Any]) -> None:
    documented = env_example_names()
    for name, service in services_of(compose).items():
        for key, value in (service.get("environment") or {}).items():
            if not _SECRET_NAME.search(key):
                continue
            if service.get("profiles"):
                # Compose interpolates services of inactive profiles too: a `:?` would stop the default
                # `up`, so an opt-in service takes a variable documented in deploy/env.example instead.
                ref = re.fullmatch(r"\$\{([A-Z_]+):-[^}]*\}", str(value))
                assert ref is not None, f"{name}: {key}={value}"
                assert ref.group(1) in documented, f"{name}: {ref.group(1)} is not in deploy/env.example"
            else:
                assert re.fullmatch(rf"\$\{{{key}:\?[^}}]+\}}", str(value)), f"{name}: {key}={value}"
    raw = yaml.safe_load(CONFIG_FILE.read_text(encoding="utf-8"))
    secrets = [
        raw["nats"]["token"],
        raw["feishu"]["app_secret"],
        raw["telegram"]["bot_token"],
        *(endpoint["api_key"] for endpoint in raw["llm"]["endpoints"].values()),
    ]
    assert all(re.fullmatch(r"\$\{[A-Z_]+\}", s) for s in secrets), secrets
    for name in ("pipeline", "driver"):
        assert "${POSTGRES_PASSWORD}" in raw["services"][name]["database_url"]
    for line in ENV_EXAMPLE.read_text(encoding="utf-8").splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.startswith("#") and _SECRET_NAME.search(key):
            assert value == "", f"deploy/env.example carries a value for {key}"


def compose_value(value: str) -> str:
    """What compose puts in a container for ``value``: ``${NAME:?…}`` the dummy, ``${NAME:-x}`` ``x``."""

    def resolve(match: re.Match[str]) -> str:
        name, rest = match.group(1), match.group(2) or ""
        return rest[2:] if rest.startswith(":-") and name not in DUMMY_ENV else DUMMY_ENV.get(name, "")

    return _ENV_REF.sub(resolve, value)


#: The secrets each container is given besides the shared NATS token (DESIGN: least privilege).
OWN_SECRETS = {
    "ingress-feishu": {"FEISHU_APP_SECRET"},
    "ingress-telegram": {"TELEGRAM_BOT_TOKEN"},
    "llm-gateway": {"LLM_API_KEY"},
    "pipeline": {"POSTGRES_PASSWORD"},
    "driver": {"POSTGRES_PASSWORD"},
    "media": set(),
    "bootstrap": set(),
}


def test_every_container_is_given_its_own_secrets_only_and_starts_with_them(compose: dict[str, Any]) -> None:
    raw = yaml.safe_load(CONFIG_FILE.read_text(encoding="utf-8"))
    required = {m.group(1) for text in strings_in(raw) for m in _ENV_REF.finditer(text) if m.group(2) is None}
    assert required == set(DUMMY_ENV)
    for name, own in OWN_SECRETS.items():
        environment = set(services_of(compose)[name]["environment"])
        secrets = {key for key in environment if _SECRET_NAME.search(key)}
        assert secrets == {"NATS_TOKEN"} | own, name
        env = {
            key: compose_value(str(value)) for key, value in services_of(compose)[name]["environment"].items()
        }
        config = load_config(CONFIG_FILE, env=env, service=name)  # the view the container loads
        foreign = [key for key in DUMMY_ENV if _SECRET_NAME.search(key) and key not in secrets]
        for value in config.secret_values():
            assert not any(DUMMY_ENV[key] in value for key in foreign), f"{name} holds {value}"


def test_every_ops_endpoint_listens_beyond_loopback_in_the_containers() -> None:
    """Services default to loopback; in a container the healthcheck runs inside, but Prometheus scrapes
    over the compose network, so the compose configuration must say 0.0.0.0 for every service."""
    config = checked_config()
    for service in SERVICE_PORTS:
        assert config.services.for_service(service.value).http_host == "0.0.0.0", service.value


def test_media_scales_without_port_conflicts(compose: dict[str, Any]) -> None:
    services = services_of(compose)
    for name in SERVICES:
        assert "ports" not in services[name], f"{name} publishes a host port"
        assert "container_name" not in services[name], name
    assert all(str(p).startswith("127.0.0.1:") for p in services["nats"]["ports"])


def env_example_names() -> set[str]:
    """Variables deploy/env.example lists, set or commented out (``# NAME=value``)."""
    text = ENV_EXAMPLE.read_text(encoding="utf-8")
    return set(re.findall(r"^(?:# )?([A-Z][A-Z0-9_]*)=", text, re.MULTILINE))


def test_observability_profile_stays_out_of_the_default_set(compose: dict[str, Any]) -> None:
    services = services_of(compose)
    for name in OBSERVABILITY:
        service = services[name]
        assert service["profiles"] == ["observability"], name
        assert service["restart"] == "unless-stopped", name
        loopback = all(str(p).startswith("127.0.0.1:") for p in service["ports"])
        assert loopback, f"{name} listens beyond loopback"
        for mount in service["volumes"]:
            source = mount.split(":")[0]
            if source.startswith("./"):
                assert (ROOT / source).exists(), f"{name}: {source} does not exist"
    assert re.fullmatch(r"prom/prometheus:v\d+\.\d+\.\d+", services["prometheus"]["image"])
    assert re.fullmatch(r"grafana/grafana:\d+\.\d+\.\d+", services["grafana"]["image"])
    # A default service needing an opt-in one would drag it in (or fail) on a plain `up`.
    for name, service in services.items():
        if not service.get("profiles"):
            assert not set(service.get("depends_on") or {}) & OBSERVABILITY, name
    prometheus = services["prometheus"]
    assert "--config.file=/etc/prometheus/prometheus.yml" in prometheus["command"]
    assert "./deploy/prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in prometheus["volumes"]
    assert {"GRAFANA_ADMIN_USER", "GRAFANA_ADMIN_PASSWORD"} <= env_example_names()
    assert services["grafana"]["environment"]["GF_AUTH_ANONYMOUS_ENABLED"] == "false"


def test_prometheus_scrapes_every_service(compose: dict[str, Any]) -> None:
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text(encoding="utf-8"))
    static: set[str] = set()
    discovered: dict[str, dict[str, Any]] = {}
    for job in config["scrape_configs"]:
        assert job.get("metrics_path", "/metrics") == "/metrics", job["job_name"]
        for group in job.get("static_configs", []):
            static.update(group["targets"])
        for sd in job.get("dns_sd_configs", []):
            for host in sd["names"]:
                discovered[host] = sd
    for name, port in SERVICES.items():
        assert f"{name}:{port}" in static or name in discovered, f"{name} is not scraped"
    # Media scales: one static target would reach one replica, DNS discovery finds them all.
    assert discovered["media"]["type"] == "A"
    assert discovered["media"]["port"] == SERVICES["media"]
    assert "media:9105" not in static
    hosts = {target.rsplit(":", 1)[0] for target in static} | set(discovered)
    assert hosts <= set(services_of(compose)), hosts - set(services_of(compose))
    jobs = [job["job_name"] for job in config["scrape_configs"]]
    assert len(jobs) == len(set(jobs))


def test_grafana_provisions_prometheus_and_the_dashboard(compose: dict[str, Any]) -> None:
    grafana = services_of(compose)["grafana"]
    assert "./deploy/grafana/provisioning:/etc/grafana/provisioning:ro" in grafana["volumes"]
    mounts = dict(v.split(":")[:2] for v in grafana["volumes"])
    sources = yaml.safe_load((GRAFANA_DIR / "provisioning/datasources/prometheus.yml").read_text("utf-8"))
    (datasource,) = sources["datasources"]
    assert datasource["type"] == "prometheus"
    prometheus_port = str(services_of(compose)["prometheus"]["ports"][0]).rsplit(":", 1)[1]
    assert datasource["url"] == f"http://prometheus:{prometheus_port}"
    providers = yaml.safe_load((GRAFANA_DIR / "provisioning/dashboards/larkbot.yml").read_text("utf-8"))
    (provider,) = providers["providers"]
    assert provider["type"] == "file"
    assert provider["options"]["path"] == mounts["./deploy/grafana/dashboards"]
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert dashboard["uid"] == "larkbot"
    # Any Prometheus: the panels use the `datasource` variable, which offers the provisioned default.
    variables = {variable["name"]: variable for variable in dashboard["templating"]["list"]}
    assert (variables["datasource"]["type"], variables["datasource"]["query"]) == ("datasource", "prometheus")
    assert datasource["isDefault"] is True
    for panel in panels_of(dashboard):
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
    ids = [panel["id"] for panel in panels_of(dashboard)]
    assert len(ids) == len(set(ids))


def panels_of(dashboard: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


#: PromQL words that look like identifiers but name no series.
_PROMQL_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool"}
_PROMQL_KEYWORDS |= {"and", "or", "unless", "inf", "nan"}


def metric_names_in(expr: str) -> set[str]:
    """The series names a PromQL expression selects (functions, labels, strings and ranges removed)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    names = set()
    for match in re.finditer(r"(?<![\w.])[A-Za-z_:][A-Za-z0-9_:]*", text):
        word = match.group(0)
        if word.lower() in _PROMQL_KEYWORDS or text[match.end() :].lstrip().startswith("("):
            continue
        names.add(word)
    return names


def test_promql_name_extraction() -> None:
    expr = 'histogram_quantile(0.95, sum by (model, le) (rate(a_bucket{x="y(z)"}[$__rate_interval])))'
    assert metric_names_in(expr) == {"a_bucket"}
    assert metric_names_in("sum(rate(b_total[5m])) / on (job) c offset 1h > bool 0") == {"b_total", "c"}


def defined_series() -> set[str]:
    """Every series name the services expose, from the registry their ``metrics`` modules fill."""
    # Every ``metrics`` module of the runtime (its features keep theirs, e.g. ``budgets.metrics``), not only
    # those a service's own metrics module happens to import.
    runtime = Path(importlib.import_module("larkbot.runtime").__file__ or "").parent
    features = sorted(
        "larkbot.runtime." + ".".join(p.relative_to(runtime).with_suffix("").parts)
        for p in runtime.rglob("metrics.py")
    )
    modules = [*features, *(f"larkbot.{name.replace('-', '_')}.metrics" for name in SERVICES)]
    for module in modules:
        importlib.import_module(module)
    suffixes = {
        "counter": ("_total", "_created"),
        "histogram": ("_bucket", "_sum", "_count", "_created"),
        "summary": ("", "_sum", "_count", "_created"),
        "info": ("_info",),
    }
    names: set[str] = set()
    for family in REGISTRY.collect():
        names.update(family.name + suffix for suffix in suffixes.get(family.type, ("",)))
        names.update(sample.name for sample in family.samples)
    return names


def defined_families() -> dict[str, set[str]]:
    """Every metric family the services define → the series names it exposes."""
    defined_series()  # imports every metrics module
    suffixes = {
        "counter": ("_total",),
        "histogram": ("_bucket", "_sum", "_count"),
        "summary": ("", "_sum", "_count"),
        "info": ("_info",),
    }
    return {
        family.name: {family.name + suffix for suffix in suffixes.get(family.type, ("",))}
        for family in REGISTRY.collect()
        if family.name.startswith("larkbot_")
    }


def generated_dashboard() -> dict[str, Any]:
    return runpy.run_path(str(GRAFANA_DIR / "dashboard.py"))


def test_the_dashboard_files_are_what_the_generator_writes() -> None:
    generator = generated_dashboard()
    assert DASHBOARD.read_text(encoding="utf-8") == generator["render_json"](), "run `make dashboard`"
    configmap = K8S_DIR / "components" / "monitoring" / "grafana-dashboard.yaml"
    assert configmap.read_text(encoding="utf-8") == generator["render_configmap"](), "run `make dashboard`"
    doc = yaml.safe_load(configmap.read_text(encoding="utf-8"))
    assert doc["metadata"]["labels"]["grafana_dashboard"] == "1"  # the Grafana sidecar's default label
    assert json.loads(doc["data"]["larkbot.json"]) == json.loads(DASHBOARD.read_text(encoding="utf-8"))


def test_every_metric_family_is_on_the_dashboard_or_deliberately_left_off() -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    used = {
        name
        for panel in panels_of(dashboard)
        for target in panel.get("targets", [])
        for name in metric_names_in(target["expr"])
    }
    left_off: dict[str, str] = generated_dashboard()["LEFT_OFF"]
    missing = [family for family, series in defined_families().items() if not series & used]
    assert sorted(set(missing) - set(left_off)) == []
    assert all(reason for reason in left_off.values())
    # Every query is scoped by the namespace and job variables.
    for panel in panels_of(dashboard):
        for target in panel.get("targets", []):
            assert 'namespace=~"$namespace"' in target["expr"], panel["title"]
            assert 'job=~"$job"' in target["expr"], panel["title"]


def test_dashboard_queries_only_metrics_the_services_define() -> None:
    defined = defined_series()
    assert {
        "larkbot_driver_turns_total",
        "larkbot_driver_turn_seconds_bucket",
        "larkbot_service_ready",
    } <= defined
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    used: set[str] = set()
    for panel in panels_of(dashboard):
        for target in panel.get("targets", []):
            names = metric_names_in(target["expr"])
            assert names, f"{panel['title']}: {target['expr']}"
            assert names <= defined, f"{panel['title']}: no such metric {sorted(names - defined)}"
            used |= names
    # What an operator of the bot needs on one page.
    assert {
        "larkbot_ingress_feishu_events_total",
        "larkbot_telegram_updates_total",
        "larkbot_pipeline_events_total",
        "larkbot_pipeline_commit_seconds_bucket",
        "larkbot_driver_context_updates_total",
        "larkbot_driver_wakeups_total",
        "larkbot_driver_probe_decisions_total",
        "larkbot_driver_turns_total",
        "larkbot_driver_turn_seconds_bucket",
        "larkbot_driver_tool_calls_total",
        "larkbot_driver_llm_cache_hit_ratio",
        "larkbot_driver_wake_failures_total",
        "larkbot_driver_recovered_steps_total",
        "larkbot_driver_partitions",
        "larkbot_llm_requests_total",
        "larkbot_llm_request_duration_seconds_bucket",
        "larkbot_llm_input_tokens_total",
        "larkbot_media_jobs_total",
        "larkbot_bus_consumer_pending_messages",
    } <= used


def strings_in(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)


def checked_config() -> LarkbotConfig:
    return load_config(CONFIG_FILE, env=DUMMY_ENV)


def test_config_check_accepts_the_compose_config(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for key, value in DUMMY_ENV.items():
        monkeypatch.setenv(key, value)
    assert larkbot_main(["config", "check", str(CONFIG_FILE)]) == 0
    out = capsys.readouterr().out
    assert "ok (0 chat(s), platforms: feishu, telegram" in out
    for value in DUMMY_ENV.values():
        assert value not in out

    monkeypatch.delenv("LLM_API_KEY")
    assert larkbot_main(["config", "check", str(CONFIG_FILE)]) == 2
    assert "LLM_API_KEY is not set" in capsys.readouterr().err


def test_dockerfile_builds_the_locked_workspace_as_non_root() -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    assert "uv sync --locked --no-dev --no-install-workspace" in text
    assert "uv sync --locked --no-dev --no-editable" in text
    assert re.search(r'^ENTRYPOINT \["larkbot"\]$', text, re.MULTILINE)
    assert re.search(r'^CMD \["run", "[a-z-]+"\]$', text, re.MULTILINE)
    users = re.findall(r"^USER (\S+)$", text, re.MULTILINE)
    assert users, "the image must not run as root"
    assert users[-1].split(":")[0] not in ("root", "0")
    # A workspace member whose manifest is not copied before the first sync fails `--locked`.
    manifests = [*ROOT.glob("libs/*/pyproject.toml"), *ROOT.glob("services/*/pyproject.toml")]
    members = sorted(p.parent.relative_to(ROOT).as_posix() for p in manifests)
    assert members
    for member in members:
        assert f"COPY {member}/pyproject.toml {member}/" in text, member
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    for needed in ("!pyproject.toml", "!uv.lock", "!libs/", "!services/"):
        assert needed in ignored


def _compose_validators(empty_env_file: Path) -> list[list[str]]:
    # An empty --env-file: an operator's .env beside the compose file must not decide the outcome.
    compose_args = ["--env-file", str(empty_env_file), "-f", str(COMPOSE_FILE), "config", "--quiet"]
    found: list[list[str]] = []
    docker = shutil.which("docker")
    if docker:
        plugin = subprocess.run([docker, "compose", "version"], capture_output=True, timeout=60, check=False)
        if plugin.returncode == 0:
            found.append([docker, "compose", *compose_args])
    legacy = shutil.which("docker-compose")
    if legacy:
        found.append([legacy, *compose_args])
    schema = shutil.which("check-jsonschema")
    if schema:
        found.append([schema, "--builtin-schema", "vendor.compose-spec", str(COMPOSE_FILE)])
    return found


def test_compose_file_passes_installed_validators(tmp_path: Path) -> None:
    """Runs each compose validator on PATH; skipped, naming the reason, when there is none."""
    empty = tmp_path / "empty.env"
    empty.write_text("", encoding="utf-8")
    validators = _compose_validators(empty)
    if not validators:
        pytest.skip("no compose validator on PATH (docker compose, docker-compose, check-jsonschema)")
    env = {**os.environ, **DUMMY_ENV}
    for command in validators:
        result = subprocess.run(command, capture_output=True, cwd=ROOT, env=env, timeout=120, check=False)
        assert result.returncode == 0, f"{command}: {(result.stdout + result.stderr).decode()}"
    if validators[0][-2:] == ["config", "--quiet"]:
        missing = {k: v for k, v in env.items() if k != "NATS_TOKEN"}
        refused = subprocess.run(
            validators[0], capture_output=True, cwd=ROOT, env=missing, timeout=120, check=False
        )
        assert refused.returncode != 0
        assert b"set NATS_TOKEN in .env" in refused.stdout + refused.stderr


def test_dockerfile_passes_hadolint() -> None:
    """Runs hadolint when it is on PATH; skipped, naming the reason, otherwise."""
    hadolint = shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not on PATH")
    result = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout.decode()


# -- Kubernetes: the kustomize base under deploy/k8s ------------------------------------------------------

#: Files of deploy/k8s that are not resources: the kustomization itself, the LarkBot configuration its
#: configMapGenerator reads, and the example Secret the operator copies (never applied by the base).
K8S_NOT_RESOURCES = {"kustomization.yaml", "larkbot.yaml", "secret.example.yaml"}
K8S_SECRET = "larkbot-secrets"
K8S_CONFIG_MAP = "larkbot-config"
#: The value every secret of secret.example.yaml carries instead of a real one.
PLACEHOLDER = "replace-me"
INGRESSES = {"ingress-feishu", "ingress-telegram"}
#: Run several replicas safely because they split the 16 partitions through leases (docs/pipeline.md,
#: docs/driver.md).
LEASED = {"pipeline", "driver"}


def k8s_yaml_files() -> list[Path]:
    """The base's files (its components, ``components/``, are checked by test_k8s_components.py)."""
    return sorted(
        p
        for p in K8S_DIR.rglob("*")
        if p.suffix in (".yaml", ".yml") and p.relative_to(K8S_DIR).parts[0] != "components"
    )


def k8s_resources() -> dict[str, list[dict[str, Any]]]:
    """The documents of every resource file of the base, by file name."""
    return {
        path.name: [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc is not None]
        for path in k8s_yaml_files()
        if path.name not in K8S_NOT_RESOURCES
    }


def k8s_objects(kind: str) -> dict[str, dict[str, Any]]:
    found = [doc for docs in k8s_resources().values() for doc in docs if doc["kind"] == kind]
    by_name = {doc["metadata"]["name"]: doc for doc in found}
    assert len(by_name) == len(found), f"two {kind} objects share a name"
    return by_name


def k8s_example_secrets() -> dict[str, dict[str, str]]:
    """The example Secrets' values, by Secret name."""
    docs = [d for d in yaml.safe_load_all(K8S_SECRET_EXAMPLE.read_text(encoding="utf-8")) if d is not None]
    return {doc["metadata"]["name"]: doc["stringData"] for doc in docs}


def k8s_example_secret() -> dict[str, str]:
    """Every example Secret's values together (what ``config check`` of the whole file needs)."""
    return {key: value for values in k8s_example_secrets().values() for key, value in values.items()}


#: The Secret of its own a workload reads besides ``larkbot-secrets``, and the keys it holds.
K8S_OWN_SECRETS = {
    "ingress-feishu": {"FEISHU_APP_SECRET"},
    "ingress-telegram": {"TELEGRAM_BOT_TOKEN"},
    "llm-gateway": {"LLM_API_KEY"},
    "pipeline": {"PIPELINE_DATABASE_URL"},
    "driver": {"DRIVER_DATABASE_URL"},
}


def compose_image(compose: Mapping[str, Any]) -> str:
    """The image compose runs by default: ``larkbot:local`` out of ``${LARKBOT_IMAGE:-larkbot:local}``."""
    image = str(services_of(compose)["pipeline"]["image"])
    match = re.fullmatch(r"\$\{LARKBOT_IMAGE:-([^}]+)\}", image)
    return match.group(1) if match else image


def pod_specs() -> dict[str, dict[str, Any]]:
    """The pod spec of every Deployment and Job, by object name."""
    objects = {**k8s_objects("Deployment"), **k8s_objects("Job")}
    return {name: obj["spec"]["template"]["spec"] for name, obj in objects.items()}


def test_k8s_yaml_parses_into_named_objects() -> None:
    files = k8s_yaml_files()
    assert {p.name for p in files} >= K8S_NOT_RESOURCES | {f"{name}.yaml" for name in SERVICES}
    for path in files:
        docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
        assert docs, path.name
        if path.name == "larkbot.yaml":
            continue  # the LarkBot configuration, checked below
        for doc in docs:
            assert doc.get("apiVersion"), path.name
            assert doc.get("kind"), path.name
            if path.name == "kustomization.yaml":
                assert doc["kind"] == "Kustomization"
                continue
            assert doc.get("metadata", {}).get("name"), f"{path.name}: {doc['kind']} without a name"
            # Namespace-agnostic: the operator (or an overlay) picks the namespace.
            assert "namespace" not in doc["metadata"], f"{path.name}: {doc['kind']} pins a namespace"


def test_kustomization_lists_every_manifest_but_the_example_secret() -> None:
    kustomization = yaml.safe_load(K8S_KUSTOMIZATION.read_text(encoding="utf-8"))
    listed = kustomization["resources"]
    assert len(listed) == len(set(listed))
    on_disk = {p.relative_to(K8S_DIR).as_posix() for p in k8s_yaml_files()} - K8S_NOT_RESOURCES
    assert set(listed) == on_disk
    assert "namespace" not in kustomization
    assert "secretGenerator" not in kustomization
    (generator,) = kustomization["configMapGenerator"]
    assert generator["name"] == K8S_CONFIG_MAP
    assert generator["files"] == [f"{Path(CONFIG_MOUNT).name}={K8S_CONFIG.name}"]
    assert not k8s_objects("Secret"), "the base must not carry a Secret"


def test_k8s_deployment_runs_each_compose_service(compose: dict[str, Any]) -> None:
    deployments = k8s_objects("Deployment")
    services = services_of(compose)
    assert set(deployments) == set(SERVICES)
    image = compose_image(compose)
    assert image == "larkbot:local"
    for name, spec in pod_specs().items():
        (container,) = spec["containers"]
        assert container["image"] == image, name
        assert "command" not in container, f"{name}: the image's entrypoint is `larkbot`"
        if name in SERVICES:
            assert container["args"] == services[name]["command"] == ["run", name]
        else:
            assert name == "larkbot-bootstrap"
            assert container["args"][0] == services["bootstrap"]["command"][0] == "bootstrap"
            assert spec["restartPolicy"] in ("OnFailure", "Never")


def test_k8s_pods_read_the_config_map_and_the_secret() -> None:
    for name, spec in pod_specs().items():
        (container,) = spec["containers"]
        env = {e["name"]: e for e in container.get("env", [])}
        assert env["LARKBOT_CONFIG"]["value"] == CONFIG_MOUNT, name
        workload = name.removeprefix("larkbot-")
        expected = [{"secretRef": {"name": K8S_SECRET}}]
        if workload in K8S_OWN_SECRETS:
            expected.append({"secretRef": {"name": f"larkbot-{workload}-secrets"}})
        assert container["envFrom"] == expected, name
        volumes = {v["name"]: v for v in spec["volumes"]}
        mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
        config = mounts[str(Path(CONFIG_MOUNT).parent)]
        assert config.get("readOnly") is True, name
        assert volumes[config["name"]]["configMap"]["name"] == K8S_CONFIG_MAP, name


def test_k8s_probes_and_scrape_annotations_use_the_ops_port() -> None:
    deployments = k8s_objects("Deployment")
    for name, port in SERVICES.items():
        template = deployments[name]["spec"]["template"]
        (container,) = template["spec"]["containers"]
        (ops,) = container["ports"]
        assert (ops["name"], ops["containerPort"]) == ("metrics", port), name
        for probe, path in (
            ("readinessProbe", "/readyz"),
            ("livenessProbe", "/healthz"),
            ("startupProbe", "/readyz"),
        ):
            get = container[probe]["httpGet"]
            assert get["path"] == path, f"{name} {probe}"
            assert get["port"] in ("metrics", port), f"{name} {probe}"
        # Start-up (migrations, a cold replay) is the startup probe's: liveness waits for it, not a delay.
        startup = container["startupProbe"]
        assert startup["periodSeconds"] * startup["failureThreshold"] >= 300, name
        assert "initialDelaySeconds" not in container["livenessProbe"], name
        annotations = template["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true", name
        assert annotations["prometheus.io/port"] == str(port), name
        assert annotations["prometheus.io/path"] == "/metrics", name


def test_k8s_services_expose_each_ops_port() -> None:
    deployments = k8s_objects("Deployment")
    services = k8s_objects("Service")
    assert set(services) == set(SERVICES)
    for name, port in SERVICES.items():
        service = services[name]["spec"]
        assert service.get("type", "ClusterIP") == "ClusterIP"
        (ops,) = service["ports"]
        assert (ops["name"], ops["port"]) == ("metrics", port), name
        assert ops.get("targetPort", port) in ("metrics", port), name
        pod_labels = deployments[name]["spec"]["template"]["metadata"]["labels"]
        assert service["selector"].items() <= pod_labels.items(), name
        assert deployments[name]["spec"]["selector"]["matchLabels"] == service["selector"], name
    # No webhook receiver is configured, hence no Service for one: webhook mode would need a port
    # (ingress-feishu 9111, ingress-telegram LARKBOT_TELEGRAM_WEBHOOK_PORT) added here.
    raw = yaml.safe_load(K8S_CONFIG.read_text(encoding="utf-8"))
    assert (raw["feishu"]["mode"], raw["telegram"]["mode"]) == ("long_connection", "polling")


def test_k8s_replicas_follow_what_each_service_allows() -> None:
    deployments = k8s_objects("Deployment")
    for name in INGRESSES:
        spec = deployments[name]["spec"]
        # One platform connection / poller: never two pods at once, not even during an update.
        assert spec["replicas"] == 1, name
        assert spec["strategy"] == {"type": "Recreate"}, name
    for name in LEASED:
        spec = deployments[name]["spec"]
        assert spec["replicas"] == 2, name
        assert spec["strategy"]["rollingUpdate"]["maxUnavailable"] == 0, name
    # The autoscaler owns media's replica count; a `replicas` field would reset it on every apply.
    assert "replicas" not in deployments["media"]["spec"]
    (hpa,) = k8s_objects("HorizontalPodAutoscaler").values()
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "media"}
    assert hpa["spec"]["minReplicas"] == 1 < hpa["spec"]["maxReplicas"]
    (metric,) = hpa["spec"]["metrics"]
    assert (metric["type"], metric["resource"]["name"]) == ("Resource", "cpu")
    (container,) = deployments["media"]["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["requests"]["cpu"], "CPU utilization is relative to the request"


def test_k8s_replicated_services_survive_a_drain_one_pod_at_a_time() -> None:
    deployments = k8s_objects("Deployment")
    budgets = k8s_objects("PodDisruptionBudget")
    assert set(budgets) == LEASED | {"llm-gateway"}
    for name, budget in budgets.items():
        spec = deployments[name]["spec"]
        pods = spec["template"]["metadata"]["labels"]
        assert budget["apiVersion"] == "policy/v1"
        assert budget["spec"]["selector"]["matchLabels"].items() <= pods.items(), name
        # minAvailable below the replica count, or the budget would block every drain.
        assert budget["spec"]["minAvailable"] == 1 < spec["replicas"], name
    for name in (*budgets, "media"):
        pod = deployments[name]["spec"]["template"]
        (spread,) = pod["spec"]["topologySpreadConstraints"]
        assert spread["topologyKey"] == "kubernetes.io/hostname", name
        assert spread["whenUnsatisfiable"] == "ScheduleAnyway", name  # a one-node cluster still schedules
        assert spread["labelSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items(), name


def test_k8s_pods_run_locked_down_with_a_long_enough_grace_period(compose: dict[str, Any]) -> None:
    # serve(): the service's stop (stop_timeout_s), background tasks (5 s), then the NATS drain.
    stop_budget = inspect.signature(serve).parameters["stop_timeout_s"].default + 5
    stop_budget += NatsSettings().drain_timeout_s
    compose_grace = int(str(services_of(compose)["pipeline"]["stop_grace_period"]).rstrip("s"))
    for name, spec in pod_specs().items():
        security = spec["securityContext"]
        assert security["runAsNonRoot"] is True, name
        assert security["runAsUser"] == 10001, name  # the image's user
        assert spec.get("automountServiceAccountToken") is False, name
        (container,) = spec["containers"]
        context = container["securityContext"]
        assert context["readOnlyRootFilesystem"] is True, name
        assert context["allowPrivilegeEscalation"] is False, name
        assert context["capabilities"]["drop"] == ["ALL"], name
        resources = container["resources"]
        for kind in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(resources[kind]), f"{name}: {kind}"
        # With a read-only root, every writable mount is an emptyDir (or a claim), never the host.
        volumes = {v["name"]: v for v in spec["volumes"]}
        for mount in container["volumeMounts"]:
            volume = volumes[mount["name"]]
            if not mount.get("readOnly"):
                assert "emptyDir" in volume or "persistentVolumeClaim" in volume, f"{name}: {mount}"
        if name in SERVICES:
            assert spec["terminationGracePeriodSeconds"] > stop_budget, name
            assert spec["terminationGracePeriodSeconds"] >= compose_grace, name
            mounted = {m["mountPath"] for m in container["volumeMounts"]}
            assert {"/var/lib/larkbot", "/tmp"} <= mounted, name


def test_k8s_manifests_carry_no_secret_value() -> None:
    for file, docs in k8s_resources().items():
        for doc in docs:
            assert doc["kind"] != "Secret", file
            if doc["kind"] not in ("Deployment", "Job"):
                continue
            for container in doc["spec"]["template"]["spec"]["containers"]:
                for entry in container.get("env", []):
                    secret_like = _SECRET_NAME.search(entry["name"]) or "DATABASE_URL" in entry["name"]
                    assert not (secret_like and "value" in entry), f"{file}: {entry['name']} inline"
                    ref = entry.get("valueFrom", {}).get("secretKeyRef")
                    assert ref is None or ref["name"] == K8S_SECRET, file
    raw = yaml.safe_load(K8S_CONFIG.read_text(encoding="utf-8"))
    secrets = [
        raw["nats"]["token"],
        raw["feishu"]["app_secret"],
        raw["telegram"]["bot_token"],
        *(endpoint["api_key"] for endpoint in raw["llm"]["endpoints"].values()),
        *(raw["services"][name]["database_url"] for name in LEASED),
    ]
    assert all(re.fullmatch(r"\$\{[A-Z_]+\}", s) for s in secrets), secrets


def test_k8s_example_secret_holds_placeholders_for_every_variable() -> None:
    docs = [d for d in yaml.safe_load_all(K8S_SECRET_EXAMPLE.read_text(encoding="utf-8")) if d is not None]
    for secret in docs:
        assert secret["kind"] == "Secret"
        assert "data" not in secret, "base64 values hide what they are; use stringData"
    by_name = k8s_example_secrets()
    assert set(by_name) == {K8S_SECRET} | {f"larkbot-{w}-secrets" for w in K8S_OWN_SECRETS}
    for workload, keys in K8S_OWN_SECRETS.items():
        assert set(by_name[f"larkbot-{workload}-secrets"]) == keys, workload
    shared_secrets = {key for key in by_name[K8S_SECRET] if _SECRET_NAME.search(key) or "DATABASE" in key}
    assert shared_secrets == {"NATS_TOKEN"}, "the shared Secret holds the NATS token and no other secret"
    values = k8s_example_secret()
    raw = yaml.safe_load(K8S_CONFIG.read_text(encoding="utf-8"))
    refs = [m for text in strings_in(raw) for m in _ENV_REF.finditer(text)]
    required = {m.group(1) for m in refs if m.group(2) is None}
    assert required <= set(values) <= {m.group(1) for m in refs}
    assert {"NATS_URL", "PIPELINE_DATABASE_URL", "DRIVER_DATABASE_URL"} <= required  # external services
    for key, value in values.items():
        if _SECRET_NAME.search(key):
            assert value == PLACEHOLDER, f"secret.example.yaml carries a value for {key}"
        if key.endswith("_URL"):
            host = re.sub(r"^[a-z+]+://(?:[^@/]*@)?", "", value).split("/")[0].split(":")[0]
            assert host.endswith(("example.com", "example.svc.cluster.local")), f"{key}: {value}"
        if key.endswith("DATABASE_URL"):
            assert f":{PLACEHOLDER}@" in value, f"{key} carries a password"


def test_each_k8s_workload_starts_with_the_secrets_its_pod_is_given() -> None:
    by_name = k8s_example_secrets()
    for name, spec in pod_specs().items():
        (container,) = spec["containers"]
        env: dict[str, str] = {}
        for source in container["envFrom"]:
            env.update(by_name[source["secretRef"]["name"]])
        workload = name.removeprefix("larkbot-")
        service = "bootstrap" if workload == "bootstrap" else workload
        config = load_config(K8S_CONFIG, env=env, service=service)
        for value in config.secret_values():
            assert value in env.values(), f"{name} holds a secret its pod was not given"


def test_k8s_config_passes_config_check() -> None:
    env = k8s_example_secret()
    config = load_config(K8S_CONFIG, env=env)
    assert config.nats.url == env["NATS_URL"]
    assert config.data_dir == "/var/lib/larkbot"
    for name, port in SERVICES.items():
        settings = config.services.for_service(name)
        assert settings.http_host == "0.0.0.0", f"{name}: probes and scrapes come from outside the pod"
        assert settings.http_port in (None, port), name
    for name in LEASED:
        url = config.services.for_service(name).database_url
        assert url is not None, name
        assert url.get_secret_value() == env[f"{name.upper()}_DATABASE_URL"]
    # The compose configuration with the in-cluster addresses: same platforms, roles and chats.
    compose_raw = yaml.safe_load(CONFIG_FILE.read_text(encoding="utf-8"))
    k8s_raw = yaml.safe_load(K8S_CONFIG.read_text(encoding="utf-8"))
    for key in ("data_dir", "maintainers", "feishu", "telegram", "llm", "chats"):
        assert k8s_raw[key] == compose_raw[key], key


def test_k8s_base_renders_with_kustomize() -> None:
    """``kubectl kustomize`` (no cluster needed) when kubectl is on PATH; skipped otherwise."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not on PATH")
    result = subprocess.run(
        [kubectl, "kustomize", str(K8S_DIR)], capture_output=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr.decode()
    rendered = [doc for doc in yaml.safe_load_all(result.stdout) if doc is not None]
    (config_map,) = [doc for doc in rendered if doc["kind"] == "ConfigMap"]
    generated = config_map["metadata"]["name"]
    assert generated.startswith(f"{K8S_CONFIG_MAP}-")  # hashed: a changed file rolls the pods
    assert config_map["data"][Path(CONFIG_MOUNT).name] == K8S_CONFIG.read_text(encoding="utf-8")
    pods = [doc for doc in rendered if doc["kind"] in ("Deployment", "Job")]
    assert len(pods) == len(SERVICES) + 1
    for doc in pods:
        volumes = doc["spec"]["template"]["spec"]["volumes"]
        assert {"name": generated} in [v.get("configMap") for v in volumes], doc["metadata"]["name"]


ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
#: What the NATS Helm chart's exporter (prometheus-nats-exporter, ``-prefix=nats -jsz=all``) names the
#: JetStream figures the rules read (its ``collector/jsz.go``).
NATS_EXPORTER_SERIES = {"nats_server_total_message_bytes", "nats_server_max_storage"}


def test_alert_rules_load_and_watch_metrics_the_services_define(compose: dict[str, Any]) -> None:
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text(encoding="utf-8"))
    assert config["rule_files"] == ["/etc/prometheus/alerts.yml"]
    assert (
        "./deploy/prometheus/alerts.yml:/etc/prometheus/alerts.yml:ro"
        in (services_of(compose)["prometheus"]["volumes"])
    )
    rules = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))
    recorded = {rule["record"] for group in rules["groups"] for rule in group["rules"] if "record" in rule}
    defined = defined_series() | {"up"} | recorded | NATS_EXPORTER_SERIES
    alerts = {}
    for group in rules["groups"]:
        for rule in group["rules"]:
            name = rule.get("alert") or rule["record"]
            names = metric_names_in(rule["expr"])
            assert names, name
            assert names <= defined, f"{name}: no such metric {sorted(names - defined)}"
            if "alert" in rule:
                assert rule["labels"]["severity"] in ("critical", "warning")
                alerts[name] = names
    # A crashed wake-up is a bug an alert must see.
    assert alerts["LarkbotWakeUpCrashed"] == {"larkbot_driver_wake_crashes_total"}


def test_alert_rules_pass_promtool() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian's prometheus package; .ci/run installs it)")
    result = subprocess.run(
        [promtool, "check", "rules", str(ALERTS)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
