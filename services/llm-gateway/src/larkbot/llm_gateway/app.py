"""Composition root of the LLM gateway: the ``llm.generate`` request/reply service (queue group)."""

from __future__ import annotations

import json

from pydantic import BaseModel

from larkbot.canonical.llm import LLMError, LLMRequest
from larkbot.canonical.names import QUEUE_LLM, SUBJECT_LLM_GENERATE, Service
from larkbot.runtime.config import LarkbotConfig
from larkbot.runtime.serve import Endpoint, model_decoder
from larkbot.runtime.service import ServiceContext, run

from . import metrics


class GatewayService:
    def __init__(self, config: LarkbotConfig) -> None:
        self.config = config
        self.endpoint: Endpoint[LLMRequest] | None = None

    async def start(self, ctx: ServiceContext) -> None:
        self.endpoint = Endpoint(
            ctx.bus, SUBJECT_LLM_GENERATE, QUEUE_LLM, model_decoder(LLMRequest), self.generate, error_reply
        )
        await self.endpoint.start()

    async def generate(self, request: LLMRequest) -> BaseModel:
        endpoint = self.config.llm.endpoints.get(request.endpoint)
        if endpoint is None:
            metrics.REQUESTS.labels(request.purpose, "config").inc()
            return LLMError(
                request_id=request.request_id,
                category="config",
                message=f"no LLM endpoint named {request.endpoint!r} is configured",
            )
        # The provider transports (openai-chat, anthropic-messages, responses) are not in this build yet.
        metrics.REQUESTS.labels(request.purpose, "config").inc()
        return LLMError(
            request_id=request.request_id,
            category="config",
            message=f"wire format {endpoint.format!r} is not available in this build",
        )

    async def stop(self) -> None:
        if self.endpoint is not None:
            await self.endpoint.stop()


def error_reply(data: bytes, exc: BaseException) -> LLMError:
    request_id = "unknown"
    try:
        found = json.loads(data).get("request_id")
        if isinstance(found, str) and found:
            request_id = found
    except (ValueError, AttributeError):
        pass
    return LLMError(
        request_id=request_id, category="invalid_request", message=f"{type(exc).__name__}: {exc}"[:500]
    )


def main() -> int:
    return run(Service.LLM_GATEWAY, GatewayService)
