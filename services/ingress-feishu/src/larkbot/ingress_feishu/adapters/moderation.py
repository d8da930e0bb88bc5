"""``moderate`` on Feishu (the driver's ``ban_spammer``): remove the member from the group, then recall
their known messages, and report each step.

Decisions:

- The removal is the permission check. The rights that allow it — group owner, group manager, or the bot
  that created the group with ``im:chat:operate_as_owner`` — are not all visible in the chat's
  information, so a check made first could refuse a bot that may act, or pass one that may not. A final
  refusal of the removal (a 4xx answer that is not a rate limit) therefore means the bot lacks the rights:
  nothing else is attempted, and the answer is ``failed`` with code ``forbidden`` naming Feishu's code.
- A member no longer in the group comes back in ``invalid_id_list``: not banned (``not_member``), and
  nothing is recalled.
- Recalls follow a confirmed removal, one message at a time, so each gets its own outcome. Recalling
  someone else's message needs the same rights and a message younger than a year; Feishu's answer is
  reported as it is rather than guessed in advance. Each confirmed recall publishes the ``delete`` event
  Feishu would (dedup key ``recall:<id>``, actor the bot): an in-place change, never input for the bot.
- One execution per idempotency key at a time (:class:`~larkbot.runtime.ingress.OncePerKey`): a repeat
  gets the first report, never a second round of recalls answering "already recalled".
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from larkbot.canonical.actions import (
    BUDGET_SPENT,
    ActionError,
    ActionResult,
    MessageDeletion,
    ModerateAction,
    ModerationReport,
)
from larkbot.runtime.budgets.store import BudgetSpent
from larkbot.runtime.bus import BusUnavailable
from larkbot.runtime.ingress import OncePerKey, failed

from .. import metrics
from .api import FeishuApi
from .rest import ApiTransient, FeishuApiError, PlatformTimeout, PlatformUnavailable, RateLimited

log = logging.getLogger(__name__)

#: Publishes the ``delete`` event of one confirmed recall: ``(chat_id, message_id)``.
PublishRecall = Callable[[str, str], Awaitable[None]]


def _error(exc: Exception) -> ActionError:
    """A Feishu failure as the report names it."""
    if isinstance(exc, RateLimited):
        return ActionError(code="rate_limited", message=str(exc), retryable=True, retry_after_s=exc.delay_s)
    if isinstance(exc, FeishuApiError):
        code = "unavailable" if isinstance(exc, ApiTransient) else exc.kind.value
        return ActionError(code=code, message=str(exc), retryable=isinstance(exc, ApiTransient))
    return ActionError(code="unavailable", message=str(exc), retryable=True)


class FeishuModeration:
    def __init__(self, api: FeishuApi, publish_recall: PublishRecall) -> None:
        self.api = api
        self.publish_recall = publish_recall
        self.once = OncePerKey()

    async def moderate(self, action: ModerateAction) -> ActionResult:
        return await self.once.run(action.idempotency_key, lambda: self._moderate(action))

    async def _moderate(self, action: ModerateAction) -> ActionResult:
        key = action.idempotency_key
        try:
            invalid = await self.api.remove_members(action.chat_id, [action.user_id])
        except FeishuApiError as exc:
            if isinstance(exc, ApiTransient):
                metrics.MODERATION_BANS.labels("failed").inc()
                return failed(key, "unavailable", str(exc), retryable=True)
            metrics.MODERATION_BANS.labels("refused_permission").inc()
            return failed(key, "forbidden", f"the bot may not remove members here: {exc}")
        except (RateLimited, PlatformTimeout, PlatformUnavailable) as exc:
            metrics.MODERATION_BANS.labels("failed").inc()
            error = _error(exc)
            return failed(key, error.code, error.message, retryable=True)
        if action.user_id in invalid:
            metrics.MODERATION_BANS.labels("not_member").inc()
            not_member = ActionError(code="not_member", message="not a member of the group", retryable=False)
            not_banned = ActionError(code="not_banned", message="the member was not removed", retryable=False)
            report = ModerationReport(
                banned=False,
                ban_error=not_member,
                deletions=tuple(
                    MessageDeletion(message_id=m.message_id, outcome="skipped", error=not_banned)
                    for m in action.messages
                ),
            )
            metrics.MODERATION_DELETIONS.labels("skipped").inc(len(action.messages))
            return ActionResult(idempotency_key=key, ok=True, outcome="done", moderation=report)
        metrics.MODERATION_BANS.labels("banned").inc()
        deletions = [await self._recall(action.chat_id, m.message_id) for m in action.messages]
        report = ModerationReport(banned=True, deletions=tuple(deletions))
        return ActionResult(idempotency_key=key, ok=True, outcome="done", moderation=report)

    async def _recall(self, chat_id: str, message_id: str) -> MessageDeletion:
        try:
            await self.api.recall(message_id)
        except (FeishuApiError, RateLimited, PlatformTimeout, PlatformUnavailable) as exc:
            metrics.MODERATION_DELETIONS.labels("failed").inc()
            return MessageDeletion(message_id=message_id, outcome="failed", error=_error(exc))
        except BudgetSpent as exc:
            # The member is already removed: the report says so, with this recall refused.
            metrics.MODERATION_DELETIONS.labels("failed").inc()
            error = ActionError(code=BUDGET_SPENT, message=str(exc), retryable=True)
            return MessageDeletion(message_id=message_id, outcome="failed", error=error)
        metrics.MODERATION_DELETIONS.labels("deleted").inc()
        try:
            await self.publish_recall(chat_id, message_id)
        except BusUnavailable as exc:
            # The recall happened: the report says so; only the pipeline's copy stays behind.
            log.error("the delete event of a recall was not published: %s", exc)
        return MessageDeletion(message_id=message_id, outcome="deleted")
