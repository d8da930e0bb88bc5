"""The deployment files: Dockerfile, docker-compose.yml, deploy/ (NATS, PostgreSQL, the compose config).

No container engine is needed: the compose file is parsed with PyYAML (merge keys resolved) and held to
the facts an operator relies on; the configuration it mounts goes through ``larkbot config check``
in-process; the NATS configuration through ``nats-server -t`` (the workspace's own binary); the readiness
healthcheck one-liner runs against a local HTTP server.

``test_compose_file_passes_installed_validators`` runs every compose validator found on PATH
(``docker compose`` when the plugin answers, ``docker-compose``, ``check-jsonschema`` with the vendored
compose-spec schema); when none is installed, that test alone is skipped with the reason, and
``test_dockerfile_passes_hadolint`` likewise without ``hadolint``. The structural tests always run.
"""

from __future__ import annotations

import os
import re
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

from larkbot.canonical.names import SERVICE_PORTS, StreamSpec
from larkbot.cli.main import main as larkbot_main
from larkbot.runtime.config import LarkbotConfig, load_config
from larkbot.runtime.natsserver import find_binary

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
CONFIG_FILE = ROOT / "deploy" / "config" / "compose.yaml"
NATS_CONF = ROOT / "deploy" / "nats" / "nats.conf"
INITDB = ROOT / "deploy" / "postgres" / "initdb.sql"
ENV_EXAMPLE = ROOT / "deploy" / "env.example"

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
    assert set(services) == {*SERVICES, "bootstrap", "nats", "postgres"}


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
    for name, service in services_of(compose).items():
        for key, value in (service.get("environment") or {}).items():
            if _SECRET_NAME.search(key):
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


def test_every_variable_the_config_requires_reaches_the_containers(compose: dict[str, Any]) -> None:
    raw = yaml.safe_load(CONFIG_FILE.read_text(encoding="utf-8"))
    required = {m.group(1) for text in strings_in(raw) for m in _ENV_REF.finditer(text) if m.group(2) is None}
    assert required == set(DUMMY_ENV)
    for name in [*SERVICES, "bootstrap"]:
        assert required <= set(services_of(compose)[name]["environment"]), name


def test_media_scales_without_port_conflicts(compose: dict[str, Any]) -> None:
    services = services_of(compose)
    for name in SERVICES:
        assert "ports" not in services[name], f"{name} publishes a host port"
        assert "container_name" not in services[name], name
    assert all(str(p).startswith("127.0.0.1:") for p in services["nats"]["ports"])


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
