"""One raw update → adapted → published to JetStream (PubAck) or dead-lettered, in arrival order.

:meth:`Inbound.handle` returns only once the update's events are stored (or its dead-letter record
is), which is what lets the caller confirm the update to Telegram. A bus failure is retried with backoff
for as long as it lasts: confirming an update whose events were not stored would lose it, and skipping
it would reorder the chat. The time of arrival is captured by the caller before anything is awaited.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from typing import Any, Final

import nats

from larkbot.canonical.errors import ContractError
from larkbot.canonical.events import CanonicalEvent
from larkbot.canonical.fingerprint import event_msg_id
from larkbot.canonical.names import (
    HEADER_DL_CONSUMER,
    HEADER_DL_ERROR,
    HEADER_DL_REASON,
    HEADER_DL_STREAM,
    HEADER_MSG_ID,
    Platform,
    dead_letter_subject,
    events_subject,
)
from larkbot.runtime.bus import Bus, BusUnavailable
from larkbot.runtime.logs import log_context, mask

from .. import metrics
from ..core import Adapted, MalformedUpdate, TelegramAdapter
from .migrations import ChatMigrations

log = logging.getLogger(__name__)

PLATFORM: Final = Platform.TELEGRAM.value
#: Dead-letter records of updates go to ``deadletter.telegram.ingress-telegram``.
DL_SOURCE: Final = "telegram"
DL_CONSUMER: Final = "ingress-telegram"


class Inbound:
    def __init__(
        self,
        bus: Bus,
        adapter: TelegramAdapter,
        *,
        migrations: ChatMigrations | None = None,
        max_backoff_s: float = 10.0,
    ) -> None:
        self.bus = bus
        self.adapter = adapter
        self.migrations = migrations
        self.max_backoff_s = max_backoff_s
        self.last_update_id: int | None = None

    async def handle(self, update: Mapping[str, Any], received_at_ms: int) -> Adapted | None:
        """Adapt and store one update; ``None`` when it was dead-lettered."""
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
        if self.migrations is None:
            return
        delay = 0.25
        while True:
            try:
                await self.migrations.record(group, supergroup)
                return
            except (nats.errors.Error, TimeoutError) as exc:
                log.warning("chat migration not stored (%s), retrying", type(exc).__name__)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.max_backoff_s)

    async def _store(self, event: CanonicalEvent) -> None:
        subject = events_subject(PLATFORM, event.chat_id)
        delay = 0.25
        while True:
            try:
                ack = await self.bus.publish(subject, event, msg_id=event_msg_id(event))
            except BusUnavailable as exc:
                metrics.PUBLISH_RETRIES.inc()
                log.warning("event not stored, retrying in %.2f s: %s", delay, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.max_backoff_s)
                continue
            if ack.duplicate:
                metrics.DUPLICATES.inc()
            return

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
        error = mask(str(exc))[:2000].replace("\r", " ").replace("\n", " ")
        headers = {
            HEADER_DL_REASON: reason,
            HEADER_DL_ERROR: error,
            HEADER_DL_STREAM: DL_SOURCE,
            HEADER_DL_CONSUMER: DL_CONSUMER,
        }
        if update_id is not None:
            headers[HEADER_MSG_ID] = f"dl:telegram:update:{update_id}"
        delay = 0.25
        while True:
            try:
                await self.bus.js.publish(
                    dead_letter_subject(DL_SOURCE, DL_CONSUMER), data, headers=headers, timeout=5.0
                )
                break
            except (nats.errors.Error, TimeoutError) as pub_exc:
                log.warning("dead-letter record not stored (%s), retrying", type(pub_exc).__name__)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.max_backoff_s)
        metrics.UPDATES.labels("dead_lettered", reason).inc()
        log.error("update dead-lettered (%s): %s", reason, error)
        if update_id is not None:
            self.last_update_id = update_id
