"""The two entry points: ``MEDIA`` work-queue jobs and ``media.read_image`` requests.

Every decodable job gets exactly one published :class:`MediaResult` — a chat whose job goes unanswered
is blocked until the pipeline's resubmission timeout — and only then is acknowledged:

====================================  =========================================================
job outcome                           what happens
====================================  =========================================================
success                               ``ok`` result published, then ``ack``
:class:`MediaFailure`                 typed failure (its ``code``/``retryable``), then ``ack``;
                                      the pipeline decides whether to resubmit
any other exception (a bug)           logged with its traceback, ``internal`` (retryable)
                                      failure, then ``ack``
undecodable job                       no one to answer: the runtime's policy dead-letters it
result could not be published         ``RetryableError`` → ``nak`` with backoff; the job is redone
                                      (outputs are content-addressed, the alt text is cached)
====================================  =========================================================

Retries are the pipeline's (it owns the backoff and the per-chat blocking), never ours: a nak'ed job plus
a resubmitted one would describe the same picture twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable

import nats

from larkbot.canonical.codec import decode
from larkbot.canonical.errors import ContractError, RetryableError
from larkbot.canonical.media import MediaError, MediaJob, MediaResult, ReadImageRequest, ReadImageResponse
from larkbot.canonical.names import media_result_subject
from larkbot.runtime import periodic
from larkbot.runtime.bus import Bus
from larkbot.runtime.consume import Delivery
from larkbot.runtime.logs import log_context

from .. import metrics
from ..core.errors import MediaFailure
from ..core.jobs import failed
from .transforms import Transformer

log = logging.getLogger(__name__)

_INTERNAL = "the media worker failed unexpectedly on this job (see its logs)"


def _now_ms() -> int:
    return int(time.time() * 1000)


class JobWorker:
    def __init__(self, bus: Bus, transformer: Transformer, *, keepalive_s: float = 30.0) -> None:
        self.bus = bus
        self.transformer = transformer
        self.keepalive_s = keepalive_s

    async def handle(self, delivery: Delivery) -> None:
        job = decode(delivery.data, MediaJob, delivery.headers)
        started = time.perf_counter()
        metrics.JOBS_IN_FLIGHT.inc()
        # Long jobs (a slow download plus a slow model) outlive ``ack_wait``: keep the job ours.
        answered = asyncio.Event()
        keepalive = asyncio.create_task(
            periodic.every(
                self.keepalive_s,
                delivery.msg.in_progress,
                answered,
                name="media job keepalive",
                tolerate=(nats.errors.Error,),
                immediately=False,
            )
        )
        try:
            with log_context(job_id=job.job_id, chat=f"{job.platform.value}:{job.chat_id}"):
                result = await self._answer(job)
        finally:
            answered.set()
            await keepalive
            metrics.JOBS_IN_FLIGHT.dec()
        try:
            await self.bus.publish_core(media_result_subject(job.platform.value, job.chat_id), result)
        except nats.errors.Error as exc:
            raise RetryableError(f"media result not published: {type(exc).__name__}") from None
        outcome = "ok" if result.error is None else result.error.code
        metrics.JOBS.labels(job.transform, outcome).inc()
        metrics.TRANSFORM_SECONDS.labels(job.transform).observe(time.perf_counter() - started)

    async def _answer(self, job: MediaJob) -> MediaResult:
        try:
            return await self.transformer.run(job)
        except MediaFailure as exc:
            log.info("media job %s failed (%s): %s", job.transform, exc.code, exc.message)
            return failed(job, exc.as_error())
        except Exception:
            log.exception("media job %s crashed", job.transform)
            return failed(job, MediaError(code="internal", message=_INTERNAL, retryable=True))


class ReadImages:
    """The ``media.read_image`` handler: every request is answered with a typed response."""

    def __init__(self, transformer: Transformer, *, clock_ms: Callable[[], int] = _now_ms) -> None:
        self.transformer = transformer
        self.clock_ms = clock_ms

    async def handle(self, request: ReadImageRequest) -> ReadImageResponse:
        if request.deadline_ms is not None and request.deadline_ms <= self.clock_ms():
            return self._failed(request, MediaError(code="deadline", message="too late", retryable=False))
        try:
            response = await self.transformer.read_image(request)
        except MediaFailure as exc:
            return self._failed(request, exc.as_error())
        metrics.READ_IMAGE.labels(request.detail, "ok").inc()
        return response

    def _failed(self, request: ReadImageRequest, error: MediaError) -> ReadImageResponse:
        metrics.READ_IMAGE.labels(request.detail, error.code).inc()
        return ReadImageResponse(request_id=request.request_id, ok=False, error=error)


def request_id_of(data: bytes) -> str:
    """The ``request_id`` of a request that may not decode (``unknown`` when it has none)."""
    with contextlib.suppress(ValueError):
        parsed = json.loads(data)
        if isinstance(parsed, dict) and isinstance(parsed.get("request_id"), str) and parsed["request_id"]:
            return str(parsed["request_id"])
    return "unknown"


def request_error(exc: BaseException) -> MediaError:
    """A request that did not decode is a bad request; anything else that escaped a handler a bug."""
    if isinstance(exc, ContractError):
        return MediaError(code="bad_request", message=str(exc)[:500], retryable=False)
    return MediaError(code="internal", message=_INTERNAL, retryable=True)


def read_image_error(data: bytes, exc: BaseException) -> ReadImageResponse:
    """The reply to a request that did not decode or crashed the handler (``Endpoint.error_reply``)."""
    error = request_error(exc)
    metrics.READ_IMAGE.labels("unknown", error.code).inc()
    return ReadImageResponse(request_id=request_id_of(data), ok=False, error=error)
