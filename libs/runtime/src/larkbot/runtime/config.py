"""The one configuration file: loading, ``${ENV}`` interpolation, per-chat merge, validation.

``config.yaml`` (path from ``LARKBOT_CONFIG``) is validated at start-up; problems raise one
:class:`~larkbot.canonical.ConfigError` naming the file and every bad key by its dotted path, and the
process exits non-zero. There are no silent defaults for invalid values.

Interpolation: ``${NAME}`` is replaced by the environment variable (missing → error naming the key),
``${NAME:-fallback}`` falls back when unset or empty. Interpolation happens on string scalars only and
never re-expands its own output.

Chats: the keys of ``chats`` other than ``default`` are the residency whitelist, written
``<platform>:<chat_id>``; each is ``chats.default`` deep-merged with its own mapping.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from larkbot.canonical.errors import ConfigError
from larkbot.canonical.names import SERVICE_PORTS, Platform, Service

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
DEFAULT_CONFIG_PATH = "config.yaml"


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class NatsSettings(_Section):
    url: str = "nats://127.0.0.1:4222"
    name_prefix: str = "larkbot"
    connect_timeout_s: float = Field(default=5.0, gt=0)
    reconnect_time_wait_s: float = Field(default=0.5, gt=0)
    max_reconnect_wait_s: float = Field(default=10.0, gt=0)
    drain_timeout_s: float = Field(default=10.0, gt=0)
    user: str | None = None
    password: SecretStr | None = None
    token: SecretStr | None = None


class ServiceSettings(_Section):
    """Per-service process settings."""

    #: The operations endpoint listens on loopback unless told otherwise: a container or pod sets
    #: ``0.0.0.0`` (deploy/) so that probes and Prometheus reach it from outside.
    http_host: str = "127.0.0.1"
    http_port: int | None = Field(default=None, ge=0, le=65535)
    database_url: SecretStr | None = None
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"


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
    pipeline: ServiceSettings = ServiceSettings()
    driver: ServiceSettings = ServiceSettings()
    media: ServiceSettings = ServiceSettings()
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


class FeishuSettings(_Section):
    app_id: str
    app_secret: SecretStr
    domain: str = "https://open.feishu.cn"
    mode: Literal["long_connection", "webhook"] = "long_connection"
    verification_token: SecretStr | None = None
    encrypt_key: SecretStr | None = None
    #: Webhook receiver (mode ``webhook``): its own listener, apart from the operations port.
    webhook_host: str = "0.0.0.0"
    webhook_port: int = Field(default=9111, ge=0, le=65535)
    webhook_path: str = "/feishu/events"
    name_ttl_s: float = Field(default=6 * 3600.0, gt=0)
    #: Must stay well under Feishu's 3 s: the event frame is acknowledged only after the PubAck.
    ack_timeout_s: float = Field(default=2.5, gt=0, lt=3)
    api_timeout_s: float = Field(default=10.0, gt=0)
    #: At most this many attempts of one send (same uuid); its deadline (the turn's) normally ends it first.
    send_attempts: int = Field(default=8, ge=1)
    #: Restart the long connection after it has been down this long (the SDK can die silently).
    reconnect_watchdog_s: float = Field(default=60.0, gt=0)


class TelegramSettings(_Section):
    bot_token: SecretStr
    api_base: str = "https://api.telegram.org"
    mode: Literal["polling", "webhook"] = "polling"
    webhook_secret: SecretStr | None = None
    #: Webhook receiver (mode ``webhook``): its own listener, apart from the operations port;
    #: ``webhook_url`` (public HTTPS URL) is registered with ``setWebhook`` when set.
    webhook_host: str = "0.0.0.0"
    webhook_port: int = Field(default=8443, ge=0, le=65535)
    webhook_url: str | None = None
    polling_timeout_s: int = Field(default=25, ge=1, le=50)


MaxTokensField = Literal["max_tokens", "max_completion_tokens"]
#: OpenAI reasoning models (o1, o3, o4-mini, gpt-5 and its successors), also behind a ``vendor/`` prefix.
_OPENAI_REASONING = re.compile(r"^(o[1-9]|gpt-[5-9])")
_THINKING_TYPES = frozenset({"enabled", "adaptive"})


class LlmAccepts(_Section):
    """What the endpoint's model accepts; the gateway sends nothing else. An unset key takes the default
    of the model's family (:meth:`LlmEndpoint.resolved_accepts`, table in ``docs/llm-gateway.md``).

    - ``max_tokens_field``: how ``openai-chat`` names the output limit (reasoning models take only
      ``max_completion_tokens``; vLLM, Ollama and most compatible servers read ``max_tokens``).
    - ``temperature``: whether a temperature may be sent (OpenAI reasoning models and Anthropic models
      with thinking refuse it).
    - ``forced_tool_choice``: whether ``tool_choice`` may force a tool (Anthropic with thinking and
      DeepSeek's thinking mode refuse it); when not, the gateway asks with ``auto``.
    - ``replay_reasoning``: whether the model's own reasoning and provider fields are sent back to it
      (Groq refuses ``reasoning`` / ``reasoning_content`` on input messages).
    """

    max_tokens_field: MaxTokensField | None = None
    temperature: bool | None = None
    forced_tool_choice: bool | None = None
    replay_reasoning: bool | None = None


class ResolvedAccepts(_Section):
    """:class:`LlmAccepts` with every key decided (configuration first, then the family default)."""

    max_tokens_field: MaxTokensField
    temperature: bool
    forced_tool_choice: bool
    replay_reasoning: bool


def family_accepts(
    fmt: str, model: str, base_url: str, extra_body: Mapping[str, Any]
) -> dict[str, bool | str]:
    """The defaults of a known model family; anything unknown accepts everything (compatibility)."""
    name = model.rsplit("/", 1)[-1].lower()
    host = (urlsplit(base_url).hostname or "").lower()
    thinking = extra_body.get("thinking")
    thinking_on = isinstance(thinking, Mapping) and thinking.get("type") in _THINKING_TYPES
    out: dict[str, bool | str] = {
        "max_tokens_field": "max_tokens",
        "temperature": True,
        "forced_tool_choice": True,
        "replay_reasoning": True,
    }
    if fmt in ("openai-chat", "responses") and _OPENAI_REASONING.match(name):
        out["max_tokens_field"] = "max_completion_tokens"
        out["temperature"] = False
    if fmt == "anthropic-messages" and thinking_on:
        out["temperature"] = False
        out["forced_tool_choice"] = False
    if name.startswith("deepseek-reasoner"):
        out["temperature"] = False
        out["forced_tool_choice"] = False
    if host == "api.groq.com":
        out["replay_reasoning"] = False
    return out


class LlmEndpoint(_Section):
    format: Literal["openai-chat", "anthropic-messages", "responses"]
    base_url: str
    model: str
    api_key: SecretStr | None = None
    timeout_s: float = Field(default=60.0, gt=0)
    connect_timeout_s: float = Field(default=5.0, gt=0)
    max_images: int = Field(default=8, ge=0)
    supports_prompt_cache_key: bool = False
    #: Reasoning parts are replayed to the same model for this many newest turns.
    reasoning_replay_turns: int = Field(default=3, ge=0)
    #: Used when a request names no limit (anthropic-messages requires one).
    default_max_output_tokens: int = Field(default=4096, ge=1)
    #: The model's context window in its own tokens (input + output). When set, the driver never sends a
    #: request whose calibrated estimate plus ``default_max_output_tokens`` exceeds it: it compacts or
    #: trims first.
    context_window_tokens: int | None = Field(default=None, gt=0)
    #: Merged into every request body (e.g. a thinking budget or reasoning effort).
    extra_body: dict[str, Any] = {}
    #: What the model accepts; unset keys follow its family (see :class:`LlmAccepts`).
    accepts: LlmAccepts = LlmAccepts()
    fake: bool = False

    @model_validator(mode="after")
    def _accepts_fit_format(self) -> LlmEndpoint:
        if self.accepts.max_tokens_field is not None and self.format != "openai-chat":
            raise ValueError("accepts.max_tokens_field applies to format openai-chat only")
        return self

    def resolved_accepts(self) -> ResolvedAccepts:
        """What to send: each configured key, else the family default."""
        defaults = family_accepts(self.format, self.model, self.base_url, self.extra_body)
        configured = self.accepts.model_dump(exclude_none=True)
        return ResolvedAccepts.model_validate({**defaults, **configured})


class LlmSettings(_Section):
    endpoints: dict[str, LlmEndpoint] = {}
    probe: str | None = None
    primary: str | None = None
    compaction: str | None = None
    vision: str | None = None
    memory: str | None = None
    dump_dir: str | None = None
    #: Keys the ``prompt_cache_key`` the gateway sends to endpoints with ``supports_prompt_cache_key``
    #: (an HMAC of the chat and the purpose: no chat id reaches the provider). One value for the whole
    #: deployment, so every gateway replica, and a restarted one, sends the same key for a chat. Unset or
    #: empty: no ``prompt_cache_key`` is sent at all (the gateway warns at start-up).
    prompt_cache_key_salt: SecretStr | None = None

    @field_validator("prompt_cache_key_salt", mode="before")
    @classmethod
    def _empty_salt_is_unset(cls, value: Any) -> Any:
        # `${LLM_PROMPT_CACHE_KEY_SALT:-}` in a shared configuration file leaves it empty where unset.
        return None if value == "" else value

    @field_validator("prompt_cache_key_salt")
    @classmethod
    def _salt_long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        # A short salt can be guessed, and with it every chat id behind the keys.
        if value is not None and len(value.get_secret_value()) < 16:
            raise ValueError("at least 16 characters (e.g. `openssl rand -hex 32`)")
        return value


def _user_id(value: str) -> str:
    trimmed = value.strip()
    if not trimmed:
        raise PydanticCustomError("empty_id", "a user id must not be empty")
    return trimmed


def _problems(title: str, found: list[tuple[tuple[str | int, ...], str, Any]]) -> ValidationError:
    """One validation error per ``(location, message, input)``: pydantic prefixes each location with the
    field's or model's own, so a problem names its exact key (``maintainers.1``)."""
    return ValidationError.from_exception_data(
        title,
        [
            InitErrorDetails(type=PydanticCustomError("invalid", msg), loc=loc, input=value)
            for loc, msg, value in found
        ],
    )


def _unique_ids(ids: tuple[str, ...]) -> tuple[str, ...]:
    first: dict[str, int] = {}
    found: list[tuple[tuple[str | int, ...], str, Any]] = []
    for index, user_id in enumerate(ids):
        seen = first.setdefault(user_id, index)
        if seen != index:
            found.append(((index,), f"duplicates the id at index {seen}", user_id))
    if found:
        raise _problems("user ids", found)
    return ids


#: Platform user ids from trusted configuration (Feishu ``ou_…`` open_ids, Telegram user ids as strings):
#: each trimmed and non-empty, none twice.
UserIds = Annotated[tuple[Annotated[str, AfterValidator(_user_id)], ...], AfterValidator(_unique_ids)]


class ChatSettings(_Section):
    """Per-chat behaviour; every field has a default so ``chats.default`` may be sparse."""

    display_name: str | None = None
    utc_offset_min: int | None = Field(default=None, ge=-840, le=840)
    alias_message_ids: bool = True
    persona_files: tuple[str, ...] = ()
    contact_names: dict[str, str] = {}
    blocked_users: UserIds = ()
    initial_delay_ms: int = Field(default=1000, ge=0)
    typing_extend_ms: int = Field(default=5000, ge=0)
    max_delay_ms: int = Field(default=30000, ge=0)
    probe_enabled: bool = True
    probe_context_est_tokens: int = Field(default=20000, gt=0)
    probe_timeout_s: float = Field(default=15.0, gt=0)
    #: Compaction (SPEC §4.5): when the history after the cursor (rendered context + turn responses)
    #: exceeds ``max_context_est_tokens``, its oldest part is summarized down to
    #: ``working_window_est_tokens``; the summary is capped at ``summary_max_est_tokens``.
    max_context_est_tokens: int = Field(default=60000, gt=0)
    working_window_est_tokens: int = Field(default=30000, gt=0)
    summary_max_est_tokens: int = Field(default=3000, ge=100)
    compaction_enabled: bool = True
    #: A failed compaction waits this long before the next attempt, doubling up to the maximum.
    compaction_retry_initial_s: float = Field(default=300.0, gt=0)
    compaction_retry_max_s: float = Field(default=3600.0, gt=0)
    #: A segment (one message, event or runtime output) larger than this is clipped for the model: its
    #: beginning and end are kept around a ``<clipped omitted-chars="N"/>`` marker.
    max_segment_est_tokens: int = Field(default=4000, ge=200)
    max_tool_rounds: int = Field(default=2, ge=1)
    max_work_tool_calls: int = Field(default=4, ge=0)
    max_send_attempts: int = Field(default=3, ge=0)
    turn_deadline_s: float = Field(default=15.0, gt=0)
    min_model_call_s: float = Field(default=2.0, ge=0)
    #: Delays before the retries of a wake-up that failed transiently; their count is the retry count.
    transient_retry_delays_s: tuple[Annotated[float, Field(gt=0)], ...] = Field(
        default=(5.0, 20.0), max_length=5
    )
    #: Consecutive bot-to-bot messages after which input only from other bots no longer wakes the bot.
    bot_exchange_cap: int = Field(default=4, ge=1)
    #: Cap of the compaction summary shown to the probe (outside its window budget); newest part kept.
    probe_summary_max_est_tokens: int = Field(default=2000, ge=0)
    #: Attempts of a send / reaction whose outcome stays unknown (same idempotency key each time).
    action_attempts: int = Field(default=3, ge=1, le=10)
    maintainer_window_sec: int = Field(default=600, ge=0)
    #: Per-person memory (docs/memory.md): the memory tools and the late-binding ``<memory>`` block.
    memory_enabled: bool = True
    #: The platform user id this chat is a direct (one-to-one) chat with; only there are that person's
    #: ``private`` memories used. Unset: the chat is a group (no private memories at all).
    direct_with: str | None = Field(default=None, min_length=1, max_length=128)
    #: High-importance memories of the people in the window shown in the late-binding message: at most
    #: this many, and at most this many characters in all.
    memory_late_binding_max: int = Field(default=20, ge=0, le=200)
    memory_late_binding_max_chars: int = Field(default=2000, ge=0, le=20000)
    #: ``memory_search`` results: at most this many, and at most this many characters in all.
    memory_search_max_results: int = Field(default=8, ge=1, le=50)
    memory_search_max_chars: int = Field(default=2000, ge=200, le=20000)
    shell_enabled: bool = False
    ban_spammer_enabled: bool = False
    #: Dry run (docs/driver.md "Dry run"): the driver runs and records its wake-ups, and nothing reaches
    #: the platform (sends, reactions, typing, recalls, moderation and the shell become recorded no-ops).
    #: The deployment's top-level ``dry_run`` turns it on for every chat.
    dry_run: bool = False
    #: In a dry run, whether the primary model is called; when not, the turn ends silent unanswered.
    dry_run_call_model: bool = True

    @model_validator(mode="after")
    def _windows_consistent(self) -> ChatSettings:
        if self.working_window_est_tokens >= self.max_context_est_tokens:
            raise ValueError(
                f"working_window_est_tokens ({self.working_window_est_tokens}) must be below "
                f"max_context_est_tokens ({self.max_context_est_tokens})"
            )
        if self.compaction_retry_max_s < self.compaction_retry_initial_s:
            raise ValueError("compaction_retry_max_s must be at least compaction_retry_initial_s")
        return self

    @model_validator(mode="after")
    def _segment_fits_windows(self) -> ChatSettings:
        # A clipped segment must fit half of every window it is shown in: the probe window keeps its
        # newest half-budget, and the working window must hold more than one message.
        limit = min(self.probe_context_est_tokens, self.working_window_est_tokens) // 2
        if self.max_segment_est_tokens > limit:
            raise ValueError(
                f"max_segment_est_tokens ({self.max_segment_est_tokens}) must be at most half of "
                f"probe_context_est_tokens and of working_window_est_tokens ({limit})"
            )
        return self


class MemorySettings(_Section):
    """Deployment-wide memory settings (docs/memory.md)."""

    #: Whether ``global`` memories exist here: saved with scope ``global`` and used in every chat of the
    #: platform. Off by default: a fact learnt in one group stays in that group.
    global_scope: bool = False
    #: Consolidation: per person and scope, many ``normal`` memories are merged by the ``memory`` model
    #: (else ``compaction``, else ``primary``) into fewer ``high`` ones; the originals are disabled.
    consolidation_enabled: bool = True
    consolidation_interval_s: float = Field(default=3600.0, gt=0)
    consolidation_min_count: int = Field(default=12, ge=2)
    #: The most memories one consolidation call reads.
    consolidation_max_batch: int = Field(default=60, ge=2, le=500)
    consolidation_retry_initial_s: float = Field(default=600.0, gt=0)
    consolidation_retry_max_s: float = Field(default=86400.0, gt=0)
    consolidation_timeout_s: float = Field(default=120.0, gt=0)

    @model_validator(mode="after")
    def _retry_consistent(self) -> MemorySettings:
        if self.consolidation_retry_max_s < self.consolidation_retry_initial_s:
            raise ValueError("consolidation_retry_max_s must be at least consolidation_retry_initial_s")
        if self.consolidation_max_batch < self.consolidation_min_count:
            raise ValueError("consolidation_max_batch must be at least consolidation_min_count")
        return self


_SHELL_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: Set by the driver for every command; not passed through.
_SHELL_ENV_RESERVED = frozenset({"PATH", "HOME"})


class ShellSettings(_Section):
    """Deployment-wide settings of the shell tools (``bash``, ``kill_task``, ``read_task_output``;
    docs/driver.md "Shell tools"). A chat uses them only with ``shell_enabled``. Not a sandbox."""

    #: The shell a command runs in (``<executable> <file holding the command>``).
    executable: str = "/bin/bash"
    #: The commands' working directory (shared by every command; default ``<data_dir>/shell/work``).
    working_dir: str | None = None
    #: Where each task's output and exit status are kept (default ``<data_dir>/shell/tasks``).
    output_dir: str | None = None
    #: ``PATH`` of the commands. Their environment is built from scratch: ``PATH``, ``HOME`` (the working
    #: directory), ``LANG``, and only the variables named in ``env_passthrough``, copied from the driver's.
    path: str = Field(default="/usr/local/bin:/usr/bin:/bin", min_length=1)
    env_passthrough: tuple[str, ...] = ()
    #: The longest a ``bash`` call waits (its ``timeout_seconds`` and the turn's deadline bound it too);
    #: a command still running then continues as a background task.
    max_timeout_s: float = Field(default=60.0, gt=0, le=3600)
    #: Bytes of output in a tool result (head and tail kept around a marker); also the most one
    #: ``read_task_output`` call returns.
    max_output_bytes: int = Field(default=4000, ge=200, le=100_000)
    #: Bytes of the output's tail in a task's completion event.
    event_output_bytes: int = Field(default=1000, ge=0, le=20_000)
    #: Background tasks running at once on one host; a ``bash`` call beyond it is refused.
    max_tasks: int = Field(default=4, ge=1, le=100)
    #: Finished tasks' rows and output files are removed this many days after they finished.
    retention_days: float = Field(default=7.0, gt=0)
    #: How often running tasks are looked at (their completion is announced within about this).
    poll_interval_s: float = Field(default=1.0, gt=0, le=60)
    #: ``kill_task`` sends SIGTERM to the task's process group, then SIGKILL after this long.
    kill_grace_s: float = Field(default=3.0, ge=0, le=60)

    @field_validator("env_passthrough")
    @classmethod
    def _env_names(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        for name in names:
            if not _SHELL_ENV_NAME.match(name):
                raise ValueError(f"{name!r} is not an environment variable name")
            if name in _SHELL_ENV_RESERVED:
                raise ValueError(f"{name} is set by the driver (shell.path, the working directory)")
            if name.startswith("LARKBOT_"):
                raise ValueError(f"{name}: the service's own variables are never passed to commands")
        if len(set(names)) != len(names):
            raise ValueError("names must be unique")
        return names


class AuditSettings(_Section):
    """The per-wake-up audit trail (``driver_wakeups``) and request log (``driver_requests``; docs/driver.md
    "Audit trail")."""

    enabled: bool = True
    #: ``False``: the audit record keeps the probe's reason as its sha256 (``sha256:<hex>``), not the
    #: text, and the request log keeps only the hashes of the requests' blocks, not their texts.
    store_content: bool = True
    #: Audit records, logged requests and sent message ids older than this are deleted (and nothing else).
    retention_days: float = Field(default=30.0, gt=0)


class InspectorSettings(_Section):
    """The web inspector and the browser playground (docs/inspector.md): where they listen and the token a
    bind beyond loopback requires."""

    #: Loopback by default; any other address (``0.0.0.0`` in a container) needs ``access_token``.
    host: str = "127.0.0.1"
    port: int = Field(default=9188, ge=0, le=65535)
    #: Asked of every request when set (``Authorization: Bearer``, or once as ``?token=`` which sets a
    #: cookie); required for a bind beyond loopback.
    access_token: SecretStr | None = None

    @model_validator(mode="after")
    def _token_beyond_loopback(self) -> InspectorSettings:
        if not is_loopback(self.host) and self.access_token is None:
            raise _problems(
                "inspector",
                [(("access_token",), f"required when the inspector listens on {self.host!r}", None)],
            )
        if self.access_token is not None and len(self.access_token.get_secret_value()) < 16:
            raise _problems("inspector", [(("access_token",), "at least 16 characters", "<secret>")])
        return self


def is_loopback(host: str) -> bool:
    """``host`` names this machine's loopback only (a literal address or ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class LarkbotConfig(_Section):
    nats: NatsSettings = NatsSettings()
    data_dir: str = "data"
    utc_offset_min: int | None = Field(default=None, ge=-840, le=840)
    services: ServicesSettings = ServicesSettings()
    maintainers: UserIds = ()
    feishu: FeishuSettings | None = None
    telegram: TelegramSettings | None = None
    llm: LlmSettings = LlmSettings()
    memory: MemorySettings = MemorySettings()
    shell: ShellSettings = ShellSettings()
    audit: AuditSettings = AuditSettings()
    inspector: InspectorSettings = InspectorSettings()
    #: Dry run for every chat (``ChatSettings.dry_run``).
    dry_run: bool = False
    chats: dict[str, ChatSettings] = {}

    @field_validator("chats", mode="before")
    @classmethod
    def _merge_defaults(cls, value: Any) -> Any:
        if not isinstance(value, Mapping):
            return value
        default = value.get("default") or {}
        if not isinstance(default, Mapping):
            return value  # let validation name chats.default
        merged: dict[str, Any] = {"default": default}
        for key, chat in value.items():
            if key == "default":
                continue
            merged[key] = deep_merge(default, chat) if isinstance(chat, Mapping) else chat
        return merged

    @field_validator("chats")
    @classmethod
    def _chat_keys(cls, value: dict[str, ChatSettings]) -> dict[str, ChatSettings]:
        platforms = {p.value for p in Platform}
        for key in value:
            if key == "default":
                continue
            platform, sep, chat_id = key.partition(":")
            if not sep or platform not in platforms or not chat_id:
                raise ValueError(
                    f"chat key {key!r} must be '<platform>:<chat_id>' with platform in {sorted(platforms)}"
                )
        return value

    @model_validator(mode="after")
    def _maintainers_not_blocked(self) -> LarkbotConfig:
        # Maintainer status opens the shell tools; a blocked sender must never hold it.
        maintainers = frozenset(self.maintainers)
        found: list[tuple[tuple[str | int, ...], str, Any]] = [
            (("chats", key, "blocked_users", index), "a maintainer cannot be a blocked user", user_id)
            for key, chat in self.chats.items()
            for index, user_id in enumerate(chat.blocked_users)
            if user_id in maintainers
        ]
        if found:
            raise _problems("maintainers", found)
        return self

    @model_validator(mode="after")
    def _direct_chats(self) -> LarkbotConfig:
        # ``direct_with`` opens a person's private memories to a chat: it names one direct chat's person.
        # In chats.default it would open them to every chat; on Telegram a private chat's id is its
        # person's user id, so any other value names a group (or someone else).
        default = self.chats.get("default")
        if default is not None and default.direct_with is not None:
            where = ("chats", "default", "direct_with")
            msg = "names the person of one direct chat: set it on that chat, not in chats.default"
            raise _problems("chats", [(where, msg, None)])
        found: list[tuple[tuple[str | int, ...], str, Any]] = []
        for key, chat in self.chats.items():
            platform, _, chat_id = key.partition(":")
            if platform != Platform.TELEGRAM.value or chat.direct_with in (None, chat_id):
                continue
            if chat_id.isdigit():
                msg = f"a Telegram private chat's id is its person's user id: {chat_id}, or leave it unset"
            else:
                msg = "a Telegram group (negative id) is never a direct chat: leave it unset"
            found.append((("chats", key, "direct_with"), msg, None))
        if found:
            raise _problems("chats", found)
        return self

    def chat(self, platform: str, chat_id: str) -> ChatSettings | None:
        """Settings of a configured chat, or ``None`` when the chat is not on the whitelist."""
        return self.chats.get(f"{platform}:{chat_id}")

    def chat_ids(self, platform: str) -> frozenset[str]:
        prefix = f"{platform}:"
        return frozenset(k[len(prefix) :] for k in self.chats if k.startswith(prefix))

    def secret_values(self) -> list[str]:
        """Every secret value in the configuration, for log masking."""
        found: list[str] = []
        _collect_secrets(self, found)
        return [s for s in found if s]


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def interpolate(value: Any, env: Mapping[str, str], path: str = "") -> Any:
    """``value`` with every ``${NAME}`` replaced; :class:`ConfigError` names every variable missing."""
    missing: list[tuple[str, str]] = []
    out = _interpolate(value, env, path, missing)
    if missing:
        raise ConfigError(*missing[0], more=missing[1:])
    return out


def _interpolate(value: Any, env: Mapping[str, str], path: str, missing: list[tuple[str, str]]) -> Any:
    if isinstance(value, str):

        def replace(match: re.Match[str]) -> str:
            name, fallback = match.group(1), match.group(2)
            found = env.get(name)
            if found is None or (found == "" and fallback is not None):
                if fallback is None:
                    missing.append((path, f"environment variable {name} is not set"))
                    return ""
                return fallback
            return found

        return _ENV_REF.sub(replace, value)
    if isinstance(value, Mapping):
        return {k: _interpolate(v, env, f"{path}.{k}" if path else str(k), missing) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, env, f"{path}.{i}", missing) for i, v in enumerate(value)]
    return value


