"""The reminders' rules, without I/O: what a reminder is, the chat's and each person's limits, what the
tools answer, the lines of the late-binding block and the runtime event that delivers a reminder
(docs/driver.md "Reminders").

A reminder moves ``pending`` → ``fired`` → ``delivered``, or ``pending`` → ``cancelled``; each move is a
conditional update of its row, so one writer wins it. ``fired`` is the claim: the replica whose update
wrote it publishes the reminder's event; ``delivered`` records that the event is on the bus. The event's
``dedup_key`` is ``reminder:<id>`` and everything it says comes from the row, so publishing it again
(after a crash between claim and publish, or by the chat's next owner) is a duplicate, never a second
event.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from larkbot.canonical.events import RuntimeEvent
from larkbot.canonical.names import Platform
from larkbot.runtime.config import ChatRemindersSettings

from .when import local_time

__all__ = [
    "REMINDER",
    "REMINDER_ID",
    "Reminder",
    "ReminderStatus",
    "cancelled_text",
    "delivery_event",
    "late_binding_lines",
    "list_text",
    "over_limit",
    "set_text",
]

ReminderStatus = Literal["pending", "fired", "delivered", "cancelled"]
#: The runtime event's ``type``.
REMINDER: Final = "reminder"
REMINDER_ID: Final = re.compile(r"^rem_[0-9a-f]{10}$")


@dataclass(frozen=True, slots=True)
class Reminder:
    reminder_id: str
    platform: str
    chat_id: str
    #: The tool call's idempotency key (unique: a step redone sets no second reminder).
    call_key: str
    #: The uid of the person it is for; ``None``: the chat.
    person: str | None
    text: str
    due_at_ms: int
    status: ReminderStatus
    created_at_ms: int
    #: When it was claimed for delivery (``fired``) or cancelled; ``None`` while pending.
    ended_at_ms: int | None = None
    #: When its event was published (``delivered``).
    delivered_at_ms: int | None = None


def over_limit(pending: Sequence[Reminder], person: str | None, limits: ChatRemindersSettings) -> str | None:
    """Why one more reminder (for ``person``) is refused, or ``None``; ``pending`` is the chat's."""
    if len(pending) >= limits.max_pending:
        return (
            f"refused: this chat has {len(pending)} pending reminders, the most it keeps; cancel one "
            "with cancel_reminder first"
        )
    if person is not None:
        theirs = sum(1 for r in pending if r.person == person)
        if theirs >= limits.max_pending_per_person:
            return (
                f"refused: {person} has {theirs} pending reminders, the most one person may have; cancel "
                "one of theirs with cancel_reminder first"
            )
    return None


def _line(reminder: Reminder, utc_offset_min: int) -> str:
    whom = f" for {reminder.person}" if reminder.person else ""
    text = " ".join(reminder.text.split())
    return f"- {reminder.reminder_id} at {local_time(reminder.due_at_ms, utc_offset_min)}{whom}: {text}"


def set_text(reminder: Reminder, utc_offset_min: int) -> str:
    whom = f" for {reminder.person}" if reminder.person else ""
    when = local_time(reminder.due_at_ms, utc_offset_min)
    return (
        f"reminder {reminder.reminder_id} set for {when}{whom}; it arrives then as a runtime event, and "
        "cancel_reminder removes it"
    )


def cancelled_text(reminder: Reminder, utc_offset_min: int) -> str:
    return f"reminder {reminder.reminder_id} (due {local_time(reminder.due_at_ms, utc_offset_min)}) cancelled"


def list_text(pending: Sequence[Reminder], utc_offset_min: int) -> str:
    if not pending:
        return "no pending reminders in this chat"
    return "pending reminders, soonest first:\n" + "\n".join(_line(r, utc_offset_min) for r in pending)


def late_binding_lines(pending: Sequence[Reminder], utc_offset_min: int) -> tuple[str, ...]:
    """The chat's pending reminders for the late-binding block (nothing when there are none)."""
    if not pending:
        return ()
    head = "Pending reminders in this chat (each arrives as a runtime event when due):"
    return (head, *(_line(r, utc_offset_min) for r in pending))


def delivery_event(reminder: Reminder, *, utc_offset_min: int) -> RuntimeEvent:
    """The runtime event delivering a claimed reminder; its time is the claim's."""
    assert reminder.ended_at_ms is not None
    attributes: list[tuple[str, str]] = [
        ("reminder_id", reminder.reminder_id),
        ("due", local_time(reminder.due_at_ms, utc_offset_min)),
    ]
    if reminder.person:
        attributes.append(("for", reminder.person))
    attributes.append(("set", local_time(reminder.created_at_ms, utc_offset_min)))
    return RuntimeEvent(
        platform=Platform(reminder.platform),
        chat_id=reminder.chat_id,
        dedup_key=f"reminder:{reminder.reminder_id}",
        received_at_ms=reminder.ended_at_ms,
        timestamp_sec=reminder.ended_at_ms // 1000,
        utc_offset_min=utc_offset_min,
        type=REMINDER,
        attributes=tuple(attributes),
        text=reminder.text,
    )
