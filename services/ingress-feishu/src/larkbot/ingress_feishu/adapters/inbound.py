"""The inbound path shared by the long connection and the webhook: raw envelope → ``EVENTS``.

``handle`` returns only once every canonical event of the envelope is durably in JetStream (PubAck) —
or the envelope was deliberately dropped or dead-lettered — so the caller may acknowledge Feishu. It
raises when that is not (yet) true (bus down, a transient failure of the message lookup), and the caller
must let Feishu re-push. A lookup that Feishu refuses for good never raises: the message is unknown
(dropped, ``unknown_message``) or the event is dead-lettered (``lookup_forbidden`` / ``lookup_refused``),
because a re-push would meet the same answer for hours (``core.apierrors``).

Dedup: Feishu re-pushes at +15 s, +5 min, +1 h and +6 h with the same ``event_id``. JetStream's
``Nats-Msg-Id`` window (2 min) covers the first; the ``ingress-dedup`` KV bucket (TTL 9 h) remembers every
published ``Nats-Msg-Id`` for the rest, so a late re-push is acknowledged without publishing. The pipeline's
unique key stays the durable guarantee (a crash between PubAck and the KV write only costs a duplicate
publish that the pipeline skips).

Events are handled one at a time under a lock, so the publish order is the arrival order even when the
webhook serves requests concurrently.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time

import nats
from nats.js.kv import KeyValue

from larkbot.canonical.names import (
    HEADER_DL_CONSUMER,
    HEADER_DL_ERROR,
    HEADER_DL_REASON,
    HEADER_DL_STREAM,
    HEADER_DL_SUBJECT,
    HEADER_MSG_ID,
    KV_INGRESS_DEDUP,
    Platform,
    dead_letter_subject,
    events_subject,
    msg_id,
)
from larkbot.runtime.bus import Bus, BusUnavailable
from larkbot.runtime.logs import log_context, mask

from .. import metrics
from ..core.adapter import EVENT_TYPES, Adapted, Dropped, FeishuAdapter, FeishuEvent, NeedsChat
from ..core.apierrors import ApiFailure
from ..core.errors import FeishuPayloadError, MalformedPayload
from .api import FeishuApi
from .contacts import Contacts
from .rest import FeishuApiError

log = logging.getLogger(__name__)

DEAD_LETTER_STREAM = "FEISHU"
DEAD_LETTER_CONSUMER = "ingress-feishu"


class LookupRefused(Exception):
    """An OpenAPI lookup the event needs was refused for good (the app lacks a scope, the request is
    invalid): the event is dead-lettered with ``reason`` ``lookup_<failure>`` and acknowledged."""

    def __init__(self, cause: FeishuApiError, event_type: str) -> None:
        super().__init__(str(cause))
        self.reason = f"lookup_{cause.failure.value}"
        self.event_type: str | None = event_type


def dedup_kv_key(nats_msg_id: str) -> str:
    """KV keys allow only ``[-/_=.a-zA-Z0-9]``; a digest of the ``Nats-Msg-Id`` always fits."""
    return hashlib.sha256(nats_msg_id.encode()).hexdigest()


class Inbound:
    def __init__(self, bus: Bus, adapter: FeishuAdapter, contacts: Contacts, api: FeishuApi | None) -> None:
        self.bus = bus
        self.adapter = adapter
        self.contacts = contacts
        self.api = api
        self._kv: KeyValue | None = None
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        self._kv = await self.bus.js.key_value(KV_INGRESS_DEDUP)

    async def handle(self, body: bytes, received_at_ms: int) -> None:
        started = time.perf_counter()
        async with self._lock:
            try:
                await self._handle(body, received_at_ms)
            finally:
                metrics.EVENT_SECONDS.observe(time.perf_counter() - started)

    async def _handle(self, body: bytes, received_at_ms: int) -> None:
        try:
            payload = json.loads(body)
            if not isinstance(payload, dict):
                raise MalformedPayload("$: not a JSON object")
        except ValueError:
            await self._dead_letter(body, MalformedPayload("$: not JSON"))
            return
        except MalformedPayload as exc:
            await self._dead_letter(body, exc)
            return
        try:
            result = self.adapter.adapt(payload, received_at_ms, self.contacts.names())
            if isinstance(result, NeedsChat):
                result = await self._resolve_chat(result, payload, received_at_ms)
        except FeishuPayloadError as exc:
            await self._dead_letter(body, exc)
            return
        except LookupRefused as exc:
            # Final for this event: a re-push would meet the same answer for hours (see core.apierrors).
            await self._dead_letter(body, exc)
            return
        if isinstance(result, Dropped):
            metrics.EVENTS.labels(result.event_type, f"dropped_{result.reason}").inc()
            log.debug("dropped %s: %s", result.event_type, result.reason)
            return
        self.contacts.seed(result.seen_names)
        self.contacts.want(result.user_ids)
        for event in result.events:
            await self.publish(event, result.event_type)

    async def _resolve_chat(
        self, needs: NeedsChat, payload: dict[str, object], received_at_ms: int
    ) -> Adapted | Dropped:
        """Look the reacted message up. Not there or not visible → dropped (``unknown_message``); any
        other final refusal → :class:`LookupRefused`; a transient failure raises (Feishu re-pushes)."""
        try:
            chat_id = await self.api.message_chat(needs.message_id) if self.api is not None else None
        except FeishuApiError as exc:
            if exc.failure is ApiFailure.TRANSIENT:
                raise
            raise LookupRefused(exc, needs.event_type) from None
        if chat_id is None:
            return Dropped(needs.event_type, needs.event_id, "unknown_message")
        self.adapter.remember(needs.message_id, chat_id)
        result = self.adapter.adapt(payload, received_at_ms, self.contacts.names())
        if isinstance(result, NeedsChat):  # pragma: no cover - remember() makes the chat known
            return Dropped(needs.event_type, needs.event_id, "unknown_message")
        return result

    async def publish(self, event: FeishuEvent, event_type: str) -> str:
        """Publish one canonical event (also used for self-events); returns the outcome label."""
        nats_id = msg_id(Platform.FEISHU.value, event.dedup_key)
        key = dedup_kv_key(nats_id)
        with log_context(chat=event.chat_id, dedup_key=event.dedup_key):
            if self._kv is not None:
                try:
                    await self._kv.get(key)
                except nats.js.errors.KeyNotFoundError:
                    pass
                else:
                    metrics.EVENTS.labels(event_type, "duplicate").inc()
                    log.info("duplicate %s skipped (already published)", event_type)
                    return "duplicate"
            ack = await self.bus.publish(
                events_subject(Platform.FEISHU.value, event.chat_id), event, msg_id=nats_id
            )
            outcome = "duplicate" if ack.duplicate else "published"
            if self._kv is not None:
                try:
                    await self._kv.put(key, b"1")
                except (nats.errors.Error, TimeoutError) as exc:
                    # Already durable in EVENTS; a later re-push is then caught by the pipeline's unique key.
                    log.warning("dedup record not written: %s", type(exc).__name__)
            metrics.EVENTS.labels(event_type, outcome).inc()
            return outcome

    async def _dead_letter(self, body: bytes, exc: FeishuPayloadError | LookupRefused) -> None:
        error = mask(str(exc))[:2000].replace("\r", " ").replace("\n", " ")
        # Bounded and single-line: a header over NATS's limit would lose the record (and the payload).
        event_type = (exc.event_type or "unknown")[:200].replace("\r", " ").replace("\n", " ")
        headers = {
            HEADER_MSG_ID: f"dl:feishu:{hashlib.sha256(body).hexdigest()[:40]}",
            HEADER_DL_REASON: exc.reason,
            HEADER_DL_ERROR: error,
            HEADER_DL_STREAM: DEAD_LETTER_STREAM,
            HEADER_DL_CONSUMER: DEAD_LETTER_CONSUMER,
            HEADER_DL_SUBJECT: event_type,
        }
        try:
            await self.bus.js.publish(
                dead_letter_subject(DEAD_LETTER_STREAM, DEAD_LETTER_CONSUMER),
                body,
                headers=headers,
                timeout=5.0,
            )
        except (nats.errors.Error, TimeoutError) as dl_exc:
            raise BusUnavailable(f"dead-letter record not written: {type(dl_exc).__name__}") from None
        metrics.EVENTS.labels(event_type if event_type in EVENT_TYPES else "other", "dead_lettered").inc()
        log.error("dead-lettered Feishu event (%s): %s", exc.reason, error)
