"""The attempts of one provider call: each bounded by the deadline, retried through the one retry
policy (``retry.llm_call``, the only retry of a call), dumped when ``llm.dump_dir`` is set.

An attempt's failure is a :class:`~.errors.CallFailed` of its category: a provider that produced no
HTTP response is ``transient`` (``timeout``, ``connect``), unless the wait was shortened to the
request's deadline and ran out (``deadline``); an error status is classified by ``core/errors.py``; a
2xx body that is not a JSON object is ``permanent``, a Responses ``status: failed`` the category its
code means. Only a :class:`~.errors.TransientFailure` is tried again, and only while an attempt of at
least ``min_attempt_s`` still fits in the deadline.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

from larkbot.canonical.llm import LLMRequest
from larkbot.canonical.transcription import TranscriptionRequest
from larkbot.runtime import tracing
from larkbot.runtime.config import LlmEndpoint
from larkbot.runtime.retry import Failure, RetryPolicy, retrying

from .adapters.dumps import DumpWriter
from .adapters.transport import HttpReply, Transport
from .core.common import dumps
from .core.errors import classify, error_info, retry_after_s, retry_kind, retry_window_s
from .core.formats import FAKE_HEADER, codec_of
from .core.redact import redact_headers
from .errors import CallFailed, ProviderTimeout, ProviderUnreachable, call_failed
from .outcome import Outcome

#: A call the attempts serve: both carry ``request_id``, ``endpoint`` and ``deadline_ms``.
Call = LLMRequest | TranscriptionRequest


class Attempts:
    """Sends one body to a provider until it answers, fails for good or the deadline is near."""

    def __init__(
        self,
        transport: Transport,
        dumps: DumpWriter | None,
        *,
        policy: RetryPolicy,
        min_attempt_s: float,
        clock_ms: Callable[[], int],
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.transport = transport
        self.dumps = dumps
        self.policy = policy
        self.min_attempt_s = min_attempt_s
        self.clock_ms = clock_ms
        self.sleep = sleep
        self.jitter = jitter

    async def send(
        self,
        request: LLMRequest,
        endpoint: LlmEndpoint,
        url: str,
        wire: dict[str, Any],
        headers: dict[str, str],
        outcome: Outcome,
    ) -> tuple[dict[str, Any], float]:
        """One JSON body to the provider, retrying transient failures within the deadline
        (``retry.llm_call``, the only retry of a call): the parsed reply and the provider time of the
        attempt that answered."""
        body = dumps(wire)
        failed = codec_of(endpoint.format).failed
        return await self.send_body(request, endpoint, url, body, headers, outcome, failed=failed)

    async def send_body(
        self,
        request: Call,
        endpoint: LlmEndpoint,
        url: str,
        body: bytes,
        headers: dict[str, str],
        outcome: Outcome,
        *,
        failed: Callable[[dict[str, Any]], CallFailed | None] = lambda _reply: None,
        dumped: Any = None,
    ) -> tuple[dict[str, Any], float]:
        """:meth:`send` of a body already encoded (a multipart form: ``dumped`` stands for it in dumps);
        ``failed`` reads a failure reported inside a 2xx reply."""

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
                reply = await self._attempt(request, endpoint, url, body, headers, outcome, dumped)
                return self._parse(endpoint, reply, failed), reply.elapsed_s
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _attempt(
        self,
        request: Call,
        endpoint: LlmEndpoint,
        url: str,
        body: bytes,
        headers: dict[str, str],
        outcome: Outcome,
        dumped: Any,
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
            with tracing.span(f"attempt {attempt}", kind="client") as span:
                reply = await self.transport.post(request.endpoint, url, body, headers, timeout_s)
                tracing.set_attributes(span, {"http.response.status_code": reply.status})
        except ProviderTimeout:
            outcome.provider_s.append(time.perf_counter() - started)
            await self._dump(request, attempt, record, headers, body, dumped, {"failure": "timeout"})
            if shortened:
                raise call_failed(
                    "deadline",
                    f"the request's deadline passed while waiting {timeout_s:.1f} s for the provider",
                ) from None
            raise call_failed("transient", f"provider timed out after {timeout_s:.1f} s") from None
        except ProviderUnreachable as exc:
            outcome.provider_s.append(time.perf_counter() - started)
            await self._dump(request, attempt, record, headers, body, dumped, {"failure": str(exc)})
            raise call_failed("transient", f"provider unreachable: {exc}", reason="connect") from None
        outcome.provider_s.append(reply.elapsed_s)
        await self._dump(
            request,
            attempt,
            record,
            headers,
            body,
            dumped,
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

    def _parse(
        self,
        endpoint: LlmEndpoint,
        reply: HttpReply,
        failed: Callable[[dict[str, Any]], CallFailed | None],
    ) -> dict[str, Any]:
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
        failure = failed(parsed)
        if failure is not None:
            raise call_failed(failure.category, str(failure), status=reply.status, reason=failure.reason)
        return parsed

    async def _dump(
        self,
        request: Call,
        attempt: int,
        record: dict[str, Any],
        headers: dict[str, str],
        body: bytes,
        dumped: Any,
        response: dict[str, Any],
    ) -> None:
        if self.dumps is None:
            return
        full = {
            **record,
            "attempt": attempt,
            "headers": redact_headers(headers),
            "request": json.loads(body) if dumped is None else dumped,
            "response": response,
        }
        await self.dumps.write(request.request_id, attempt, full)


def _retry_kind(exc: BaseException) -> Failure | None:
    return retry_kind(exc) if isinstance(exc, CallFailed) else None


def _retry_after(exc: BaseException) -> float | None:
    return exc.retry_after if isinstance(exc, CallFailed) else None


def _json_or_text(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return body[:4000].decode("utf-8", "replace")
