"""One ``llm.generate`` call: prepare, encode, send (the attempts and their retries inside the deadline are
``attempts.py``), decode, account.

Every outcome is a reply — :class:`LLMResponse` or a typed :class:`LLMError` — never an exception, so
the caller applies its own retry policy (SPEC §4.4). Error categories (decided by meaning first, see
``core/errors.py``):

- ``config``: unknown endpoint; provider 401/402/403/404; no quota or credit; a model the endpoint does
  not have.
- ``context_length``: the request is too long for the model; never retried here — the caller compacts or
  trims and calls again.
- ``deadline``: the caller's ``deadline_ms`` passed before or during the call. A provider wait that the
  gateway shortened to the remaining deadline and that ran out is a deadline error; a wait that ran out
  at the endpoint's own ``timeout_s`` is a provider timeout (``transient``).
- ``transient``: timeouts, connection failures, 408/409/425/429/5xx (as ``x-should-retry`` allows), a
  Responses ``status: failed`` with ``server_error``, left after the retries that fit in the deadline;
  ``retry_after_s`` carries the provider's hint.
- ``invalid_request``: 400/422, or an image that is not in the object store.
- ``permanent``: other statuses; a 2xx body that is not the format's shape.

What the model accepts (``LlmEndpoint.accepts`` and family defaults) decides the encoded body. When the
model still refuses a parameter (``core/capabilities.py``), the gateway resends without it at once —
a wrong parameter never costs a turn — and keeps it off for that endpoint until the process restarts,
logging a warning that names the configuration key. A paused Anthropic turn (``pause_turn``) is
continued with further calls and returned as one reply with the usage of all of them.

Messages are masked (registered secrets, credential shapes, and the endpoint's own key) before they
leave.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, cast

from larkbot.canonical.llm import LLMError, LLMRequest, LLMResponse, Message, WireFormat
from larkbot.runtime import tracing
from larkbot.runtime.config import LlmEndpoint, LlmSettings, RetrySettings
from larkbot.runtime.logs import mask, register_secrets
from larkbot.runtime.retry import RetryPolicy

from .adapters.dumps import DumpWriter
from .adapters.transport import Transport
from .attempts import Attempts
from .core.cachekey import prompt_cache_key
from .core.capabilities import refused_capability
from .core.common import (
    Accepts,
    EncodedImage,
    EncodeOptions,
    image_refs,
    model_identity,
    prepare_messages,
)
from .core.errors import context_numbers
from .core.formats import CODECS, request_headers
from .errors import CallFailed, ImageUnavailable, WireError, call_failed
from .fallbacks import falling_back
from .outcome import Outcome

log = logging.getLogger(__name__)

#: ``retry.llm_call`` as configured by default; the service passes the configured one.
DEFAULT_POLICY = RetryPolicy.of(RetrySettings().llm_call)
#: An attempt with less time than this left is not worth starting: the transient error is returned
#: instead and the caller's schedule (5 s, 20 s) takes over.
MIN_ATTEMPT_S = 0.5
#: Resends without a refused parameter per call (one per capability at most).
MAX_ADJUSTMENTS = 4
#: Continuations of a paused turn per call.
MAX_CONTINUATIONS = 3


class ImageSource(Protocol):
    async def resolve(self, refs: list[tuple[str, int]]) -> dict[tuple[str, int], EncodedImage]: ...


class Gateway:
    def __init__(
        self,
        settings: LlmSettings,
        images: ImageSource,
        *,
        transport: Transport | None = None,
        policy: RetryPolicy = DEFAULT_POLICY,
        min_attempt_s: float = MIN_ATTEMPT_S,
        clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        on_outcome: Callable[[Outcome], None] = lambda _outcome: None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.settings = settings
        self.images = images
        self.transport = transport or Transport(settings.endpoints)
        self.clock_ms = clock_ms
        self.on_outcome = on_outcome
        self.attempts = Attempts(
            self.transport,
            DumpWriter(settings.dump_dir) if settings.dump_dir else None,
            policy=policy,
            min_attempt_s=min_attempt_s,
            clock_ms=clock_ms,
            sleep=sleep,
            jitter=jitter,
        )
        self._keys = [e.api_key.get_secret_value() for e in settings.endpoints.values() if e.api_key]
        salt = settings.prompt_cache_key_salt
        self._cache_salt = salt.get_secret_value().encode() if salt is not None else None
        if salt is not None:
            self._keys.append(salt.get_secret_value())
        register_secrets(self._keys)
        #: What each endpoint accepts: configuration and family defaults, minus what it refused since.
        self._accepts: dict[str, Accepts] = {}

    async def aclose(self) -> None:
        await self.transport.aclose()

    async def generate(self, request: LLMRequest) -> LLMResponse | LLMError:
        if not tracing.enabled():
            return await self._falling_back(request)
        endpoint = self.settings.endpoints.get(request.endpoint)
        model = endpoint.model if endpoint else "unknown"
        attributes: dict[str, tracing.Value] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
            "larkbot.endpoint": request.endpoint,
            "larkbot.purpose": request.purpose,
        }
        with tracing.span(f"chat {model}", kind="client", attributes=attributes) as span:
            reply = await self._falling_back(request)
            tracing.set_attributes(span, _usage(reply))
            return reply

    async def _falling_back(self, request: LLMRequest) -> LLMResponse | LLMError:
        return await falling_back(self.settings.fallbacks, request, self._answer)

    async def _answer(self, request: LLMRequest) -> LLMResponse | LLMError:
        started = time.perf_counter()
        endpoint = self.settings.endpoints.get(request.endpoint)
        outcome = Outcome(
            model=endpoint.model if endpoint else "unknown", purpose=request.purpose, outcome="ok"
        )
        try:
            if endpoint is None:
                raise call_failed("config", f"no LLM endpoint named {request.endpoint!r} is configured")
            reply: LLMResponse | LLMError = await self._generate(request, endpoint, outcome, started)
        except CallFailed as failure:
            outcome.outcome = failure.category
            message = self.mask(str(failure))
            window, given = context_numbers(message) if failure.category == "context_length" else (None, None)
            reply = LLMError(
                request_id=request.request_id,
                category=failure.category,
                message=message,
                status=failure.status,
                retry_after_s=failure.retry_after,
                window_tokens=window,
                input_tokens=given,
            )
        outcome.total_s = time.perf_counter() - started
        if isinstance(reply, LLMResponse):
            reply = reply.model_copy(update={"gateway_latency_ms": round(outcome.total_s * 1000)})
        self.on_outcome(outcome)
        return reply

    async def _generate(
        self, request: LLMRequest, endpoint: LlmEndpoint, outcome: Outcome, started: float
    ) -> LLMResponse:
        fmt = chat_format(endpoint)
        codec = CODECS[fmt]
        identity = model_identity(fmt, endpoint.base_url, endpoint.model)
        if self.clock_ms() >= request.deadline_ms:
            raise call_failed("deadline", "the request's deadline passed before the call started")
        accepts = self._accepts_for(request.endpoint, endpoint)

        def prepare(replay: bool) -> tuple[tuple[Message, ...], int]:
            return prepare_messages(
                request,
                fmt=fmt,
                identity=identity,
                max_images=endpoint.max_images,
                replay_turns=endpoint.reasoning_replay_turns,
                replay=replay,
            )

        messages, outcome.images_omitted = prepare(accepts.replay_reasoning)
        try:
            images = await self.images.resolve(image_refs(messages))
        except ImageUnavailable as exc:
            raise call_failed("invalid_request", str(exc)) from None
        url = endpoint.base_url.rstrip("/") + codec.path
        headers = request_headers(fmt, endpoint.api_key.get_secret_value() if endpoint.api_key else None)
        cache_key = self._cache_key(request) if endpoint.supports_prompt_cache_key else None
        adjustments = 0
        while True:
            opts = EncodeOptions(
                model=endpoint.model,
                model_identity=identity,
                images=images,
                prompt_cache_key=cache_key,
                default_max_output_tokens=endpoint.default_max_output_tokens,
                accepts=accepts,
            )
            encoded = codec.encode_request(request, messages, opts)
            # Operator-supplied provider options (thinking budgets, reasoning effort) win over ours.
            wire = {**encoded, **endpoint.extra_body} if endpoint.extra_body else encoded
            try:
                reply, provider_s = await self.attempts.send(request, endpoint, url, wire, headers, outcome)
                break
            except CallFailed as failure:
                refused = (
                    refused_capability(fmt, failure.info, encoded, accepts)
                    if failure.category == "invalid_request" and failure.info is not None
                    else None
                )
                if refused is None or adjustments >= MAX_ADJUSTMENTS:
                    raise
                adjustments += 1
                what, adjusted = refused
                log.warning(
                    "LLM endpoint %s refused %s; resending without it "
                    "(set llm.endpoints.%s.accepts to keep it off)",
                    request.endpoint,
                    what,
                    request.endpoint,
                )
                outcome.retries.append("unsupported_parameter")
                if adjusted.replay_reasoning != accepts.replay_reasoning:
                    messages, outcome.images_omitted = prepare(adjusted.replay_reasoning)
                accepts = self._accepts[request.endpoint] = adjusted
        for _ in range(MAX_CONTINUATIONS):
            follow = codec.continuation(wire, reply)
            if follow is None:
                break
            outcome.retries.append("pause_turn")
            more, more_s = await self.attempts.send(request, endpoint, url, follow, headers, outcome)
            reply, wire, provider_s = codec.merge(reply, more), follow, provider_s + more_s
        response = self._decode(request, endpoint, identity, reply, provider_s)
        outcome.usage = response.usage
        return response

    def _accepts_for(self, name: str, endpoint: LlmEndpoint) -> Accepts:
        found = self._accepts.get(name)
        if found is None:
            resolved = endpoint.resolved_accepts()
            found = self._accepts[name] = Accepts(
                max_tokens_field=resolved.max_tokens_field,
                temperature=resolved.temperature,
                forced_tool_choice=resolved.forced_tool_choice,
                replay_reasoning=resolved.replay_reasoning,
            )
        return found

    def _decode(
        self,
        request: LLMRequest,
        endpoint: LlmEndpoint,
        identity: str,
        reply: dict[str, Any],
        provider_s: float,
    ) -> LLMResponse:
        try:
            decoded = CODECS[chat_format(endpoint)].decode_response(reply, identity)
        except (WireError, ValueError, KeyError, TypeError) as exc:
            # ValueError covers pydantic validation errors of a malformed reply.
            raise call_failed(
                "permanent", f"provider reply is not valid {endpoint.format}: {type(exc).__name__}"
            ) from None
        return LLMResponse(
            request_id=request.request_id,
            model_identity=identity,
            message=decoded.message,
            stop_reason=decoded.stop_reason,
            usage=decoded.usage,
            provider_latency_ms=round(provider_s * 1000),
        )

    def mask(self, text: str) -> str:
        """``text`` without any configured secret (every endpoint's key, the salt) or credential shape."""
        for key in self._keys:
            text = text.replace(key, "***")
        return mask(text)

    def _cache_key(self, request: LLMRequest) -> str | None:
        """The keyed hash of the request's own key (else its chat) and purpose; none without a salt."""
        scope = request.prompt_cache_key if request.prompt_cache_key is not None else request.chat_key
        if self._cache_salt is None or scope is None:
            return None
        return prompt_cache_key(self._cache_salt, request.purpose, scope)


def chat_format(endpoint: LlmEndpoint) -> WireFormat:
    """The endpoint's chat wire format; a speech-to-text endpoint answers ``llm.generate`` as ``config``."""
    if endpoint.transcribes:
        raise call_failed("config", "the endpoint is a speech-to-text endpoint (openai-transcription)")
    return cast(WireFormat, endpoint.format)


def _usage(reply: LLMResponse | LLMError) -> dict[str, tracing.Value]:
    if isinstance(reply, LLMError):
        return {"error.type": reply.category}
    return {
        "gen_ai.response.model": reply.model_identity,
        "gen_ai.usage.input_tokens": reply.usage.input_tokens,
        "gen_ai.usage.output_tokens": reply.usage.output_tokens,
        "larkbot.cache_read_tokens": reply.usage.cache_read_tokens,
        "larkbot.cache_write_tokens": reply.usage.cache_write_tokens,
    }
