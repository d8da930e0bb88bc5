"""The inbound path shared by the long connection and the webhook: raw envelope → ``EVENTS``.

``handle`` returns only once every canonical event of the envelope is durably in JetStream (PubAck) —
or the envelope was deliberately dropped or dead-lettered — so the caller may acknowledge Feishu. It
raises when that is not (yet) true (bus down, a transient failure of the message lookup, a dead-letter
record not written: :class:`~larkbot.runtime.deadletter.DeadLetterFailed`), and the caller must let
Feishu re-push: the event comes back and is judged again, so nothing is lost. A lookup that Feishu
refuses for good never raises: the message is unknown (dropped, ``unknown_message``) or the event is
dead-lettered (``lookup_forbidden`` / ``lookup_refused``), because a re-push would meet the same answer
for hours (``core.apierrors``).

Dedup: Feishu re-pushes at +15 s, +5 min, +1 h and +6 h with the same ``event_id``. JetStream's
``Nats-Msg-Id`` window (2 min) covers the first; the ``ingress-dedup`` KV bucket (TTL 9 h) remembers every
published ``Nats-Msg-Id`` for the rest, so a late re-push is acknowledged without publishing. The pipeline's
unique key stays the durable guarantee (a crash between PubAck and the KV write only costs a duplicate
publish that the pipeline skips).

Dead letters go through the runtime's one writer (:mod:`larkbot.runtime.deadletter`, its header schema):
source ``feishu``, consumer ``ingress-feishu``, the event type as the subject, the record keyed by a
digest of the payload so that Feishu's re-push within the duplicate window adds no second record.

Events are handled one at a time under a lock, so the publish order is the arrival order even when the
webhook serves requests concurrently.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import assert_never

import nats
from nats.js.kv import KeyValue

from larkbot.canonical.errors import PermanentError
from larkbot.canonical.fingerprint import event_msg_id
from larkbot.canonical.names import KV_INGRESS_DEDUP, Platform, events_subject
from larkbot.runtime import tracing
from larkbot.runtime.budgets.store import BudgetSpent, BudgetUnavailable
from larkbot.runtime.bus import Bus, PayloadTooLarge
from larkbot.runtime.deadletter import DeadLetter, DeadLetters
from larkbot.runtime.logs import log_context

from .. import metrics
from ..core.adapter import EVENT_TYPES, Adapted, Dropped, FeishuAdapter, FeishuEvent, NeedsChat
from ..core.errors import FeishuPayloadError, MalformedPayload
from .api import FeishuApi
from .contacts import Contacts
from .rest import ApiTransient, FeishuApiError

log = logging.getLogger(__name__)

#: The largest event envelope the inbound path reads (a WebSocket frame, a webhook body). Feishu documents
#: message bodies up to 150 KB (text; post and card 30 KB). The envelope carries the content as a JSON
#: string inside JSON, so escaping can multiply it: a character Feishu sends as ``\u4e2d`` in the content
#: is ``\\u4e2d`` in the envelope, 7 bytes — a 150 KB text exceeds the 1 MiB default of ``websockets``.
#: 16 MiB is ~15 times that worst case, and twice the bus's 8 MiB message limit: every event the bus can
#: carry gets through, and one it cannot reaches the handler and is dead-lettered (``too_large``) instead
#: of closing the connection before it can be acknowledged (Feishu would re-push it for hours).
MAX_ENVELOPE_BYTES = 16 * 1024 * 1024
#: How long a group's name (asked for a shared group card) is kept before Feishu is asked again.
CHAT_NAME_TTL_S = 6 * 3600.0
#: Direct chats remembered as explained in the log (each is explained once while remembered).
EXPLAINED_CHATS = 10_000
#: Dead-letter records of events go to ``deadletter.feishu.ingress-feishu``.
DL_SOURCE = "feishu"
DL_CONSUMER = "ingress-feishu"


class EventRefused(PermanentError):
    """The event can never be published as things stand: dead-lettered with ``reason`` and acknowledged.

    ``lookup_forbidden`` / ``lookup_refused``: an OpenAPI lookup it needs was refused for good (the app
    lacks a scope, the request is invalid); ``too_large``: its canonical event exceeds the bus's limit."""

    def __init__(self, reason: str, message: str, event_type: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.event_type: str | None = event_type


def dedup_kv_key(nats_msg_id: str) -> str:
    """KV keys allow only ``[-/_=.a-zA-Z0-9]``; a digest of the ``Nats-Msg-Id`` always fits."""
    return hashlib.sha256(nats_msg_id.encode()).hexdigest()


class Inbound:
    def __init__(
        self,
        bus: Bus,
        adapter: FeishuAdapter,
        contacts: Contacts,
        api: FeishuApi | None,
        dead_letters: DeadLetters,
    ) -> None:
        self.bus = bus
        self.dead_letters = dead_letters
        self.adapter = adapter
        self.contacts = contacts
        self.api = api
        self._kv: KeyValue | None = None
        self._lock = asyncio.Lock()
        #: chat_id → (name or None, when asked): the groups shared cards named.
        self._chat_names: dict[str, tuple[str | None, float]] = {}
        #: Direct chats whose drop was explained in the log (newest last, bounded).
        self._explained: OrderedDict[str, None] = OrderedDict()

    async def start(self) -> None:
        self._kv = await self.bus.js.key_value(KV_INGRESS_DEDUP)

    async def handle(self, body: bytes, received_at_ms: int) -> None:
        started = time.perf_counter()
        async with self._lock:
            try:
                with tracing.receiving("feishu receive", {"messaging.system": "feishu"}):
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
        result: Adapted | Dropped
        try:
            match self.adapter.adapt(payload, received_at_ms, self._names()):
                case NeedsChat() as needs:
                    result = await self._resolve_chat(needs, payload, received_at_ms)
                case Adapted() | Dropped() as known:
                    result = known
                case unknown:
                    assert_never(unknown)
        except (FeishuPayloadError, EventRefused) as exc:
            await self._dead_letter(body, exc)
            return
        match result:
            case Dropped():
                metrics.EVENTS.labels(result.event_type, f"dropped_{result.reason}").inc()
                self._explain(result)
            case Adapted():
                await self._publish_adapted(result, payload, body, received_at_ms)
            case unexpected:
                assert_never(unexpected)

    async def _publish_adapted(
        self, result: Adapted, payload: dict[str, object], body: bytes, received_at_ms: int
    ) -> None:
        await self.contacts.seed(result.seen_names)
        if await self.contacts.resolve(result.user_ids):
            # A first-seen person's name arrived within the wait: adapt again, so that their first
            # event carries it (the adapter is pure; this repeats no side effect).
            adapted = self.adapter.adapt(payload, received_at_ms, self._names())
            result = adapted if isinstance(adapted, Adapted) else result
        self.contacts.want(result.user_ids)
        if result.chat_ids and await self._learn_chat_names(result.chat_ids):
            # A shared group card names the group: adapt again now that its name is known.
            adapted = self.adapter.adapt(payload, received_at_ms, self._names())
            result = adapted if isinstance(adapted, Adapted) else result
        for event in result.events:
            try:
                await self.publish(event, result.event_type)
            except PayloadTooLarge as exc:
                await self._dead_letter(body, EventRefused("too_large", str(exc), result.event_type))
                return

    def _explain(self, dropped: Dropped) -> None:
        """Log a drop; once per chat at a visible level when it concerns a direct chat, since serving one
        takes its chat id, which only this event discloses (a Feishu direct chat's id looks like a
        group's)."""
        chat = dropped.chat_id
        if dropped.reason not in ("private_chat", "not_direct") or chat is None or chat in self._explained:
            log.debug("dropped %s: %s", dropped.event_type, dropped.reason)
            return
        self._explained[chat] = None
        while len(self._explained) > EXPLAINED_CHATS:
            self._explained.popitem(last=False)
        if dropped.reason == "private_chat":
            log.info(
                "direct chat %s (with %s) is not configured: its events are dropped; to serve it, "
                'configure chats."feishu:%s" with direct_with: %s',
                chat,
                dropped.person or "an unknown sender",
                chat,
                dropped.person or "<the person's open_id>",
            )
        else:
            log.error(
                'chats."feishu:%s" is configured as a direct chat with %s (direct_with), but a message in '
                "it shows a group or another sender (%s): its messages are dropped until the configuration "
                "names the right chat and person",
                chat,
                self.adapter.direct_chats.get(chat),
                dropped.person or "none",
            )

    def _names(self) -> Mapping[str, str]:
        """Contact names, and the names of groups shared cards named."""
        chats = {chat: name for chat, (name, _) in self._chat_names.items() if name}
        return {**self.contacts.names(), **chats} if chats else self.contacts.names()

    async def _learn_chat_names(self, chat_ids: tuple[str, ...]) -> bool:
        """Ask Feishu for the names of groups not asked about for ``CHAT_NAME_TTL_S``; true when one was
        learnt. A failure only leaves the card without a name: naming a group never holds an event up."""
        learnt = False
        now = time.monotonic()
        for chat_id in chat_ids:
            known = self._chat_names.get(chat_id)
            if self.api is None or (known is not None and now - known[1] < CHAT_NAME_TTL_S):
                continue
            try:
                name = await self.api.chat_name(chat_id)
            except (FeishuApiError, TimeoutError, BudgetSpent, BudgetUnavailable) as exc:
                log.info("shared group %s not named: %s", chat_id, type(exc).__name__)
                name = None
            self._chat_names[chat_id] = (name, now)
            learnt = learnt or name is not None
        return learnt

    async def _resolve_chat(
        self, needs: NeedsChat, payload: dict[str, object], received_at_ms: int
    ) -> Adapted | Dropped:
        """Look the reacted message up. Not there or not visible → dropped (``unknown_message``); any
        other final refusal → :class:`EventRefused`; a transient failure raises (Feishu re-pushes)."""
        try:
            chat_id = await self.api.message_chat(needs.message_id) if self.api is not None else None
        except ApiTransient:
            raise
        except BudgetSpent:
            # The quota is spent: a re-push would be refused the same way until the budget resets.
            return Dropped(needs.event_type, needs.event_id, "budget_spent")
        except FeishuApiError as exc:
            # Final: a re-push would meet the same answer for hours (core.apierrors).
            raise EventRefused(f"lookup_{exc.kind.value}", str(exc), needs.event_type) from None
        if chat_id is None:
            return Dropped(needs.event_type, needs.event_id, "unknown_message")
        self.adapter.remember(needs.message_id, chat_id)
        result = self.adapter.adapt(payload, received_at_ms, self._names())
        if isinstance(result, NeedsChat):  # pragma: no cover - remember() makes the chat known
            return Dropped(needs.event_type, needs.event_id, "unknown_message")
        return result

    async def publish(self, event: FeishuEvent, event_type: str) -> str:
        """Publish one canonical event (also used for self-events); returns the outcome label."""
        nats_id = event_msg_id(event)
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

    async def _dead_letter(self, body: bytes, exc: FeishuPayloadError | EventRefused) -> None:
        event_type = exc.event_type or "unknown"
        letter = DeadLetter(DL_SOURCE, DL_CONSUMER, exc.reason, str(exc), body, subject=event_type)
        await self.dead_letters.write(letter)
        metrics.EVENTS.labels(event_type if event_type in EVENT_TYPES else "other", "dead_lettered").inc()
