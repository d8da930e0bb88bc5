"""Composition root of the LLM gateway: the ``llm.generate`` and ``llm.transcribe`` request/reply
services (queue group).

Stateless: any number of replicas share the queue group. Wiring: the object-store image source, the
pooled HTTP transport (inside :class:`Gateway`), metrics, and the request/reply endpoint.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel

from larkbot.canonical.llm import LLMError, LLMRequest
from larkbot.canonical.names import QUEUE_LLM, SUBJECT_LLM_GENERATE, SUBJECT_LLM_TRANSCRIBE, Service
from larkbot.canonical.transcription import TranscriptionRequest
from larkbot.runtime.config import LarkbotConfig
from larkbot.runtime.http import Check
from larkbot.runtime.logs import mask
from larkbot.runtime.retry import RetryPolicy
from larkbot.runtime.serve import Endpoint, model_decoder
from larkbot.runtime.service import ServiceContext, run

from . import metrics
from .adapters.audio import ObjectStoreAudio
from .adapters.images import ObjectStoreImages
from .gateway import Gateway
from .outcome import Outcome
from .transcribe import Transcriber

log = logging.getLogger(__name__)


def _ignore(_outcome: Outcome) -> None:
    pass


@dataclass(frozen=True, slots=True)
class LlmGateway:
    """The wired gateway: the provider calls and the ``llm.generate`` endpoint that serves them."""

    gateway: Gateway
    endpoint: Endpoint[LLMRequest]
    transcriptions: Endpoint[TranscriptionRequest]

    async def stop(self) -> None:
        await self.endpoint.stop()
        await self.transcriptions.stop()
        await self.gateway.aclose()


@dataclass(frozen=True, slots=True)
class GatewayService:
    """The recipe of the gateway: the configuration, and ``on_outcome`` — what each call did, after the
    metrics have it (the benchmark reads it)."""

    config: LarkbotConfig
    on_outcome: Callable[[Outcome], None] = _ignore

    async def build(self, ctx: ServiceContext) -> LlmGateway:
        settings = self.config.llm
        for name, configured in sorted(settings.endpoints.items()):
            if configured.fake:
                log.warning(
                    "LLM endpoint %s is the fake provider at %s (fake: true)", name, configured.base_url
                )
            if configured.supports_prompt_cache_key and settings.prompt_cache_key_salt is None:
                log.warning(
                    "LLM endpoint %s sets supports_prompt_cache_key, but llm.prompt_cache_key_salt is "
                    "not set: no prompt_cache_key is sent (set it to one secret value for the deployment)",
                    name,
                )
        gateway = Gateway(
            settings,
            ObjectStoreImages(ctx.bus.js, cache_bytes=settings.image_cache_mib * 1024 * 1024),
            policy=RetryPolicy.of(self.config.retry.llm_call),
            on_outcome=self._account,
        )
        endpoint = Endpoint(
            ctx.bus,
            SUBJECT_LLM_GENERATE,
            QUEUE_LLM,
            model_decoder(LLMRequest),
            gateway.generate,
            error_reply,
        )
        await endpoint.start()
        transcriptions = Endpoint(
            ctx.bus,
            SUBJECT_LLM_TRANSCRIBE,
            QUEUE_LLM,
            model_decoder(TranscriptionRequest),
            Transcriber(gateway, ObjectStoreAudio(ctx.bus.js)).transcribe,
            error_reply,
        )
        await transcriptions.start()

        async def endpoints_check() -> Check:
            names = ", ".join(sorted(settings.endpoints)) or "none"
            return Check(True, f"endpoints: {names}")

        ctx.add_check("llm", endpoints_check)
        return LlmGateway(gateway, endpoint, transcriptions)

    def _account(self, outcome: Outcome) -> None:
        metrics.record(outcome)
        self.on_outcome(outcome)


def error_reply(data: bytes, exc: BaseException) -> BaseModel:
    request_id = "unknown"
    try:
        found = json.loads(data).get("request_id")
        if isinstance(found, str) and found:
            request_id = found
    except (ValueError, AttributeError):
        pass
    return LLMError(
        request_id=request_id, category="invalid_request", message=mask(f"{type(exc).__name__}: {exc}")[:500]
    )


def main() -> int:
    return run(Service.LLM_GATEWAY, GatewayService)
