"""What ``larkbot up``, the playground and ``larkbot say`` know about a local stack: where each service's
operations endpoint is, whether it answers and is ready, and whether a port is free to listen on."""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp

from larkbot.runtime.config import LarkbotConfig

#: The playground's control port (``larkbot up --playground``, ``larkbot playground``, ``larkbot say``):
#: this variable, else 9189.
PLAYGROUND_PORT_ENV = "LARKBOT_PLAYGROUND_PORT"
DEFAULT_PLAYGROUND_PORT = 9189
#: Where the playground serves the fake Bot API and the fake model unless the configuration points
#: elsewhere (``telegram.api_base``, the ``fake: true`` endpoint's ``base_url``).
PLAYGROUND_TELEGRAM_PORT = 9180
PLAYGROUND_LLM_PORT = 9190
SAY_EXAMPLE = "hello @LarkBot, what is new?"
_WILDCARDS = frozenset({"", "0.0.0.0", "::"})


def playground_port(given: int | None = None) -> int:
    """``given`` (a ``--control-port``), else :data:`PLAYGROUND_PORT_ENV`, else the default."""
    if given is not None:
        return given
    raw = os.environ.get(PLAYGROUND_PORT_ENV)
    if not raw:
        return DEFAULT_PLAYGROUND_PORT
    try:
        port = int(raw)
    except ValueError:
        raise SystemExit(f"{PLAYGROUND_PORT_ENV}={raw!r} is not a port number") from None
    if not 0 < port < 65536:
        raise SystemExit(f"{PLAYGROUND_PORT_ENV}={raw!r} is not a port number")
    return port


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A listener of the stack: what listens (``pipeline``, ``playground control``), where."""

    name: str
    host: str
    port: int

    @property
    def url(self) -> str:
        """Where a client on this machine reaches it (loopback when it listens on every interface)."""
        host = "127.0.0.1" if self.host in _WILDCARDS else self.host
        return f"http://{host}:{self.port}"


def ops_endpoints(config: LarkbotConfig, services: list[str]) -> list[Endpoint]:
    return [
        Endpoint(name, config.services.for_service(name).http_host, config.services.http_port(name))
        for name in services
    ]


def inspector_endpoint(config: LarkbotConfig) -> Endpoint:
    """Where the web inspector listens (``inspector.host``/``inspector.port``, default loopback:9188)."""
    return Endpoint("inspector", config.inspector.host, config.inspector.port)


def port_taken(endpoint: Endpoint) -> str | None:
    """Why ``endpoint`` cannot listen (another process holds the port, a host that is not this machine's),
    or ``None``. Binds the way the services do (``SO_REUSEADDR``), so a port in TIME_WAIT counts as free."""
    try:
        infos = socket.getaddrinfo(endpoint.host or None, endpoint.port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        return f"cannot resolve {endpoint.host!r}: {exc.strerror}"
    family, kind, proto, _name, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return f"port {endpoint.port} is in use by another process"
            return f"cannot listen on {endpoint.host}:{endpoint.port}: {exc.strerror}"
    return None


@dataclass(frozen=True, slots=True)
class Readiness:
    state: str  # "ready" | "not ready" | "not answering"
    detail: str = ""


async def readiness(
    session: aiohttp.ClientSession, url: str, headers: dict[str, str] | None = None
) -> Readiness:
    """``GET url`` of an operations endpoint's ``/readyz``: ready, not ready (the failing checks), or no
    answer at all. ``headers``: the playground's token, when one is configured."""
    try:
        async with session.get(url, headers=headers) as resp:
            body = await resp.json(content_type=None)
            if resp.status == 200:
                return Readiness("ready")
            checks = body.get("checks", {}) if isinstance(body, dict) else {}
            failing = [f"{k}: {v.get('detail')}" for k, v in checks.items() if not v.get("ok")]
            return Readiness("not ready", "; ".join(failing) or f"HTTP {resp.status}")
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        return Readiness("not answering", type(exc).__name__)


def page_token_headers(config: LarkbotConfig) -> dict[str, str]:
    """What a client of the playground's control API sends: the web pages' token, when configured."""
    token = config.inspector.access_token
    return {"Authorization": f"Bearer {token.get_secret_value()}"} if token is not None else {}


def say_command(control_port: int) -> str:
    """The ``larkbot say`` line to show: the ``larkbot`` script of this environment (``.venv/bin/larkbot``
    after ``make up``, which needs nothing on the PATH), the control port when it is not the default."""
    script = Path(sys.executable).parent / "larkbot"
    if script.exists():
        with contextlib.suppress(ValueError):  # outside the working directory: the absolute path
            script = script.relative_to(Path.cwd())
        command = str(script)
    else:
        command = f"{sys.executable} -m larkbot.cli"
    port = f" --control-port {control_port}" if control_port != DEFAULT_PLAYGROUND_PORT else ""
    return f'{command} say "{SAY_EXAMPLE}"{port}'


def playground_ports(config: LarkbotConfig, control_port: int) -> dict[str, int]:
    """The playground serves the fake Bot API and fake model where the configuration points."""
    ports = {"control": control_port, "telegram": PLAYGROUND_TELEGRAM_PORT, "llm": PLAYGROUND_LLM_PORT}
    if config.telegram is not None and urlsplit(config.telegram.api_base).port:
        ports["telegram"] = urlsplit(config.telegram.api_base).port or ports["telegram"]
    fakes = [e for e in config.llm.endpoints.values() if e.fake and urlsplit(e.base_url).port]
    if fakes:
        ports["llm"] = urlsplit(fakes[0].base_url).port or ports["llm"]
    return ports
