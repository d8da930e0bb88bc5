"""``llm.fallbacks``: a request's endpoint, then each fallback of its purpose in turn, for every kind of
call (``llm.generate`` and ``llm.transcribe`` alike).

The next endpoint is asked only while the answer is an error another endpoint may not give
(:data:`FALLBACK_CATEGORIES`), within the request's deadline (an endpoint asked after it passed answers
``deadline``, which ends the turns). The answer names the endpoint that gave it and, on success, the ones
that failed before it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from larkbot.canonical.llm import LLMError, LLMRequest, LLMResponse, Purpose
from larkbot.canonical.transcription import TranscriptionRequest, TranscriptionResponse

from . import metrics

log = logging.getLogger(__name__)

#: The errors after which the purpose's next fallback endpoint is asked: what another provider or account
#: may well not answer the same way. A request too long, refused or past its deadline would meet the same
#: answer anywhere.
FALLBACK_CATEGORIES = frozenset({"transient", "config"})

Req = TypeVar("Req", LLMRequest, TranscriptionRequest)
Resp = TypeVar("Resp", LLMResponse, TranscriptionResponse)


async def falling_back(
    fallbacks: Mapping[Purpose, tuple[str, ...]],
    request: Req,
    answer: Callable[[Req], Awaitable[Resp | LLMError]],
) -> Resp | LLMError:
    reply = await answer(request)
    current = request.endpoint
    failed: list[str] = []
    for name in fallbacks.get(request.purpose, ()):
        if not isinstance(reply, LLMError) or reply.category not in FALLBACK_CATEGORIES:
            break
        if name == current or name in failed:
            continue
        failed.append(current)
        metrics.FALLBACKS.labels(request.purpose, current, name).inc()
        log.warning(
            "endpoint %s failed for %s (%s): asking %s", current, request.purpose, reply.category, name
        )
        current = name
        reply = await answer(request.model_copy(update={"endpoint": name}))
    if failed and not isinstance(reply, LLMError):
        return reply.model_copy(update={"fallback_from": tuple(failed), "endpoint": current})
    if failed:
        return reply.model_copy(update={"endpoint": current})
    return reply
