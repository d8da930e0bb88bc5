"""One ``llm.transcribe`` call: read the audio from the object store, send it as a multipart form to the
endpoint's ``/audio/transcriptions``, decode the transcript.

Like ``llm.generate``, every outcome is a reply — :class:`TranscriptionResponse` or a typed
:class:`LLMError` — with the same categories, the same retry policy and deadline (``attempts.py``), the
same fallbacks (``llm.fallbacks.transcription``), dumps (the audio summarized by size and digest) and
masking. The endpoint must be of format ``openai-transcription``; any other is a ``config`` error, as a
speech-to-text endpoint is for ``llm.generate``.

Why the gateway reads the blob (and the media worker does not call the endpoint itself): the endpoints,
their keys, the retry policy, the fallbacks and the per-chat routes already live here; a worker holding
provider keys would be a second place for all of them. The bytes never travel on the bus.
"""

from __future__ import annotations

import hashlib
import time
from typing import Protocol
from urllib.parse import urlsplit

from larkbot.canonical.llm import LLMError
from larkbot.canonical.transcription import TranscriptionRequest, TranscriptionResponse
from larkbot.runtime.config import LlmEndpoint

from .core import transcription
from .errors import AudioUnavailable, CallFailed, WireError, call_failed
from .fallbacks import falling_back
from .gateway import Gateway
from .outcome import Outcome


class AudioSource(Protocol):
    async def read(self, key: str) -> bytes: ...


class Transcriber:
    def __init__(self, gateway: Gateway, audio: AudioSource) -> None:
        self.gateway = gateway
        self.audio = audio

    async def transcribe(self, request: TranscriptionRequest) -> TranscriptionResponse | LLMError:
        return await falling_back(self.gateway.settings.fallbacks, request, self._answer)

    async def _answer(self, request: TranscriptionRequest) -> TranscriptionResponse | LLMError:
        started = time.perf_counter()
        endpoint = self.gateway.settings.endpoints.get(request.endpoint)
        outcome = Outcome(
            model=endpoint.model if endpoint else "unknown", purpose=request.purpose, outcome="ok"
        )
        reply: TranscriptionResponse | LLMError
        try:
            if endpoint is None:
                raise call_failed("config", f"no LLM endpoint named {request.endpoint!r} is configured")
            reply = await self._call(request, endpoint, outcome)
        except CallFailed as failure:
            outcome.outcome = failure.category
            reply = LLMError(
                request_id=request.request_id,
                category=failure.category,
                message=self.gateway.mask(str(failure)),
                status=failure.status,
                retry_after_s=failure.retry_after,
            )
        outcome.total_s = time.perf_counter() - started
        if isinstance(reply, TranscriptionResponse):
            reply = reply.model_copy(update={"gateway_latency_ms": round(outcome.total_s * 1000)})
        self.gateway.on_outcome(outcome)
        return reply

    async def _call(
        self, request: TranscriptionRequest, endpoint: LlmEndpoint, outcome: Outcome
    ) -> TranscriptionResponse:
        if not endpoint.transcribes:
            raise call_failed(
                "config",
                f"endpoint {request.endpoint!r} is not a speech-to-text endpoint ({endpoint.format})",
            )
        if self.gateway.clock_ms() >= request.deadline_ms:
            raise call_failed("deadline", "the request's deadline passed before the call started")
        try:
            audio = await self.audio.read(request.blob_key)
        except AudioUnavailable as exc:
            raise call_failed("invalid_request", str(exc)) from None
        response_format = endpoint.response_format or "json"
        body, content_type = transcription.encode_form(
            model=endpoint.model,
            audio=audio,
            mime=request.mime,
            filename=request.filename,
            language=request.language,
            response_format=response_format,
        )
        headers = {"content-type": content_type, "accept": "application/json"}
        if endpoint.api_key is not None:
            headers["authorization"] = f"Bearer {endpoint.api_key.get_secret_value()}"
        dumped = {
            "model": endpoint.model,
            "response_format": response_format,
            "language": request.language,
            "file": {
                "filename": request.filename,
                "mime": request.mime,
                "bytes": len(audio),
                "sha256": hashlib.sha256(audio).hexdigest(),
            },
        }
        url = endpoint.base_url.rstrip("/") + transcription.PATH
        reply, provider_s = await self.gateway.attempts.send_body(
            request, endpoint, url, body, headers, outcome, dumped=dumped
        )
        try:
            found = transcription.decode_reply(reply)
        except WireError as exc:
            raise call_failed("permanent", f"provider reply is not a transcription: {exc}") from None
        host_model = f"{transcription.FORMAT}:{_host(endpoint.base_url)}/{endpoint.model}"
        return TranscriptionResponse(
            request_id=request.request_id,
            model_identity=host_model,
            text=found.text,
            language=found.language,
            duration_s=found.duration_s,
            provider_latency_ms=round(provider_s * 1000),
        )


def _host(base_url: str) -> str:
    return urlsplit(base_url).netloc or base_url
