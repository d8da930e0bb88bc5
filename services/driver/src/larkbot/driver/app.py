"""Composition root of the driver: follow rendered-context updates and typing signals per chat.

This is the state-tracking shell: it consumes ``CONTEXT`` (durable, in order) and ``typing.>``, keeps the
latest sequence per chat and detects gaps. Scheduling, the probe gate and turns build on it.
"""

from __future__ import annotations

import logging

from nats.aio.msg import Msg

from larkbot.canonical.codec import decode
from larkbot.canonical.context import ContextUpdate
from larkbot.canonical.errors import ContractError
from larkbot.canonical.events import TypingSignal
from larkbot.canonical.names import CONSUMER_DRIVER, STREAM_CONTEXT, Service
from larkbot.runtime.config import LarkbotConfig
from larkbot.runtime.consume import Delivery, PullConsumer
from larkbot.runtime.service import ServiceContext, run

from . import metrics

log = logging.getLogger(__name__)


class DriverService:
    def __init__(self, config: LarkbotConfig) -> None:
        self.config = config
        self.consumer: PullConsumer | None = None
        #: Latest applied context sequence per (platform, chat).
        self.seqs: dict[tuple[str, str], int] = {}
        self.last_typing_ms: dict[tuple[str, str, str], int] = {}

    async def start(self, ctx: ServiceContext) -> None:
        self.consumer = PullConsumer(ctx.bus.js, STREAM_CONTEXT, CONSUMER_DRIVER, self.on_context)
        ctx.spawn(self.consumer.run(), "consume-context")
        sub = await ctx.bus.nc.subscribe("typing.>", cb=self.on_typing)
        ctx.stack.push_async_callback(sub.unsubscribe)

    async def on_context(self, delivery: Delivery) -> None:
        update = decode(delivery.data, ContextUpdate, delivery.headers)
        key = (update.platform.value, update.chat_id)
        known = self.seqs.get(key, 0)
        if update.seq <= known:
            metrics.CONTEXT_UPDATES.labels("stale").inc()
            return
        if update.base_seq != known:
            metrics.CONTEXT_UPDATES.labels("gap").inc()
        else:
            metrics.CONTEXT_UPDATES.labels("applied").inc()
        self.seqs[key] = update.seq

    async def on_typing(self, msg: Msg) -> None:
        try:
            signal = decode(msg.data, TypingSignal, dict(msg.headers or {}))
        except ContractError as exc:
            metrics.TYPING_SIGNALS.labels("invalid").inc()
            log.warning("ignored typing signal: %s", exc)
            return
        self.last_typing_ms[(signal.platform.value, signal.chat_id, signal.user_id)] = signal.at_ms
        metrics.TYPING_SIGNALS.labels("ok").inc()

    async def stop(self) -> None:
        if self.consumer is not None:
            self.consumer.stop()


def main() -> int:
    return run(Service.DRIVER, DriverService)
