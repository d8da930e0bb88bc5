"""One ``llm.generate`` call: prepare, encode, send with retries inside the deadline, decode, account.

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
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from larkbot.canonical.llm import LLMError, LLMRequest, LLMResponse, Message, Usage
from larkbot.runtime.config import LlmEndpoint, LlmSettings, RetrySettings
from larkbot.runtime.logs import mask, register_secrets
from larkbot.runtime.retry import Failure, RetryPolicy, retrying

from .adapters.dumps import DumpWriter
from .adapters.transport import HttpReply, Transport
from .core.cachekey import prompt_cache_key
from .core.capabilities import refused_capability
from .core.common import (
    Accepts,
    EncodedImage,
    EncodeOptions,
    dumps,
    image_refs,
    model_identity,
    prepare_messages,
)
from .core.errors import (
    classify,
    context_numbers,
    error_info,
    retry_after_s,
    retry_kind,
    retry_window_s,
)
from .core.formats import CODECS, FAKE_HEADER, request_headers
from .core.redact import redact_headers
from .errors import CallFailed, ImageUnavailable, ProviderTimeout, ProviderUnreachable, WireError, call_failed

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


@dataclass(slots=True)
class Outcome:
    """What one call did, for metrics and benchmarks."""

    model: str
    purpose: str
    outcome: str
    total_s: float = 0.0
    provider_s: list[float] = field(default_factory=list)
    waited_s: float = 0.0
    retries: list[str] = field(default_factory=list)
    usage: Usage | None = None
    images_omitted: int = 0
    attempts: int = 0

    @property
    def overhead_s(self) -> float:
        return max(0.0, self.total_s - sum(self.provider_s) - self.waited_s)


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
        self.policy = policy
        self.min_attempt_s = min_attempt_s
        self.sleep = sleep
        self.jitter = jitter
        self.clock_ms = clock_ms
        self.on_outcome = on_outcome
        self.dumps = DumpWriter(settings.dump_dir) if settings.dump_dir else None
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
            message = self._mask(str(failure))
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
        codec = CODECS[endpoint.format]
        identity = model_identity(endpoint.format, endpoint.base_url, endpoint.model)
        if self.clock_ms() >= request.deadline_ms:
            raise call_failed("deadline", "the request's deadline passed before the call started")
        accepts = self._accepts_for(request.endpoint, endpoint)

        def prepare(replay: bool) -> tuple[tuple[Message, ...], int]:
            return prepare_messages(
                request,
                fmt=endpoint.format,
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
        headers = request_headers(
            endpoint.format, endpoint.api_key.get_secret_value() if endpoint.api_key else None
        )
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
                reply, provider_s = await self._send(request, endpoint, url, wire, headers, outcome)
                break
            except CallFailed as failure:
                refused = (
                    refused_capability(endpoint.format, failure.info, encoded, accepts)
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
            more, more_s = await self._send(request, endpoint, url, follow, headers, outcome)
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

    async def _send(
        self,
        request: LLMRequest,
        endpoint: LlmEndpoint,
        url: str,
        wire: dict[str, Any],
        headers: dict[str, str],
        outcome: Outcome,
    ) -> tuple[dict[str, Any], float]:
        """One body to the provider, retrying transient failures within the deadline (``retry.llm_call``,
        the only retry of a call): the parsed reply and the provider time of the attempt that answered."""
        body = dumps(wire)

        def left_s() -> float:
            return retry_window_s((request.deadline_ms - self.clock_ms()) / 1000, self.min_attempt_s)

        def retried(_failure: Failure, _attempts: int, wait: float, exc: BaseException | None) -> None:
            if isinstance(exc, CallFailed):
                outcome.retries.append(exc.reason)
            outcome.waited_s += wait

        async for attempt in retrying(
            self.policy,
            _retry_kind,
            left_s=left_s,
            retry_after=_retry_after,
            on_retry=retried,
            sleep=self.sleep,
            jitter=self.jitter,
        ):
            with attempt:
                reply = await self._attempt(request, endpoint, url, body, headers, outcome)
                return self._parse(endpoint, reply), reply.elapsed_s
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _attempt(
        self,
        request: LLMRequest,
        endpoint: LlmEndpoint,
        url: str,
        body: bytes,
        headers: dict[str, str],
        outcome: Outcome,
    ) -> HttpReply:
        outcome.attempts += 1
        attempt = outcome.attempts
        remaining_s = (request.deadline_ms - self.clock_ms()) / 1000
        if remaining_s <= 0:
            raise call_failed("deadline", "the request's deadline passed between attempts")
        shortened = remaining_s < endpoint.timeout_s
        timeout_s = min(endpoint.timeout_s, remaining_s)
        record: dict[str, Any] = {"request_id": request.request_id, "endpoint": request.endpoint, "url": url}
        started = time.perf_counter()
        try:
            reply = await self.transport.post(request.endpoint, url, body, headers, timeout_s)
        except ProviderTimeout:
            outcome.provider_s.append(time.perf_counter() - started)
            await self._dump(request, attempt, record, headers, body, {"failure": "timeout"})
            if shortened:
                raise call_failed(
                    "deadline",
                    f"the request's deadline passed while waiting {timeout_s:.1f} s for the provider",
                ) from None
            raise call_failed("transient", f"provider timed out after {timeout_s:.1f} s") from None
        except ProviderUnreachable as exc:
            outcome.provider_s.append(time.perf_counter() - started)
            await self._dump(request, attempt, record, headers, body, {"failure": str(exc)})
            raise call_failed("transient", f"provider unreachable: {exc}", reason="connect") from None
        outcome.provider_s.append(reply.elapsed_s)
        await self._dump(
            request,
            attempt,
            record,
            headers,
            body,
            {"status": reply.status, "headers": reply.headers, "body": _json_or_text(reply.body)},
        )
        if reply.headers.get(FAKE_HEADER) and not endpoint.fake:
            raise call_failed(
                "config", "the endpoint answered as the fake provider but is not configured with fake: true"
            )
        if not 200 <= reply.status <= 299:
            info = error_info(reply.body)
            category = classify(reply.status, info, reply.headers)
            retry_after = retry_after_s(reply.headers, self.clock_ms() / 1000, reply.status)
            message = f"provider answered HTTP {reply.status}: {info.message}"
            raise call_failed(category, message, status=reply.status, retry_after=retry_after, info=info)
        return reply

    def _parse(self, endpoint: LlmEndpoint, reply: HttpReply) -> dict[str, Any]:
        """The reply as a JSON object, or the failure it reports (a Responses ``status: failed``)."""
        try:
            parsed = json.loads(reply.body)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            raise call_failed(
                "permanent",
                f"provider reply is not valid {endpoint.format}: not a JSON object",
                status=reply.status,
            )
        failed = CODECS[endpoint.format].failed(parsed)
        if failed is not None:
            raise call_failed(failed.category, str(failed), status=reply.status, reason=failed.reason)
        return parsed

    def _decode(
        self,
        request: LLMRequest,
        endpoint: LlmEndpoint,
        identity: str,
        reply: dict[str, Any],
        provider_s: float,
    ) -> LLMResponse:
        try:
            decoded = CODECS[endpoint.format].decode_response(reply, identity)
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

    async def _dump(
        self,
        request: LLMRequest,
        attempt: int,
        record: dict[str, Any],
        headers: dict[str, str],
        body: bytes,
        response: dict[str, Any],
    ) -> None:
        if self.dumps is None:
            return
        full = {
            **record,
            "attempt": attempt,
            "headers": redact_headers(headers),
            "request": json.loads(body),
            "response": response,
        }
        await self.dumps.write(request.request_id, attempt, full)

    def _mask(self, text: str) -> str:
        for key in self._keys:
            text = text.replace(key, "***")
        return mask(text)

    def _cache_key(self, request: LLMRequest) -> str | None:
        """The keyed hash of the request's own key (else its chat) and purpose; none without a salt."""
        scope = request.prompt_cache_key if request.prompt_cache_key is not None else request.chat_key
        if self._cache_salt is None or scope is None:
            return None
        return prompt_cache_key(self._cache_salt, request.purpose, scope)


def _retry_kind(exc: BaseException) -> Failure | None:
    return retry_kind(exc) if isinstance(exc, CallFailed) else None


def _retry_after(exc: BaseException) -> float | None:
    return exc.retry_after if isinstance(exc, CallFailed) else None


def _json_or_text(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return body[:4000].decode("utf-8", "replace")
