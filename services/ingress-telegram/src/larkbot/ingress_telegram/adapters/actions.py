"""``actions.telegram``: sends (paced, ledgered, retried, with a synthetic self-sent event), reactions,
typing, downloads into the object store, custom emoji resolved to their stickers, bans and deletions.
The same :meth:`ActionExecutor.act` serves ``fetch.telegram``, where the media workers ask downloads and
custom emoji and the runtime's fetch endpoint lets only read-only actions through
(``larkbot.runtime.ingress``).

Error mapping, once, here: ``BotApiError`` 429 → ``rate_limited`` (retryable, ``retry_after_s``), 403 →
``forbidden``, 400 "not found" → ``not_found``, 5xx → ``unavailable`` (retryable), other 4xx →
``platform``; ``NotSent`` → ``network`` (retryable: nothing left); ``OutcomeUnknown`` → outcome
``unknown`` for sends (never repeated blindly), ``network`` for the idempotent actions.

A send first books its parts in the chat's messages-per-minute budget (``larkbot.runtime.budgets``,
shared by the replicas): a spent budget answers ``failed`` with code ``budget_spent`` before anything
reaches Telegram, under a ``failed`` record so that a repeat later resumes.

A send has one retry layer, :meth:`ActionExecutor._deliver`: the pacing slot, a 429's ``retry_after`` and
the backoff after a 5xx answer or a connection that never opened are one loop (``core.retries``), bounded
by the action's deadline, under the one ledger record the attempt holds. A lost answer ends it: the
record says ``unknown`` and the message is never sent again. A repeat of a key whose attempt still runs
is answered ``unknown`` with code ``in_progress`` (retryable: asking again later tells more). The record
is held through ``adapters.records``, which asks a ledger that does not answer again.

Chats and message ids are translated here, once: a group upgraded to a supergroup is addressed as the
supergroup (its ``s<id>`` message ids as plain ids), and a group Telegram answers with
``migrate_to_chat_id`` is learnt as upgraded and the call sent again there. A send into a forum carries
the topic (``message_thread_id``) the adapter remembers for it (``core.memory.Threads``).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, assert_never

from larkbot.canonical.actions import (
    ActionError,
    ActionRequest,
    ActionResult,
    BanMemberAction,
    CustomEmojiAction,
    DeleteMessageAction,
    DownloadAction,
    ModerateAction,
    ReactAction,
    SendImageAction,
    SendMessageAction,
    TypingAction,
)
from larkbot.canonical.events import DeleteEvent, MessageEvent
from larkbot.canonical.fingerprint import event_msg_id
from larkbot.canonical.names import Platform, events_subject
from larkbot.runtime.budgets.store import Budgets, BudgetSpent, budget_refusal
from larkbot.runtime.bus import Bus, BusUnavailable
from larkbot.runtime.ingress import failed, report_done
from larkbot.runtime.logs import mask
from larkbot.runtime.retry import Failure, RetryPolicy, retrying

from .. import metrics
from ..core import (
    SEND_RETRY,
    Pacer,
    Record,
    State,
    TelegramAdapter,
    is_group_chat,
    send_failure,
    to_telegram_html,
)
from ..core.context import platform_message_id
from ..core.ledger import unknown_answer
from .botapi import BotApi, BotApiError, NotSent, OutcomeUnknown
from .downloads import custom_emoji, download
from .ledger import SentLedger
from .migrations import ChatMigrations
from .moderation import TelegramModeration
from .records import SendRecords, now_ms, seconds_left

log = logging.getLogger(__name__)

PLATFORM: Final = Platform.TELEGRAM.value
#: The idempotent actions: nothing to ledger, a failure is the Bot API's answer.
_Simple = (
    ReactAction | TypingAction | BanMemberAction | DeleteMessageAction | DownloadAction | CustomEmojiAction
)


class ActionExecutor:
    def __init__(
        self,
        api: BotApi,
        bus: Bus,
        ledger: SentLedger,
        adapter: TelegramAdapter,
        *,
        migrations: ChatMigrations | None = None,
        pacer: Pacer | None = None,
        budgets: Budgets | None = None,
        retry: RetryPolicy = SEND_RETRY,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.api = api
        self.bus = bus
        self.ledger = ledger
        self.adapter = adapter
        self.migrations = migrations
        self.pacer = pacer or Pacer()
        self.budgets = budgets
        self.retry = retry
        self.clock = clock
        self.sleep = sleep
        self.jitter = jitter
        self.records = SendRecords(ledger, clock=clock, sleep=sleep, jitter=jitter)
        self.moderation = TelegramModeration(self._call, self._publish, api_error, adapter)

    async def act(self, action: ActionRequest) -> ActionResult:
        key = action.idempotency_key
        match action:
            case SendMessageAction():
                # Its ledger answers first: a late repeat of a key that was sent is a duplicate, not a
                # refusal.
                result = await self.send_message(action)
            case _ if _late(action.deadline_ms):
                result = failed(key, "deadline", "the deadline passed before execution")
            case ModerateAction():
                result = await self.moderation.moderate(action)
            case (
                ReactAction()
                | TypingAction()
                | BanMemberAction()
                | DeleteMessageAction()
                | DownloadAction()
                | CustomEmojiAction()
            ):
                try:
                    result = await self._simple(action)
                except BotApiError as exc:
                    result = _api_failure(key, exc)
                except (NotSent, OutcomeUnknown) as exc:
                    result = failed(key, "network", str(exc), retryable=True)
            case SendImageAction():
                result = failed(key, "unsupported", f"{action.kind} is not supported on Telegram")
            case _:
                assert_never(action)
        metrics.ACTIONS.labels(action.kind, result.outcome).inc()
        return result

    # -- sends -----------------------------------------------------------------------------------------
    async def send_message(self, action: SendMessageAction) -> ActionResult:
        key = action.idempotency_key
        if _late(action.deadline_ms):
            return await self.records.late(key)
        parts = to_telegram_html(action.text)
        if not parts:
            return failed(key, "bad_request", "the text renders to an empty message")
        held = await self.records.hold(key, parts, action.deadline_ms)
        if isinstance(held, ActionResult):
            return held
        revision, confirmed = held
        refused = await self._spend(action, len(parts) - len(confirmed))
        if refused is not None:
            record = Record(State.FAILED, tuple(confirmed), len(parts), now_ms())
            await self.records.record(key, record, revision, action.deadline_ms)
            return refused.model_copy(update={"message_ids": tuple(confirmed)})
        thread = self.adapter.threads.for_send(action.chat_id, action.reply_to_message_id)
        for index in range(len(confirmed), len(parts)):
            params: dict[str, Any] = {
                "chat_id": self._chat(action.chat_id),
                "text": parts[index],
                "parse_mode": "HTML",
            }
            if thread is not None:
                params["message_thread_id"] = int(thread)
            if index == 0 and action.reply_to_message_id is not None:
                params["reply_parameters"] = {
                    "message_id": platform_message_id(action.reply_to_message_id),
                    "allow_sending_without_reply": True,
                }
            try:
                message = await self._deliver(action.chat_id, params, action.deadline_ms)
            except (BotApiError, NotSent) as exc:
                await self.records.record(
                    key,
                    Record(State.FAILED, tuple(confirmed), len(parts), now_ms()),
                    revision,
                    action.deadline_ms,
                )
                error = (
                    ActionError(code="network", message=str(exc), retryable=True)
                    if isinstance(exc, NotSent)
                    else api_error(exc)
                )
                return ActionResult(
                    idempotency_key=key, ok=False, outcome="failed", message_ids=tuple(confirmed), error=error
                )
            except OutcomeUnknown as exc:
                await self.records.record(
                    key,
                    Record(State.UNKNOWN, tuple(confirmed), len(parts), now_ms()),
                    revision,
                    action.deadline_ms,
                )
                log.warning("send outcome unknown: %s", exc)
                return unknown_answer(key, tuple(confirmed), in_progress=False)
            sent = self._self_event(message)
            confirmed.append(sent.message_id)  # the canonical id (``s<id>`` in an upgraded group)
            state = State.DONE if len(confirmed) == len(parts) else State.PENDING
            revision = await self.records.record(
                key, Record(state, tuple(confirmed), len(parts), now_ms()), revision, action.deadline_ms
            )
            await self._publish(sent, "self-sent event")
        return ActionResult(idempotency_key=key, ok=True, outcome="done", message_ids=tuple(confirmed))

    async def _spend(self, action: SendMessageAction, parts: int) -> ActionResult | None:
        """Book the parts still to send in the chat's budget (all or none); the refusal when it is spent
        or cannot be counted now (the record then says ``failed``: a repeat resumes)."""
        if self.budgets is None:
            return None
        try:
            await self.budgets.spend_messages(
                action.chat_id, parts, left_s=seconds_left(action.deadline_ms, self.clock)()
            )
        except BudgetSpent as exc:
            log.info("send refused in chat %s: %s", action.chat_id, exc)
            return budget_refusal(action.idempotency_key, exc)
        except BusUnavailable as exc:
            return failed(action.idempotency_key, "unavailable", str(exc), retryable=True)
        return None

    async def _deliver(self, chat_id: str, params: dict[str, Any], deadline_ms: int | None) -> Any:
        """Send one message: wait for its pacing slot, and try again after a 429 (its ``retry_after``) or
        a definite transient failure (backoff with jitter) while the deadline allows — the only retry
        loop of a send. Raises the last :class:`BotApiError` / :class:`NotSent` when it gives up, and
        :class:`OutcomeUnknown` at once when an answer is lost."""
        left_s = seconds_left(deadline_ms, self.clock)

        def retried(failure: Failure, attempts: int, wait: float, exc: BaseException | None) -> None:
            metrics.SEND_RETRIES.labels(failure.value).inc()
            log.warning("send attempt %d failed (%s); retrying in %.2f s", attempts, exc, wait)

        async for attempt in retrying(
            self.retry,
            _send_failure,
            left_s=left_s,
            retry_after=_retry_after,
            paced=True,
            on_retry=retried,
            sleep=self.sleep,
            jitter=self.jitter,
        ):
            with attempt:
                while True:
                    now = self.clock()
                    slot = self.pacer.reserve(chat_id, is_group_chat(chat_id), now)
                    metrics.SEND_WAIT.observe(slot - now)
                    if slot > now:
                        await self.sleep(slot - now)
                    try:
                        return await self.api.call("sendMessage", params)
                    except BotApiError as exc:
                        if await self._upgraded(chat_id, exc):
                            params["chat_id"] = self._chat(chat_id)
                            continue
                        if send_failure(exc.code) is Failure.RATE_LIMITED:
                            metrics.RATE_LIMITED.labels("sendMessage").inc()
                            if exc.retry_after is not None:
                                # Every send of the chat waits it out, this one's retry (its next slot) too.
                                self.pacer.block(chat_id, self.clock() + exc.retry_after)
                        raise
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _chat(self, chat_id: str) -> str:
        """Where calls for ``chat_id`` go (the supergroup a group became)."""
        return self.adapter.migrations.platform_chat(chat_id)

    async def _upgraded(self, chat_id: str, exc: BotApiError) -> bool:
        """Learn the upgrade a refusal names; true when the call should go to the supergroup."""
        if exc.migrate_to_chat_id is None:
            return False
        supergroup = str(exc.migrate_to_chat_id)
        if not self.adapter.migrations.learn(chat_id, supergroup):
            return False  # already sent there: do not loop
        log.warning("chat %s was upgraded to supergroup %s; sending there", chat_id, supergroup)
        if self.migrations is not None:
            await self.migrations.record(chat_id, supergroup)
        return True

    def _self_event(self, message: dict[str, Any]) -> MessageEvent:
        event = self.adapter.adapt_message(message, now_ms())
        if not event.is_self_sent:
            event = MessageEvent.model_validate({**event.model_dump(), "is_self_sent": True})
        return event

    async def _publish(self, event: MessageEvent | DeleteEvent, what: str) -> None:
        subject = events_subject(PLATFORM, event.chat_id)
        stored = await report_done(
            lambda: self.bus.publish(subject, event, msg_id=event_msg_id(event)),
            f"{what} of chat {event.chat_id} ({event.dedup_key})",
            clock=self.clock,
            sleep=self.sleep,
            jitter=self.jitter,
        )
        metrics.SELF_EVENTS.labels("published" if stored else "failed").inc()

    # -- idempotent actions ------------------------------------------------------------------------------
    async def _call(self, chat_id: str, method: str, params: dict[str, Any]) -> Any:
        """An idempotent call in ``chat_id`` (sent again to the supergroup when Telegram names one)."""
        try:
            return await self.api.call(method, {"chat_id": self._chat(chat_id), **params})
        except BotApiError as exc:
            if not await self._upgraded(chat_id, exc):
                raise
        return await self.api.call(method, {"chat_id": self._chat(chat_id), **params})

    async def _simple(self, action: _Simple) -> ActionResult:
        key = action.idempotency_key
        match action:
            case ReactAction():
                reaction = [] if action.remove else [{"type": "emoji", "emoji": action.emoji}]
                await self._call(
                    action.chat_id,
                    "setMessageReaction",
                    {"message_id": platform_message_id(action.message_id), "reaction": reaction},
                )
            case TypingAction():
                await self._call(action.chat_id, "sendChatAction", {"action": "typing"})
            case BanMemberAction():
                await self._call(action.chat_id, "banChatMember", {"user_id": int(action.user_id)})
            case DeleteMessageAction():
                return await self._delete(action)
            case DownloadAction():
                return await download(self.api, self.bus, action)
            case CustomEmojiAction():
                return await custom_emoji(self.api, action)
            case _:
                assert_never(action)
        return ActionResult(idempotency_key=key, ok=True, outcome="done")

    async def _delete(self, action: DeleteMessageAction) -> ActionResult:
        for message_id in action.message_ids:
            await self._call(action.chat_id, "deleteMessage", {"message_id": platform_message_id(message_id)})
        now = now_ms()
        event = DeleteEvent(
            platform=Platform.TELEGRAM,
            chat_id=action.chat_id,
            dedup_key=f"{action.chat_id}:delete:{','.join(action.message_ids)}",
            received_at_ms=now,
            timestamp_sec=now / 1000,
            utc_offset_min=self.adapter.utc_offset_min,
            message_ids=action.message_ids,
            actor_id=self.adapter.bot_id,
        )
        await self._publish(event, "delete event")
        return ActionResult(idempotency_key=action.idempotency_key, ok=True, outcome="done")


def _late(deadline_ms: int | None) -> bool:
    return deadline_ms is not None and now_ms() > deadline_ms


def api_error(exc: BotApiError) -> ActionError:
    description = mask(exc.description)[:300]
    if exc.code == 429:
        return ActionError(
            code="rate_limited", message=description, retryable=True, retry_after_s=exc.retry_after
        )
    if exc.code == 403:
        return ActionError(code="forbidden", message=description, retryable=False)
    if exc.code == 400 and "not found" in exc.description.lower():
        return ActionError(code="not_found", message=description, retryable=False)
    if exc.code >= 500:
        return ActionError(code="unavailable", message=description, retryable=True)
    return ActionError(code="platform", message=description, retryable=False)


def _api_failure(key: str, exc: BotApiError) -> ActionResult:
    return ActionResult(idempotency_key=key, ok=False, outcome="failed", error=api_error(exc))


def _send_failure(exc: BaseException) -> Failure | None:
    """What a failed ``sendMessage`` is to the retry policy (``core.retries``)."""
    if isinstance(exc, BotApiError):
        return send_failure(exc.code)
    if isinstance(exc, NotSent):
        return Failure.TRANSIENT
    return None


def _retry_after(exc: BaseException) -> float | None:
    return exc.retry_after if isinstance(exc, BotApiError) else None


def _bus_failure(exc: BaseException) -> Failure | None:
    return Failure.TRANSIENT if isinstance(exc, BusUnavailable) else None
