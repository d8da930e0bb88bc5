"""One raw update → adapted → published to JetStream (PubAck) or dead-lettered, in arrival order.

:meth:`Inbound.handle` returns only once the update's events are stored (or its dead-letter record
is), which is what lets the caller confirm the update to Telegram. A bus failure — an event not
stored, a migration not recorded, a dead-letter record not written
(:class:`~larkbot.runtime.deadletter.DeadLetterFailed`) — is retried through :mod:`larkbot.runtime.retry`
(``retry.inbound_store``) for as long as it lasts: the update is not confirmed meanwhile (the
poller's offset does not advance, the webhook does not answer and Telegram's redelivery waits behind it),
because confirming an update whose events were not stored would lose it, and skipping it would reorder
the chat (aiogram confirms an update whose handler raised). The time of arrival is captured by the caller
before anything is awaited.

Dead letters go through the runtime's one writer (:mod:`larkbot.runtime.deadletter`, its header schema):
source ``telegram``, consumer ``ingress-telegram``, the record keyed by ``update:<update_id>`` (a
redelivered update adds no second record), the update ASCII-escaped so that even a lone surrogate is kept.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, TypeVar

import nats

from larkbot.canonical.errors import ContractError
from larkbot.canonical.events import CanonicalEvent
from larkbot.canonical.fingerprint import event_msg_id
from larkbot.canonical.names import Platform, events_subject
from larkbot.runtime import tracing
from larkbot.runtime.bus import Bus, BusUnavailable
from larkbot.runtime.deadletter import DeadLetter, DeadLetterFailed, DeadLetters, describe
from larkbot.runtime.logs import log_context
from larkbot.runtime.retry import Failure, RetryPolicy, retrying

from .. import metrics
from ..core import Adapted, MalformedUpdate, TelegramAdapter
from .migrations import ChatMigrations

log = logging.getLogger(__name__)

PLATFORM: Final = Platform.TELEGRAM.value
#: Dead-letter records of updates go to ``deadletter.telegram.ingress-telegram``.
DL_SOURCE: Final = "telegram"
DL_CONSUMER: Final = "ingress-telegram"

T = TypeVar("T")


def _bus_failure(exc: BaseException) -> Failure | None:
    if isinstance(exc, BusUnavailable | DeadLetterFailed | nats.errors.Error | TimeoutError):
        return Failure.TRANSIENT
    return None


class Inbound:
    def __init__(
        self,
        bus: Bus,
        adapter: TelegramAdapter,
        dead_letters: DeadLetters,
        *,
        migrations: ChatMigrations | None = None,
        retry: RetryPolicy,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.bus = bus
        self.adapter = adapter
        self.dead_letters = dead_letters
        self.migrations = migrations
        self.retry = retry
        self.sleep = sleep
        self.last_update_id: int | None = None

    async def _until_stored(self, what: str, write: Callable[[], Awaitable[T]]) -> T:
        """``write`` until it succeeds (the bus is away; the update waits, unconfirmed)."""

        def retried(_failure: Failure, _attempts: int, wait: float, exc: BaseException | None) -> None:
            metrics.PUBLISH_RETRIES.inc()
            log.warning("%s not stored, retrying in %.2f s: %s", what, wait, exc)

        async for attempt in retrying(self.retry, _bus_failure, on_retry=retried, sleep=self.sleep):
            with attempt:
                result = await write()
        return result

    async def handle(self, update: Mapping[str, Any], received_at_ms: int) -> Adapted | None:
        """Adapt and store one update; ``None`` when it was dead-lettered."""
        with tracing.receiving("telegram receive", {"messaging.system": "telegram"}):
            return await self._handle(update, received_at_ms)

    async def _handle(self, update: Mapping[str, Any], received_at_ms: int) -> Adapted | None:
        try:
            result = self.adapter.adapt(update, received_at_ms)
        except ContractError as exc:
            await self.dead_letter(update, exc)
            return None
        except Exception as exc:
            # A bug in the adapter: the caller would confirm the update anyway, so keep it here.
            log.exception("adapter crashed on an update; dead-lettering it")
            await self.dead_letter(update, exc, reason="crashed")
            return None
        with log_context(update_id=result.update_id):
            if result.migration is not None:
                await self._record_migration(*result.migration)
            if result.dropped is not None:
                metrics.UPDATES.labels("dropped", result.dropped).inc()
                log.debug("update dropped: %s", result.dropped)
            for event in result.events:
                await self._store(event)
                metrics.UPDATES.labels("published", event.kind).inc()
        self.last_update_id = result.update_id
        return result

    async def _record_migration(self, group: str, supergroup: str) -> None:
        """Stored before the update is confirmed: after a restart the supergroup must still be the group."""
        migrations = self.migrations
        if migrations is None:
            return
        await self._until_stored("chat migration", lambda: migrations.record(group, supergroup))

    async def _store(self, event: CanonicalEvent) -> None:
        subject = events_subject(PLATFORM, event.chat_id)
        ack = await self._until_stored(
            "event", lambda: self.bus.publish(subject, event, msg_id=event_msg_id(event))
        )
        if ack.duplicate:
            metrics.DUPLICATES.inc()

    async def dead_letter(
        self, update: Mapping[str, Any] | bytes, exc: BaseException, reason: str | None = None
    ) -> None:
        if reason is None:
            malformed = isinstance(exc, MalformedUpdate) or isinstance(update, bytes)
            reason = "malformed" if malformed else "unsupported"
        if isinstance(update, bytes):
            data, update_id = update, None
        else:
            # ASCII-escaped: the record keeps even a lone surrogate, which UTF-8 cannot encode.
            data = json.dumps(update, ensure_ascii=True, separators=(",", ":")).encode()
            raw_id = update.get("update_id") if isinstance(update, Mapping) else None
            update_id = raw_id if isinstance(raw_id, int) and not isinstance(raw_id, bool) else None
        letter = DeadLetter(
            DL_SOURCE,
            DL_CONSUMER,
            reason,
            str(exc),
            data,
            key=f"update:{update_id}" if update_id is not None else None,
        )
        await self._until_stored("dead-letter record", lambda: self.dead_letters.write(letter))
        metrics.UPDATES.labels("dead_lettered", reason).inc()
        log.info("update dead-lettered (%s): %s", reason, describe(exc))
        if update_id is not None:
            self.last_update_id = update_id
