"""``actions.feishu``: execute what the driver asks, exactly once in effect, and report it.

Decisions:

- Every send carries ``uuid`` derived from the action's idempotency key (Feishu dedups a uuid for an
  hour), so a send that timed out is retried here with the same uuid (``send_attempts`` in total) and a
  request the driver repeats names the same message. Only when every attempt timed out is the outcome
  ``unknown``. A key already completed by this process answers ``duplicate`` without calling Feishu.
- Sends are paced (5/s per chat, 50/s per app, :class:`SendPacer`); a 429 pushes the app's next slot to
  Feishu's reset time and the REST client waits it out (then gives up with ``rate_limited``).
- After each confirmed send a synthetic self-sent ``message`` event with Feishu's final message id is
  published (dedup key = that id); recalls publish the ``delete`` event Feishu would (``recall:<id>``).
- Downloads go to the ``blobs`` object store under ``sha256:<hex>`` of the bytes.
- ``moderate`` (``ban_spammer``) is :mod:`.moderation`'s: removal, recalls, and a per-message report.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from larkbot.canonical.actions import (
    ActionError,
    ActionRequest,
    ActionResult,
    BanMemberAction,
    DeleteMessageAction,
    DownloadAction,
    ModerateAction,
    ReactAction,
    SendImageAction,
    SendMessageAction,
    TypingAction,
)
from larkbot.canonical.content import Attachment, AttachmentType, Content
from larkbot.canonical.events import DeleteEvent, MessageEvent, Sender
from larkbot.canonical.names import OBJECT_STORE_BLOBS, Platform
from larkbot.runtime.bus import Bus
from larkbot.runtime.ingress import failed

from .. import metrics
from ..core import emoji
from ..core.adapter import FeishuAdapter
from ..core.apierrors import ApiFailure
from ..core.errors import UnsupportedEmoji
from ..core.outbound import feishu_uuid, post_content, self_content, split_text, to_feishu_markdown
from ..core.pacing import SendPacer
from .api import FeishuApi, SentMessage, image_content
from .inbound import Inbound
from .moderation import FeishuModeration
from .rest import FeishuApiError, PlatformTimeout, PlatformUnavailable, RateLimited

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BotSelf:
    open_id: str
    name: str


class _Unknown(Exception):
    """Every attempt of a send timed out; ``message_ids`` were confirmed before that."""

    def __init__(self, message_ids: tuple[str, ...]) -> None:
        super().__init__("send outcome unknown")
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
        send_attempts: int = 3,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.bus = bus
        self.inbound = inbound
        self.adapter = adapter
        self.me = me
        self.utc_offset_min = utc_offset_min
        self.pacer = pacer
        self.send_attempts = send_attempts
        self._sleep = sleep
        self._clock = clock
        self._completed: OrderedDict[str, ActionResult] = OrderedDict()
        self.moderation = FeishuModeration(api, self._publish_recall)

    async def act(self, action: ActionRequest) -> ActionResult:
        result = await self._act(action)
        metrics.ACTIONS.labels(action.kind, result.outcome if result.ok else _code(result)).inc()
        if result.outcome == "done":
            self._completed[action.idempotency_key] = result
            while len(self._completed) > 10_000:
                self._completed.popitem(last=False)
        return result

    async def _act(self, action: ActionRequest) -> ActionResult:
        key = action.idempotency_key
        if action.deadline_ms is not None and _now_ms() > action.deadline_ms:
            return failed(key, "deadline", "the action's deadline passed before it could run")
        previous = self._completed.get(key)
        if previous is not None:
            return previous.model_copy(update={"outcome": "duplicate"})
        try:
            return await self._dispatch(action)
        except _Unknown as exc:
            error = ActionError(
                code="timeout", message="Feishu did not answer the send in time", retryable=False
            )
            return ActionResult(
                idempotency_key=key, ok=False, outcome="unknown", message_ids=exc.message_ids, error=error
            )
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
            code = "not_found" if exc.failure is ApiFailure.NOT_FOUND else "platform"
            return failed(key, code, str(exc), retryable=exc.failure is ApiFailure.TRANSIENT)

    async def _dispatch(self, action: ActionRequest) -> ActionResult:
        key = action.idempotency_key
        if isinstance(action, SendMessageAction):
            ids = await self._send_text(action)
            return ActionResult(idempotency_key=key, ok=True, outcome="done", message_ids=ids)
        if isinstance(action, ReactAction):
            emoji_type = emoji.to_feishu(action.emoji)
            if action.remove:
                await self.api.remove_reaction(action.message_id, emoji_type)
            else:
                await self.api.add_reaction(action.message_id, emoji_type)
            return ActionResult(idempotency_key=key, ok=True, outcome="done")
        if isinstance(action, TypingAction):
            return ActionResult(idempotency_key=key, ok=True, outcome="done")  # Feishu has no typing signal
        if isinstance(action, DownloadAction):
            return await self._download(action)
        if isinstance(action, SendImageAction):
            ids = await self._send_image(action)
            return ActionResult(idempotency_key=key, ok=True, outcome="done", message_ids=ids)
        if isinstance(action, DeleteMessageAction):
            for message_id in action.message_ids:
                await self.api.recall(message_id)
                await self._publish_recall(action.chat_id, message_id)
            return ActionResult(idempotency_key=key, ok=True, outcome="done")
        if isinstance(action, ModerateAction):
            return await self.moderation.moderate(action)
        assert isinstance(action, BanMemberAction)
        await self.api.remove_members(action.chat_id, [action.user_id])
        return ActionResult(idempotency_key=key, ok=True, outcome="done")

    # -- sends -----------------------------------------------------------------------------------------
    async def _send_text(self, action: SendMessageAction) -> tuple[str, ...]:
        allowed = frozenset(action.mentions)
        ids: list[str] = []
        for i, part in enumerate(split_text(action.text)):
            reply_to = action.reply_to_message_id if i == 0 else None
            content = post_content(to_feishu_markdown(part, allowed))
            sent = await self._deliver(
                action.chat_id, reply_to, "post", content, feishu_uuid(action.idempotency_key, i), ids
            )
            ids.append(sent.message_id)
            await self._self_event(action.chat_id, sent, self_content(part, allowed), (), reply_to)
        return tuple(ids)

    async def _send_image(self, action: SendImageAction) -> tuple[str, ...]:
        store = await self.bus.js.object_store(OBJECT_STORE_BLOBS)
        blob = await store.get(action.blob_key)
        data = bytes(blob.data or b"")
        image_key = await self.api.upload_image(data, action.mime)
        uuid = feishu_uuid(action.idempotency_key, 0)
        sent = await self._deliver(
            action.chat_id, action.reply_to_message_id, "image", image_content(image_key), uuid, []
        )
        attachment = Attachment(
            type=AttachmentType.PHOTO, file_id=image_key, mime=action.mime, size_bytes=len(data)
        )
        await self._self_event(action.chat_id, sent, Content(), (attachment,), action.reply_to_message_id)
        ids = [sent.message_id]
        if action.caption:
            caption = post_content(to_feishu_markdown(action.caption, frozenset()))
            more = await self._deliver(
                action.chat_id, None, "post", caption, feishu_uuid(action.idempotency_key, 1), ids
            )
            ids.append(more.message_id)
            await self._self_event(action.chat_id, more, self_content(action.caption, frozenset()), (), None)
        return tuple(ids)

    async def _deliver(
        self, chat_id: str, reply_to: str | None, msg_type: str, content: str, uuid: str, done: list[str]
    ) -> SentMessage:
        for attempt in range(1, self.send_attempts + 1):
            delay = self.pacer.reserve(chat_id, self._clock())
            if delay > 0:
                metrics.RATE_LIMIT_WAIT_SECONDS.labels("pacing").inc(delay)
                await self._sleep(delay)
            try:
                if reply_to is not None:
                    sent = await self.api.reply(reply_to, msg_type, content, uuid)
                else:
                    sent = await self.api.send(chat_id, msg_type, content, uuid)
            except PlatformTimeout:
                # Safe to repeat: Feishu answers a known uuid with the message it created first.
                log.warning(
                    "send timed out (attempt %d of %d); retrying with the same uuid",
                    attempt,
                    self.send_attempts,
                )
                continue
            self.adapter.remember(sent.message_id, sent.chat_id)
            return sent
        raise _Unknown(tuple(done))

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
        await self.inbound.publish(event, "self_sent")
        metrics.SELF_EVENTS.inc()

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
        await self.inbound.publish(event, "self_recall")

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
