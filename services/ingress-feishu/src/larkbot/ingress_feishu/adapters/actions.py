"""``actions.feishu``: execute what the driver asks, exactly once in effect, and report it. The same
:meth:`Actions.act` serves ``fetch.feishu``, where the media workers ask their downloads and the runtime's
fetch endpoint lets only read-only actions through (``larkbot.runtime.ingress``).

Decisions:

- Every send carries ``uuid`` derived from the action's idempotency key (Feishu dedups a uuid for an
  hour), so a send that failed transiently or lost its answer is retried here with the same uuid until it
  succeeds or the action's deadline (the turn's; at most ``send_attempts`` attempts), and a request the
  driver repeats names the same message (``core.retries``). A send that gives up is ``unknown`` when an
  attempt lost its answer, else ``failed``.
- One execution per idempotency key at a time in this process (:class:`OncePerKey`): a repeat while the
  first runs gets its result, and a key already completed answers ``duplicate`` without calling Feishu.
- Sends are paced (5/s per chat, 50/s per app, :class:`SendPacer`); a 429 pushes the app's next slot to
  Feishu's reset time, and the send's retry loop — its only one: the REST client does not wait a send's
  429 out — takes that slot.
- After each confirmed send a synthetic self-sent ``message`` event with Feishu's final message id is
  published (dedup key = that id); recalls publish the ``delete`` event Feishu would (``recall:<id>``).
- Budgets (``larkbot.runtime.budgets``): a send first books its parts in the chat's messages per minute
  (``feishu.budgets.messages_per_minute``, none by default), and every OpenAPI request is booked in the
  app's calls per day and month by the REST client; a spent budget answers ``failed`` with code
  ``budget_spent`` (with the ids of parts already sent), before the request leaves.
- Downloads go to the ``blobs`` object store under ``sha256:<hex>`` of the bytes.
- ``moderate`` (``ban_spammer``) is :mod:`.moderation`'s: removal, recalls, and a per-message report.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import assert_never

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
from larkbot.canonical.content import Attachment, AttachmentType, Content
from larkbot.canonical.errors import PermanentError
from larkbot.canonical.events import DeleteEvent, MessageEvent, Sender
from larkbot.canonical.names import OBJECT_STORE_BLOBS, Platform
from larkbot.runtime.budgets.store import Budgets, BudgetSpent, budget_refusal
from larkbot.runtime.bus import Bus
from larkbot.runtime.ingress import OncePerKey, failed, report_done
from larkbot.runtime.retry import Backoff, Failure, retrying

from .. import metrics
from ..core import emoji
from ..core.adapter import FeishuAdapter
from ..core.errors import UnsupportedEmoji
from ..core.outbound import feishu_uuid, post_content, self_content, split_text, to_feishu_markdown
from ..core.pacing import SendPacer
from ..core.retries import BACKOFF, NO_DEADLINE_BUDGET_S, send_policy
from .api import FeishuApi, SentMessage, image_content
from .inbound import Inbound
from .moderation import FeishuModeration
from .rest import (
    ApiForbidden,
    ApiNotFound,
    ApiTransient,
    FeishuApiError,
    PlatformTimeout,
    PlatformUnavailable,
    RateLimited,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BotSelf:
    open_id: str
    name: str


class SendOutcomeUnknown(PermanentError):
    """A send gave up after an attempt lost its answer (the message may exist); ``message_ids`` were
    confirmed before that. Reported ``unknown``, never tried again here."""

    def __init__(self, message_ids: tuple[str, ...]) -> None:
        super().__init__("send outcome unknown")
        self.message_ids = message_ids


class SendStopped(PermanentError):
    """A spent budget stopped a send after ``message_ids`` were confirmed."""

    def __init__(self, spent: BudgetSpent, message_ids: tuple[str, ...]) -> None:
        super().__init__(str(spent))
        self.spent = spent
        self.message_ids = message_ids


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class Actions:
    def __init__(
        self,
        api: FeishuApi,
        bus: Bus,
        inbound: Inbound,
        adapter: FeishuAdapter,
        me: BotSelf,
        utc_offset_min: int,
        pacer: SendPacer,
        *,
        budgets: Budgets | None = None,
        send_attempts: int = 8,
        backoff: Backoff = BACKOFF,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.api = api
        self.bus = bus
        self.inbound = inbound
        self.adapter = adapter
        self.me = me
        self.utc_offset_min = utc_offset_min
        self.pacer = pacer
        self.budgets = budgets
        self.retry = send_policy(send_attempts, backoff)
        self.sleep = sleep
        self.clock = clock
        self.jitter = jitter
        self._once = OncePerKey(keep=10_000)
        self.moderation = FeishuModeration(api, self._publish_recall)

    async def act(self, action: ActionRequest) -> ActionResult:
        result = await self._once.run(action.idempotency_key, lambda: self._act(action))
        metrics.ACTIONS.labels(action.kind, result.outcome if result.ok else _code(result)).inc()
        return result

    async def _act(self, action: ActionRequest) -> ActionResult:
        key = action.idempotency_key
        if action.deadline_ms is not None and _now_ms() > action.deadline_ms:
            return failed(key, "deadline", "the action's deadline passed before it could run")
        try:
            return await self._dispatch(action)
        except SendOutcomeUnknown as exc:
            error = ActionError(
                code="outcome_unknown",
                message="Feishu's answer to an attempt was lost (retried with the same uuid until the "
                "deadline): the message may or may not have been posted",
                retryable=False,
            )
            return ActionResult(
                idempotency_key=key, ok=False, outcome="unknown", message_ids=exc.message_ids, error=error
            )
        except SendStopped as exc:
            return budget_refusal(key, exc.spent, exc.message_ids)
        except BudgetSpent as exc:
            return budget_refusal(key, exc)
        except UnsupportedEmoji as exc:
            return failed(key, exc.code, str(exc))
        except RateLimited as exc:
            return ActionResult(
                idempotency_key=key,
                ok=False,
                outcome="failed",
                error=ActionError(
                    code="rate_limited", message=str(exc), retryable=True, retry_after_s=exc.delay_s
                ),
            )
        except (PlatformTimeout, PlatformUnavailable) as exc:
            return failed(key, "unavailable", str(exc), retryable=True)
        except FeishuApiError as exc:
            return failed(key, _action_code(exc), str(exc), retryable=isinstance(exc, ApiTransient))

    async def _dispatch(self, action: ActionRequest) -> ActionResult:
        key = action.idempotency_key
        match action:
            case SendMessageAction():
                ids = await self._send_text(action)
                return ActionResult(idempotency_key=key, ok=True, outcome="done", message_ids=ids)
            case ReactAction():
                emoji_type = emoji.to_feishu(action.emoji)
                if action.remove:
                    await self.api.remove_reaction(action.message_id, emoji_type)
                else:
                    await self.api.add_reaction(action.message_id, emoji_type)
                return ActionResult(idempotency_key=key, ok=True, outcome="done")
            case TypingAction():
                return ActionResult(idempotency_key=key, ok=True, outcome="done")  # Feishu has no typing
            case DownloadAction():
                return await self._download(action)
            case CustomEmojiAction():
                # Feishu's emoji are named by their emoji_type; there is no sticker behind one to fetch.
                return failed(key, "unsupported", "Feishu has no custom emoji to resolve")
            case SendImageAction():
                ids = await self._send_image(action)
                return ActionResult(idempotency_key=key, ok=True, outcome="done", message_ids=ids)
            case DeleteMessageAction():
                for message_id in action.message_ids:
                    await self.api.recall(message_id)
                    await self._publish_recall(action.chat_id, message_id)
                return ActionResult(idempotency_key=key, ok=True, outcome="done")
            case ModerateAction():
                return await self.moderation.moderate(action)
            case BanMemberAction():
                await self.api.remove_members(action.chat_id, [action.user_id])
                return ActionResult(idempotency_key=key, ok=True, outcome="done")
            case _:
                assert_never(action)

    # -- sends -----------------------------------------------------------------------------------------
    async def _send_text(self, action: SendMessageAction) -> tuple[str, ...]:
        allowed = frozenset(action.mentions)
        ids: list[str] = []
        parts = split_text(action.text)
        await self._spend(action.chat_id, len(parts), action.deadline_ms)
        for i, part in enumerate(parts):
            reply_to = action.reply_to_message_id if i == 0 else None
            content = post_content(to_feishu_markdown(part, allowed))
            uuid = feishu_uuid(action.idempotency_key, i)
            sent = await self._deliver(
                action.chat_id, reply_to, "post", content, uuid, ids, action.deadline_ms
            )
            ids.append(sent.message_id)
            await self._self_event(action.chat_id, sent, self_content(part, allowed), (), reply_to)
        return tuple(ids)

    async def _spend(self, chat_id: str, messages: int, deadline_ms: int | None) -> None:
        """Book ``messages`` in the chat's minute (raises ``BudgetSpent`` when it is spent), asking a
        bucket that does not answer again while the action's deadline allows."""
        if self.budgets is not None:
            left_s = None if deadline_ms is None else (deadline_ms - _now_ms()) / 1000
            await self.budgets.spend_messages(chat_id, messages, left_s=left_s)

    async def _send_image(self, action: SendImageAction) -> tuple[str, ...]:
        await self._spend(action.chat_id, 2 if action.caption else 1, action.deadline_ms)
        store = await self.bus.js.object_store(OBJECT_STORE_BLOBS)
        blob = await store.get(action.blob_key)
        data = bytes(blob.data or b"")
        image_key = await self.api.upload_image(data, action.mime)
        uuid = feishu_uuid(action.idempotency_key, 0)
        sent = await self._deliver(
            action.chat_id,
            action.reply_to_message_id,
            "image",
            image_content(image_key),
            uuid,
            [],
            action.deadline_ms,
        )
        attachment = Attachment(
            type=AttachmentType.PHOTO, file_id=image_key, mime=action.mime, size_bytes=len(data)
        )
        await self._self_event(action.chat_id, sent, Content(), (attachment,), action.reply_to_message_id)
        ids = [sent.message_id]
        if action.caption:
            caption = post_content(to_feishu_markdown(action.caption, frozenset()))
            uuid = feishu_uuid(action.idempotency_key, 1)
            more = await self._deliver(action.chat_id, None, "post", caption, uuid, ids, action.deadline_ms)
            ids.append(more.message_id)
            await self._self_event(action.chat_id, more, self_content(action.caption, frozenset()), (), None)
        return tuple(ids)

    async def _deliver(
        self,
        chat_id: str,
        reply_to: str | None,
        msg_type: str,
        content: str,
        uuid: str,
        done: list[str],
        deadline_ms: int | None,
    ) -> SentMessage:
        """Send one message under ``uuid``: wait for its pacing slot, and try again with the same uuid
        after a rate limit, a transient answer or a lost answer while the deadline allows — the only
        retry loop of a send (``core.retries``). Gives up with the last error, or
        :class:`SendOutcomeUnknown` when an attempt's answer was lost (the message may exist)."""
        started = self.clock()
        #: Any attempt's answer was lost: the message may exist.
        lost = False

        def left_s() -> float:
            if deadline_ms is not None:
                return (deadline_ms - _now_ms()) / 1000
            return NO_DEADLINE_BUDGET_S - (self.clock() - started)

        def retried(failure: Failure, attempts: int, _wait: float, exc: BaseException | None) -> None:
            metrics.SEND_RETRIES.labels(failure.value).inc()
            log.warning("send attempt %d failed (%s); retrying with the same uuid", attempts, exc)

        try:
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
                    delay = self.pacer.reserve(chat_id, self.clock())
                    if delay > 0:
                        metrics.RATE_LIMIT_WAIT_SECONDS.labels("pacing").inc(delay)
                        await self.sleep(delay)
                    try:
                        if reply_to is not None:
                            sent = await self.api.reply(reply_to, msg_type, content, uuid)
                        else:
                            sent = await self.api.send(chat_id, msg_type, content, uuid)
                    except PlatformTimeout:
                        # Safe to repeat: Feishu answers a known uuid with the message it created first.
                        lost = True
                        raise
                    except RateLimited as exc:
                        # Every send of the app waits for Feishu's reset; this one's next slot too.
                        self.pacer.back_off(self.clock() + exc.delay_s)
                        raise
                    except FeishuApiError as exc:
                        # ``-1``: no answer Feishu wrote (not JSON, or a success without the message):
                        # it may have been sent.
                        lost = lost or exc.code == -1
                        raise
                    self.adapter.remember(sent.message_id, sent.chat_id)
                    return sent
        except (PlatformTimeout, PlatformUnavailable, RateLimited, FeishuApiError) as last:
            if lost:
                raise SendOutcomeUnknown(tuple(done)) from last
            raise
        except BudgetSpent as spent:
            # A retry the budget refused after an attempt lost its answer: the message may exist.
            if lost:
                raise SendOutcomeUnknown(tuple(done)) from spent
            raise SendStopped(spent, tuple(done)) from None
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _self_event(
        self,
        chat_id: str,
        sent: SentMessage,
        content: Content,
        attachments: tuple[Attachment, ...],
        reply_to: str | None,
    ) -> None:
        event = MessageEvent(
            platform=Platform.FEISHU,
            chat_id=chat_id,
            dedup_key=sent.message_id,
            chat_type="group",
            received_at_ms=_now_ms(),
            timestamp_sec=sent.create_time_ms / 1000,
            utc_offset_min=self.utc_offset_min,
            message_id=sent.message_id,
            sender=Sender(id=self.me.open_id, display_name=self.me.name, is_bot=True),
            content=content,
            attachments=attachments,
            reply_to_message_id=reply_to,
            is_self_sent=True,
        )
        await self._report(event, "self_sent")

    async def _publish_recall(self, chat_id: str, message_id: str) -> None:
        now = _now_ms()
        event = DeleteEvent(
            platform=Platform.FEISHU,
            chat_id=chat_id,
            dedup_key=f"recall:{message_id}",
            chat_type="group",
            received_at_ms=now,
            timestamp_sec=now / 1000,
            utc_offset_min=self.utc_offset_min,
            message_ids=(message_id,),
            actor_id=self.me.open_id,
        )
        await self._report(event, "self_recall")

    async def _report(self, event: MessageEvent | DeleteEvent, event_type: str) -> None:
        """Publish what the bot did; it stays done when the bus never takes it (``runtime.ingress``)."""
        stored = await report_done(
            lambda: self.inbound.publish(event, event_type),
            f"{event_type} event of chat {event.chat_id} ({event.dedup_key})",
            clock=self.clock,
            sleep=self.sleep,
            jitter=self.jitter,
        )
        metrics.SELF_EVENTS.labels("published" if stored else "failed").inc()

    # -- downloads -------------------------------------------------------------------------------------
    async def _download(self, action: DownloadAction) -> ActionResult:
        key = action.idempotency_key
        if action.message_id is None:
            return failed(key, "bad_request", "Feishu downloads need the message id")
        kind = "image" if action.attachment_type == AttachmentType.PHOTO else "file"
        data = await self.api.download(action.message_id, action.file_id, kind, action.max_bytes)
        if data is None:
            return failed(key, "too_large", f"the file is larger than {action.max_bytes} bytes")
        blob_key = f"sha256:{hashlib.sha256(data).hexdigest()}"
        store = await self.bus.js.object_store(OBJECT_STORE_BLOBS)
        await store.put(blob_key, data)
        return ActionResult(idempotency_key=key, ok=True, outcome="done", blob_key=blob_key)


def _code(result: ActionResult) -> str:
    return result.error.code if result.error is not None else result.outcome


def _send_failure(exc: BaseException) -> Failure | None:
    """What a failed send is to the retry policy (``core.retries``)."""
    if isinstance(exc, PlatformTimeout):
        return Failure.LOST
    if isinstance(exc, PlatformUnavailable):
        return Failure.TRANSIENT
    if isinstance(exc, RateLimited):
        return Failure.RATE_LIMITED
    if isinstance(exc, ApiTransient):
        return Failure.TRANSIENT
    return None


def _action_code(exc: FeishuApiError) -> str:
    """The action-error code of a Feishu refusal."""
    match exc:
        case ApiNotFound():
            return "not_found"
        case ApiForbidden():
            return "forbidden"
        case ApiTransient():
            return "unavailable"
        case _:
            return "platform"


def _retry_after(exc: BaseException) -> float | None:
    return exc.delay_s if isinstance(exc, RateLimited) else None
