"""The process: the bus connection and each service's own settings (``nats``, ``services``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import AliasChoices, Field, model_validator

from larkbot.canonical.names import SERVICE_PORTS, Service

from ._base import Secret, _problems, _Section

_SCHEMES = ("nats", "tls", "ws", "wss")


def server_list(text: str) -> tuple[str, ...]:
    """The servers of a ``nats.url`` / ``NATS_URL`` value: one URL or a comma-separated list of them.

    nats-py takes a list, never one string holding several URLs ("invalid connect url option"), so the
    list is split here, each URL checked for a scheme and a host (credentials are never echoed back)."""
    servers = tuple(part.strip() for part in text.split(",") if part.strip())
    if not servers:
        raise ValueError("no NATS server given")
    for server in servers:
        scheme, sep, rest = server.partition("://")
        host = rest.rpartition("@")[2].split("/", 1)[0]
        if not sep or scheme not in _SCHEMES or not host or host.startswith(":"):
            shown = f"{scheme}://…" if sep else "a URL without a scheme"
            raise ValueError(f"not a NATS server URL ({shown}); expected nats://host:port, comma-separated")
    return servers


class NatsSettings(_Section):
    #: One server, or a comma-separated list of a cluster's servers (``NATS_URL`` takes the same form).
    url: str = "nats://127.0.0.1:4222"
    #: A cluster's servers as a list; set either this or ``url``, not both.
    servers: tuple[str, ...] = ()
    name_prefix: str = "larkbot"
    connect_timeout_s: float = Field(default=5.0, gt=0)
    reconnect_time_wait_s: float = Field(default=0.5, gt=0)
    max_reconnect_wait_s: float = Field(default=10.0, gt=0)
    drain_timeout_s: float = Field(default=10.0, gt=0)
    user: str | None = None
    password: Secret | None = None
    token: Secret | None = None

    @model_validator(mode="after")
    def _servers_parse(self) -> NatsSettings:
        found: list[tuple[tuple[str | int, ...], str, Any]] = []
        if self.servers and "url" in self.model_fields_set:
            found.append((("servers",), "set either nats.url or nats.servers, not both", None))
        texts: list[tuple[tuple[str | int, ...], str]] = [(("url",), self.url)]
        texts += [(("servers", i), text) for i, text in enumerate(self.servers)]
        for loc, text in texts:
            try:
                server_list(text)
            except ValueError as exc:
                found.append((loc, str(exc), None))
        if found:
            raise _problems("nats", found)
        return self

    def server_urls(self, override: str | None = None) -> tuple[str, ...]:
        """The servers to connect to: ``override`` (``NATS_URL``) when given, else the configuration's."""
        if override:
            return server_list(override)
        if self.servers:
            return tuple(url for text in self.servers for url in server_list(text))
        return server_list(self.url)


class ServiceSettings(_Section):
    """Per-service process settings."""

    #: The operations endpoint listens on loopback unless told otherwise: a container or pod sets
    #: ``0.0.0.0`` (deploy/) so that probes and Prometheus reach it from outside.
    http_host: str = "127.0.0.1"
    http_port: int | None = Field(default=None, ge=0, le=65535)
    database_url: Secret | None = None
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"


class PipelineServiceSettings(ServiceSettings):
    """``services.pipeline``: the process settings and how much the resident chats may hold."""

    #: What the resident chats' projections may hold, estimated (``adapters.chats``), in MiB. Beyond it the
    #: chats idle longest are evicted and rebuilt from the database on their next event or request. 512
    #: MiB keeps a pipeline with 100,000 configured chats, 1 % of them active, under 1 GiB of RSS.
    resident_budget_mb: int = Field(default=512, ge=1)


class MediaServiceSettings(ServiceSettings):
    """``services.media``: the process settings and the frames it shows the vision model."""

    #: Frames picked from an animation, a video or a sticker (first and last included). A worker setting:
    #: media jobs carry no chat settings yet (``MediaJob.max_frames`` may only ask for fewer).
    max_frames: int = Field(default=5, ge=1, le=5)


def _service_field(service: Service) -> Any:
    """A service's settings, under its name (``ingress-feishu``) or its field's (``ingress_feishu``); a
    problem is reported under the key as written."""
    field = service.value.replace("-", "_")
    return Field(default=ServiceSettings(), validation_alias=AliasChoices(service.value, field))


class ServicesSettings(_Section):
    """``services.<name>``: each service under its own name (``ingress-feishu``, the name the CLI, the
    compose file, the logs and the docs use) or its field's spelling (``ingress_feishu``, so files written
    that way keep working). Both spellings of one service at once is an error naming the key, never a
    silent choice between two settings."""

    ingress_feishu: ServiceSettings = _service_field(Service.INGRESS_FEISHU)
    ingress_telegram: ServiceSettings = _service_field(Service.INGRESS_TELEGRAM)
    pipeline: PipelineServiceSettings = PipelineServiceSettings()
    driver: ServiceSettings = ServiceSettings()
    media: MediaServiceSettings = MediaServiceSettings()
    llm_gateway: ServiceSettings = _service_field(Service.LLM_GATEWAY)

    @model_validator(mode="before")
    @classmethod
    def _one_spelling(cls, value: Any) -> Any:
        if not isinstance(value, Mapping):
            return value  # let validation name the section
        found: list[tuple[tuple[str | int, ...], str, Any]] = [
            ((s.value,), f"given twice, as {s.value!r} and as {field!r}: keep one", None)
            for s in Service
            if (field := s.value.replace("-", "_")) != s.value and s.value in value and field in value
        ]
        if found:
            raise _problems("services", found)
        return value

    def for_service(self, service: str) -> ServiceSettings:
        settings: ServiceSettings = getattr(self, service.replace("-", "_"))
        return settings

    def http_port(self, service: str) -> int:
        """The operations port of ``service``: configured, else its fixed default (DESIGN §6)."""
        configured = self.for_service(service).http_port
        return configured if configured is not None else SERVICE_PORTS[Service(service)]
