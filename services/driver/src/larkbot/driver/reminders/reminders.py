"""The reminder tools on a chat's wake-up (:class:`ReminderAccess`) and the delivery of due reminders
(:class:`ReminderDelivery`); the rules are in :mod:`.core.reminders`, the grammar of ``when`` in
:mod:`.core.when`, docs/driver.md "Reminders" is the operator's view.

Delivery, in rounds of ``reminders.poll_interval_s`` on every replica, each for the chats it holds (its
partition leases, ``wake.ownership``): a due reminder is claimed (``pending`` → ``fired``, a
conditional update committed first), its runtime event published to ``EVENTS`` with ``Nats-Msg-Id``
``<platform>:reminder:<id>``, then it is marked ``delivered``. Only one writer's claim succeeds, so two
replicas (a hand-over in progress) never both claim one reminder. A replica dying between claim and
publish, or between publish and the mark, leaves a ``fired`` row: whoever holds the chat next publishes
it again, and the bus's duplicate window and the pipeline's unique ``(platform, chat_id, dedup_key)``
make the copy a duplicate — the chat sees the reminder once. An overdue reminder (the driver was down at
its time) is delivered at the first round after the chat is held again, late rather than lost.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, replace
from typing import Any, Final

from larkbot.canonical.events import RuntimeEvent
from larkbot.driver.wake.clock import Clock
from larkbot.driver.wake.core.protocol import ToolRun
from larkbot.runtime.config import ChatRemindersSettings, RemindersSettings

from .. import metrics
from .core import reminders as core
from .core.reminders import REMINDER_ID, Reminder
from .core.when import Refused, parse_when
from .store import ReminderStore

log = logging.getLogger(__name__)

Publish = Callable[[RuntimeEvent], Awaitable[None]]
#: How often a replica removes ended reminders past retention.
SWEEP_INTERVAL_S: Final = 3600.0


@dataclass(frozen=True, slots=True)
class ReminderAccess:
    """The reminder side of one chat's wake-up (only where the chat turns reminders on)."""

    store: ReminderStore
    limits: ChatRemindersSettings
    clock: Clock
    #: The chat's offset (``utc_offset_min``, else the deployment's): ``when`` is read in it.
    utc_offset_min: int

    async def set(self, platform: str, chat_id: str, call: ToolRun, args: dict[str, Any]) -> tuple[bool, str]:
        existing = await self.store.by_call(call.idempotency_key)
        if existing is not None:
            # The step is redone after a crash: the reminder was set already and is not set twice.
            return True, core.set_text(existing, self.utc_offset_min)
        text: str = args["text"].strip()
        person: str | None = args.get("person") or None
        now = self.clock.now_ms()
        if not text:
            return self._refused("refused: the text is empty")
        if len(text) > self.limits.max_text_chars:
            return self._refused(f"refused: the text is over {self.limits.max_text_chars} characters")
        due = parse_when(args["when"], now, self.utc_offset_min, max_ahead_days=self.limits.max_ahead_days)
        if isinstance(due, Refused):
            return self._refused(f"refused: {due.reason}")
        over = core.over_limit(await self.store.pending(platform, chat_id), person, self.limits)
        if over is not None:
            return self._refused(over)
        reminder = Reminder(
            reminder_id=f"rem_{secrets.token_hex(5)}",
            platform=platform,
            chat_id=chat_id,
            call_key=call.idempotency_key,
            person=person,
            text=text,
            due_at_ms=due.at_ms,
            status="pending",
            created_at_ms=now,
        )
        stored = await self.store.add(reminder)
        if stored.reminder_id == reminder.reminder_id:
            metrics.REMINDERS.labels("set").inc()
            log.info("reminder %s set, due at %d", reminder.reminder_id, reminder.due_at_ms)
        return True, core.set_text(stored, self.utc_offset_min)

    def _refused(self, reason: str) -> tuple[bool, str]:
        metrics.REMINDERS.labels("refused").inc()
        return False, reason

    async def cancel(self, platform: str, chat_id: str, reminder_id: str) -> tuple[bool, str]:
        found = await self.store.get(reminder_id) if REMINDER_ID.match(reminder_id) else None
        if found is None or (found.platform, found.chat_id) != (platform, chat_id):
            return False, f"error: no reminder {reminder_id!r} in this chat"
        if found.status != "pending" or not await self.store.cancel(reminder_id, self.clock.now_ms()):
            now = await self.store.get(reminder_id) or found
            state = "cancelled already" if now.status == "cancelled" else "delivered already"
            return True, f"nothing to cancel: reminder {reminder_id} was {state}"
        metrics.REMINDERS.labels("cancelled").inc()
        log.info("reminder %s cancelled", reminder_id)
        return True, core.cancelled_text(found, self.utc_offset_min)

    async def show(self, platform: str, chat_id: str) -> tuple[bool, str]:
        return True, core.list_text(await self.store.pending(platform, chat_id), self.utc_offset_min)


class ReminderDelivery:
    """One per driver process: delivers the due reminders of the chats it holds (module docstring)."""

    def __init__(
        self,
        store: ReminderStore,
        settings: RemindersSettings,
        clock: Clock,
        *,
        held: Callable[[], Collection[str]],
        publish: Publish,
        utc_offset_min: Callable[[str, str], int],
    ) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock
        #: The keys (``<platform>:<chat_id>``) of the chats this replica holds now.
        self.held = held
        self.publish = publish
        self.utc_offset_min = utc_offset_min
        #: When the next removal of ended reminders is due (``time.monotonic``; at the first round).
        self._next_sweep = 0.0

    async def round(self) -> None:
        """One round (run every ``poll_interval_s`` by ``ServiceContext.every``): deliver what is due;
        remove ended reminders past retention when an hour has passed since the last removal."""
        await self.deliver_once()
        if time.monotonic() >= self._next_sweep:
            self._next_sweep = time.monotonic() + SWEEP_INTERVAL_S
            await self.sweep_once()

    async def deliver_once(self) -> int:
        """Claim and publish every due reminder of a held chat; returns how many this round delivered."""
        held = self.held()
        if not held:
            metrics.REMINDERS_OVERDUE.set(0)
            return 0
        now = self.clock.now_ms()
        mine = [r for r in await self.store.undelivered(now) if f"{r.platform}:{r.chat_id}" in held]
        metrics.REMINDERS_OVERDUE.set(len(mine))
        delivered = 0
        for reminder in mine:
            if reminder.status == "pending":
                if not await self.store.claim(reminder.reminder_id, now):
                    continue  # cancelled, or claimed by another replica: theirs to publish
                reminder = replace(reminder, status="fired", ended_at_ms=now)
            event = core.delivery_event(
                reminder, utc_offset_min=self.utc_offset_min(reminder.platform, reminder.chat_id)
            )
            await self.publish(event)
            if await self.store.delivered(reminder.reminder_id, self.clock.now_ms()):
                delivered += 1
                metrics.REMINDERS.labels("delivered").inc()
                log.info(
                    "reminder %s delivered, %d ms after its time",
                    reminder.reminder_id,
                    max(0, now - reminder.due_at_ms),
                )
        return delivered

    async def sweep_once(self) -> int:
        cutoff_ms = self.clock.now_ms() - round(self.settings.retention_days * 86_400_000)
        removed = await self.store.sweep(cutoff_ms)
        if removed:
            log.info("removed %d ended reminders past retention", removed)
        return removed