def parse_config(raw: Any, env: Mapping[str, str] | None = None) -> LarkbotConfig:
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError("", "the configuration must be a mapping at the top level")
    data = interpolate(raw, os.environ if env is None else env)
    try:
        return LarkbotConfig.model_validate(data)
    except ValidationError as exc:
        problems = [
            (".".join(str(p) for p in err["loc"]), err["msg"])
            for err in exc.errors(include_url=False, include_input=False)
        ]
        raise ConfigError(*problems[0], more=problems[1:]) from None


def load_config(
    path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> LarkbotConfig:
    """Load and validate the configuration file (``LARKBOT_CONFIG`` when ``path`` is None).

    A missing ``LARKBOT_CONFIG`` with no ``config.yaml`` present yields the built-in defaults (a bus-only
    deployment with no platforms and no chats).
    """
    environ = os.environ if env is None else env
    explicit = path is not None or bool(environ.get("LARKBOT_CONFIG"))
    file = Path(path if path is not None else environ.get("LARKBOT_CONFIG") or DEFAULT_CONFIG_PATH)
    if not file.exists():
        if explicit:
            raise ConfigError("", "the file does not exist", file=str(file))
        return parse_config({}, environ)
    try:
        raw = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigError("", f"not valid YAML{where}", file=str(file)) from None
    try:
        return parse_config(raw, environ)
    except ConfigError as exc:
        raise exc.in_file(str(file)) from None


def _collect_secrets(value: Any, out: list[str]) -> None:
    if isinstance(value, SecretStr):
        out.append(value.get_secret_value())
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            _collect_secrets(getattr(value, name), out)
    elif isinstance(value, Mapping):
        for v in value.values():
            _collect_secrets(v, out)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _collect_secrets(v, out)
