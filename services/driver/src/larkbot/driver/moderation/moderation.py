"""``ban_spammer`` for one chat's wake-up: gather the facts ``core.moderation`` decides on, ask the ingress
to act (``ModerateAction``), and turn its report into the tool result.

Order: resolve the evidence id (live context, else ``pipeline.history``) to its persisted author → refuse
the bot itself and maintainers → ask ``pipeline.member`` for the author's observed messages → refuse an
established member → one ``moderate`` request carrying the author's messages not deleted yet. Every call
is counted by outcome, refusals included.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from larkbot.canonical.actions import ModerateAction, ModeratedMessage
from larkbot.canonical.context import MemberRequest
from larkbot.canonical.names import Platform
from larkbot.driver.memory.memory_tools import Resolver
from larkbot.driver.wake.clients import BusClients
from larkbot.driver.wake.core.turn import ToolRun
from larkbot.runtime.bus import BusUnavailable

from .. import metrics
from .core import moderation


@dataclass(frozen=True, slots=True)
class ModerationAccess:
    """What ``ban_spammer`` needs beyond the executor: the configured maintainers."""

    maintainers: frozenset[str]


class Moderation:
    def __init__(
        self,
        access: ModerationAccess,
        clients: BusClients,
        platform: Platform,
        chat_id: str,
        resolve: Resolver,
        action_attempts: int,
    ) -> None:
        self.access = access
        self.clients = clients
        self.platform = platform
        self.chat_id = chat_id
        self.resolve = resolve
        self.action_attempts = action_attempts

    async def ban_spammer(self, call: ToolRun, args: dict[str, Any]) -> tuple[bool, str]:
        try:
            found, text = await self._ban(call, args)
        except BusUnavailable:
            metrics.MODERATION_ACTIONS.labels("failed").inc()
            raise
        metrics.MODERATION_ACTIONS.labels(found).inc()
        return found in ("banned", "partial"), text

    async def _ban(self, call: ToolRun, args: dict[str, Any]) -> tuple[moderation.Outcome, str]:
        shown: str = args["message_id"]
        resolved, known = await self.resolve([shown])
        canonical = resolved[0][1]
        evidence = known.get(canonical) if canonical is not None else None
        if evidence is None or evidence.sender_id is None:
            return "failed", f"error: no message with id {shown!r}; nothing was done."
        target = moderation.Target(shown, evidence.sender_id)
        identity = await self.clients.identity(self.platform.value)
        refused = moderation.refusal_before_count(
            target,
            own_message=evidence.is_myself,
            bot_id=identity.bot_id if identity is not None else None,
            maintainers=self.access.maintainers,
        )
        if refused is not None:
            return refused, moderation.refusal_text(refused, target)
        member = await self.clients.member(
            MemberRequest(
                platform=self.platform,
                chat_id=self.chat_id,
                user_id=target.user_id,
                max_messages=moderation.ESTABLISHED_MESSAGES,
            )
        )
        if moderation.is_established(member.message_count):
            return "refused_established", moderation.refusal_text(
                "refused_established", target, member.message_count
            )
        action = ModerateAction(
            platform=self.platform,
            chat_id=self.chat_id,
            idempotency_key=call.idempotency_key,
            deadline_ms=call.deadline_ms,
            user_id=target.user_id,
            messages=tuple(
                ModeratedMessage(message_id=m.message_id, timestamp_sec=m.timestamp_sec)
                for m in member.messages
            ),
        )
        result = await self.clients.act(action, self.action_attempts)
        names = {m.message_id: m.alias or m.message_id for m in member.messages}
        if canonical is not None:
            names[canonical] = shown
        return moderation.result_text(self.platform.value, target, result, names)
