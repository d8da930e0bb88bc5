"""Composition root of the media workers: the shared durable consumer of the ``MEDIA`` work queue.

Every worker replica binds the same durable consumer, so the queue is shared and an autoscaler can
follow ``num_pending + num_ack_pending``. A job whose transform this build cannot perform is
dead-lettered with that reason, never acknowledged as if done.
"""

from __future__ import annotations

from larkbot.canonical.codec import decode
from larkbot.canonical.errors import PermanentError
from larkbot.canonical.media import MediaJob
from larkbot.canonical.names import CONSUMER_MEDIA, STREAM_MEDIA, Service
from larkbot.runtime.config import LarkbotConfig
from larkbot.runtime.consume import Delivery, PullConsumer
from larkbot.runtime.service import ServiceContext, run

from . import metrics

#: Transforms implemented by this build; grows with the media service.
TRANSFORMS: frozenset[str] = frozenset()


class MediaService:
    def __init__(self, config: LarkbotConfig) -> None:
        self.config = config
        self.consumer: PullConsumer | None = None

    async def start(self, ctx: ServiceContext) -> None:
        self.consumer = PullConsumer(ctx.bus.js, STREAM_MEDIA, CONSUMER_MEDIA, self.handle, batch=1)
        ctx.spawn(self.consumer.run(), "consume-media-jobs")

    async def handle(self, delivery: Delivery) -> None:
        job = decode(delivery.data, MediaJob, delivery.headers)
        if job.transform not in TRANSFORMS:
            metrics.JOBS.labels(job.transform, "unsupported").inc()
            raise PermanentError(f"media transform {job.transform!r} is not available in this build")

    async def stop(self) -> None:
        if self.consumer is not None:
            self.consumer.stop()


def main() -> int:
    return run(Service.MEDIA, MediaService)
