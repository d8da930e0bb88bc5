"""The model endpoints and what each is used for (``llm``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator

from ._base import Secret, _problems, _Section

MaxTokensField = Literal["max_tokens", "max_completion_tokens"]
#: What a model call is for; each has its endpoint (``llm.<purpose>``), and rules may choose another.
LlmPurpose = Literal["probe", "primary", "compaction", "vision", "memory", "transcription"]
PURPOSES: tuple[LlmPurpose, ...] = ("probe", "primary", "compaction", "vision", "memory", "transcription")
#: The format of speech-to-text endpoints (``POST {base_url}/audio/transcriptions``, multipart): the only
#: format the ``transcription`` purpose takes, and one no other purpose takes.
TRANSCRIPTION_FORMAT = "openai-transcription"
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
    format: Literal["openai-chat", "anthropic-messages", "responses", "openai-transcription"]
    base_url: str
    model: str
    api_key: Secret | None = None
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
    extra_body: dict[str, Any] = Field(default_factory=dict)
    #: What the model accepts; unset keys follow its family (see :class:`LlmAccepts`).
    accepts: LlmAccepts = LlmAccepts()
    #: ``openai-transcription`` only: ``json`` (every server and model takes it) or ``verbose_json``
    #: (whisper-1, whisper.cpp, faster-whisper servers: the reply adds the language and the duration).
    response_format: Literal["json", "verbose_json"] | None = None
    fake: bool = False

    @model_validator(mode="after")
    def _accepts_fit_format(self) -> LlmEndpoint:
        if self.accepts.max_tokens_field is not None and self.format != "openai-chat":
            raise ValueError("accepts.max_tokens_field applies to format openai-chat only")
        if self.response_format is not None and self.format != TRANSCRIPTION_FORMAT:
            raise ValueError(f"response_format applies to format {TRANSCRIPTION_FORMAT} only")
        return self

    @property
    def transcribes(self) -> bool:
        """A speech-to-text endpoint (``openai-transcription``), for the ``transcription`` purpose only."""
        return self.format == TRANSCRIPTION_FORMAT

    def resolved_accepts(self) -> ResolvedAccepts:
        """What to send: each configured key, else the family default."""
        defaults = family_accepts(self.format, self.model, self.base_url, self.extra_body)
        configured = self.accepts.model_dump(exclude_none=True)
        return ResolvedAccepts.model_validate({**defaults, **configured})


class LlmRoute(_Section):
    """One rule of ``llm.routes``: the requests it matches go to ``endpoint``. Every condition given must
    hold: ``chats`` (patterns of ``<platform>:<chat_id>``, ``*`` and ``?`` as in a shell: any of them),
    ``platform``, ``purpose`` (one or a list). A rule with no condition at all is refused: it would shadow
    ``llm.<purpose>`` for everything."""

    chats: tuple[str, ...] = ()
    platform: Literal["feishu", "telegram"] | None = None
    purpose: tuple[LlmPurpose, ...] = ()
    endpoint: str

    @field_validator("purpose", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _some_condition(self) -> LlmRoute:
        if not (self.chats or self.platform or self.purpose):
            raise ValueError("a route needs chats, platform or purpose; for every request set llm.<purpose>")
        return self

    def matches(self, purpose: str, platform: str, chat_id: str) -> bool:
        if self.purpose and purpose not in self.purpose:
            return False
        if self.platform is not None and platform != self.platform:
            return False
        key = f"{platform}:{chat_id}"
        return not self.chats or any(fnmatchcase(key, pattern) for pattern in self.chats)


class LlmSettings(_Section):
    endpoints: dict[str, LlmEndpoint] = Field(default_factory=dict)
    probe: str | None = None
    primary: str | None = None
    compaction: str | None = None
    vision: str | None = None
    memory: str | None = None
    #: Speech to text for voice and audio messages (an ``openai-transcription`` endpoint); unset: no
    #: transcripts unless a route names one for the chat.
    transcription: str | None = None
    dump_dir: str | None = None
    #: The gateway's cache of images read from the object store and fitted to a detail's size, in MiB
    #: of encoded (base64) bytes, least recently used out first; 0 keeps none.
    image_cache_mib: int = Field(default=32, ge=0)
    #: Per chat, platform and purpose, the endpoint to use instead of ``llm.<purpose>``: the first rule
    #: that matches wins (:meth:`route`).
    routes: tuple[LlmRoute, ...] = ()
    #: Per purpose, the endpoints to ask in turn when the one chosen fails after its own retries with a
    #: transient error (5xx, timeouts, rate limits) or a configuration one (no quota or credit, a key
    #: refused): ``{primary: [backup, local]}``.
    fallbacks: dict[LlmPurpose, tuple[str, ...]] = Field(default_factory=dict)
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

    @model_validator(mode="after")
    def _purposes_name_endpoints(self) -> LlmSettings:
        # A purpose or a route naming an endpoint that does not exist would fail only at its first call.
        found: list[tuple[tuple[str | int, ...], str, Any]] = []
        known = ", ".join(sorted(self.endpoints)) or "none is configured"
        for purpose in PURPOSES:
            name = getattr(self, purpose)
            if name is not None and name not in self.endpoints:
                found.append(((purpose,), f"names no endpoint of llm.endpoints ({known})", None))
            elif name is not None and (problem := self._kind_problem(name, (purpose,))) is not None:
                found.append(((purpose,), problem, name))
        for index, rule in enumerate(self.routes):
            if rule.endpoint not in self.endpoints:
                found.append(
                    (
                        ("routes", index, "endpoint"),
                        f"names no endpoint of llm.endpoints ({known})",
                        rule.endpoint,
                    )
                )
            elif (problem := self._kind_problem(rule.endpoint, rule.purpose)) is not None:
                found.append((("routes", index, "endpoint"), problem, rule.endpoint))
        for purpose, names in self.fallbacks.items():
            for index, name in enumerate(names):
                if name not in self.endpoints:
                    found.append(
                        (("fallbacks", purpose, index), f"names no endpoint of llm.endpoints ({known})", name)
                    )
                elif (problem := self._kind_problem(name, (purpose,))) is not None:
                    found.append((("fallbacks", purpose, index), problem, name))
        if found:
            raise _problems("llm", found)
        return self

    def _kind_problem(self, name: str, purposes: tuple[LlmPurpose, ...]) -> str | None:
        """Speech-to-text endpoints serve ``transcription`` and nothing else, and it no other endpoint. A
        rule without a purpose is checked by neither: it applies to the purposes its endpoint serves
        (:meth:`route`)."""
        if not purposes:
            return None
        transcribes = self.endpoints[name].transcribes
        if transcribes and any(p != "transcription" for p in purposes):
            return f"is an {TRANSCRIPTION_FORMAT} endpoint: it serves the transcription purpose only"
        if not transcribes and "transcription" in purposes:
            return f"the transcription purpose needs an endpoint of format {TRANSCRIPTION_FORMAT}"
        return None

    def route(self, purpose: str, platform: str, chat_id: str) -> str | None:
        """The endpoint the first matching rule of ``routes`` names; ``None``: no rule matches. A rule
        without a purpose applies to the purposes its endpoint serves: a speech-to-text endpoint to
        ``transcription``, any other to the rest."""
        for rule in self.routes:
            if not rule.matches(purpose, platform, chat_id):
                continue
            if self.endpoints[rule.endpoint].transcribes == (purpose == "transcription"):
                return rule.endpoint
        return None
