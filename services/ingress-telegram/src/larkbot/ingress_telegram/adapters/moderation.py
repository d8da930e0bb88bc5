"""``moderate`` on Telegram (the driver's ``ban_spammer``): check the bot's own rights, ban the member,
delete their known messages Telegram still allows, and report each step.

Decisions:

- The rights come from ``getChatMember`` of the bot itself: the chat's creator may do everything; an
  administrator bans only with ``can_restrict_members`` and deletes only with ``can_delete_messages``.
  Without the right to ban nothing happens (``failed``, code ``forbidden``); with it but without the right
  to delete, the member is banned and every message is skipped (``forbidden``).
- ``banChatMember`` without ``revoke_messages``: only the messages the pipeline knows are deleted, each
  with its own outcome, so the report says exactly what went.
- Telegram deletes a message only while it is younger than 48 h. One older than 48 h less
  :data:`AGE_MARGIN_S` (room for the calls before it), by its platform time against this host's clock, is
  skipped (``too_old``) and never attempted.
- ``deleteMessage`` one message at a time (``deleteMessages`` answers one boolean for the whole batch).
  Each confirmed deletion publishes a ``delete`` event (dedup key ``<chat>:delete:<id>``, actor the bot):
  Telegram never tells a bot about deletions, and the change is in place, so it wakes nobody.
- One execution per idempotency key at a time (:class:`~larkbot.runtime.ingress.OncePerKey`): a repeat
  gets the first report, never a second round of deletions answering "not found".
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

from larkbot.canonical.actions import (
    ActionError,
    ActionResult,
    MessageDeletion,
    ModerateAction,
    ModeratedMessage,
    ModerationReport,
)
from larkbot.canonical.events import DeleteEvent
from larkbot.canonical.names import Platform
from larkbot.runtime.ingress import OncePerKey, failed

from .. import metrics
from ..core import TelegramAdapter
from ..core.context import platform_message_id
from .botapi import BotApiError, NotSent, OutcomeUnknown

#: How long Telegram lets a message be deleted.
DELETE_WINDOW_S: Final = 48 * 3600.0
#: Messages this close to the end of the window are left alone: the calls before theirs take time.
AGE_MARGIN_S: Final = 60.0

#: ``(chat_id, method, params)``: an idempotent Bot API call in a chat (following a group's upgrade).
Call = Callable[[str, str, dict[str, Any]], Awaitable[Any]]
Publish = Callable[[DeleteEvent, str], Awaitable[None]]
Describe = Callable[[BotApiError], ActionError]


def _rights(member: Any) -> tuple[bool, bool]:
    """(may ban, may delete) of a ``ChatMember``."""
    if not isinstance(member, dict):
        return False, False
    status = member.get("status")
    if status == "creator":
        return True, True
    if status != "administrator":
        return False, False
    return member.get("can_restrict_members") is True, member.get("can_delete_messages") is True


class TelegramModeration:
    def __init__(
        self,
        call: Call,
        publish: Publish,
        describe: Describe,
        adapter: TelegramAdapter,
        *,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.call = call
        self.publish = publish
        self.describe = describe
        self.adapter = adapter
        self.wall_clock = wall_clock
        self.once = OncePerKey()

    def _error(self, exc: Exception) -> ActionError:
        if isinstance(exc, BotApiError):
            return self.describe(exc)
        return ActionError(code="network", message=str(exc), retryable=True)

    async def moderate(self, action: ModerateAction) -> ActionResult:
        return await self.once.run(action.idempotency_key, lambda: self._moderate(action))

    async def _moderate(self, action: ModerateAction) -> ActionResult:
        key, chat = action.idempotency_key, action.chat_id
        if self.adapter.bot_id is None:
            metrics.MODERATION_BANS.labels("failed").inc()
            return failed(key, "not_ready", "the bot's own id is not known yet", retryable=True)
        try:
            may_ban, may_delete = _rights(
                await self.call(chat, "getChatMember", {"user_id": int(self.adapter.bot_id)})
            )
        except (BotApiError, NotSent, OutcomeUnknown) as exc:
            error = self._error(exc)
            refused = error.code == "forbidden"
            metrics.MODERATION_BANS.labels("refused_permission" if refused else "failed").inc()
            message = f"the bot's rights could not be read: {error.message}"
            return failed(key, error.code, message, retryable=error.retryable)
        if not may_ban:
            metrics.MODERATION_BANS.labels("refused_permission").inc()
            return failed(key, "forbidden", "the bot is not an administrator allowed to ban members here")
        try:
            await self.call(chat, "banChatMember", {"user_id": int(action.user_id)})
        except (BotApiError, NotSent, OutcomeUnknown) as exc:
            metrics.MODERATION_BANS.labels("failed").inc()
            not_banned = ActionError(code="not_banned", message="the member was not banned", retryable=False)
            metrics.MODERATION_DELETIONS.labels("skipped").inc(len(action.messages))
            report = ModerationReport(
                banned=False,
                ban_error=self._error(exc),
                deletions=tuple(
                    MessageDeletion(message_id=m.message_id, outcome="skipped", error=not_banned)
                    for m in action.messages
                ),
            )
            return ActionResult(idempotency_key=key, ok=True, outcome="done", moderation=report)
        metrics.MODERATION_BANS.labels("banned").inc()
        deletions = [await self._delete(chat, m, may_delete) for m in action.messages]
        report = ModerationReport(banned=True, deletions=tuple(deletions))
        return ActionResult(idempotency_key=key, ok=True, outcome="done", moderation=report)

    async def _delete(self, chat: str, message: ModeratedMessage, may_delete: bool) -> MessageDeletion:
        message_id = message.message_id
        if self.wall_clock() - message.timestamp_sec > DELETE_WINDOW_S - AGE_MARGIN_S:
            metrics.MODERATION_DELETIONS.labels("skipped").inc()
            error = ActionError(
                code="too_old", message="older than 48 h: Telegram no longer deletes it", retryable=False
            )
            return MessageDeletion(message_id=message_id, outcome="skipped", error=error)
        if not may_delete:
            metrics.MODERATION_DELETIONS.labels("skipped").inc()
            error = ActionError(
                code="forbidden", message="the bot may not delete messages here", retryable=False
            )
            return MessageDeletion(message_id=message_id, outcome="skipped", error=error)
        try:
            await self.call(chat, "deleteMessage", {"message_id": platform_message_id(message_id)})
        except (BotApiError, NotSent, OutcomeUnknown) as exc:
            metrics.MODERATION_DELETIONS.labels("failed").inc()
            return MessageDeletion(message_id=message_id, outcome="failed", error=self._error(exc))
        metrics.MODERATION_DELETIONS.labels("deleted").inc()
        now_ms = time.time_ns() // 1_000_000
        event = DeleteEvent(
            platform=Platform.TELEGRAM,
            chat_id=chat,
            dedup_key=f"{chat}:delete:{message_id}",
            received_at_ms=now_ms,
            timestamp_sec=now_ms / 1000,
            utc_offset_min=self.adapter.utc_offset_min,
            message_ids=(message_id,),
            actor_id=self.adapter.bot_id,
        )
        await self.publish(event, "delete event")
        return MessageDeletion(message_id=message_id, outcome="deleted")
