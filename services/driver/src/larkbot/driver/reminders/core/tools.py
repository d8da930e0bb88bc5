"""The reminder tools (``set_reminder``, ``cancel_reminder``, ``list_reminders``; docs/driver.md
"Reminders"): work tools offered in normal steps of the chats that turn reminders on
(``chats.<key>.reminders.enabled``) — a per-chat constant, so the tool list stays part of the cached
prefix. Their handlers are in ``reminders.tools``."""

from __future__ import annotations

from typing import Final

from larkbot.driver.tools.core.router import ID, Router, Tool

SET_REMINDER: Final = "set_reminder"
CANCEL_REMINDER: Final = "cancel_reminder"
LIST_REMINDERS: Final = "list_reminders"
#: The schema's bound; the chat's ``reminders.max_text_chars`` may be lower.
TEXT_MAX_CHARS: Final = 2000

router = Router(
    "reminders",
    Tool(
        SET_REMINDER,
        "Set a reminder for this chat. When it is due it comes back to you as a runtime event, and you "
        "remind the chat in your own words. when: in the chat's local time, one of 'YYYY-MM-DD HH:MM', "
        "'tomorrow HH:MM', 'friday 9am', 'HH:MM' (the next such time) or 'in 2 hours' / 'in 30 minutes'; "
        "write what people said in these forms, and ask them when it is unclear. A time that cannot be "
        "read one way is refused with the reason. text: what to remind of. person: the uid of the "
        "person it is for, if it is for someone.",
        {
            "type": "object",
            "properties": {
                "when": {"type": "string", "minLength": 1, "maxLength": 100},
                "text": {"type": "string", "minLength": 1, "maxLength": TEXT_MAX_CHARS},
                "person": ID,
            },
            "required": ["when", "text"],
            "additionalProperties": False,
        },
        kind="work",
        offer="reminders",
        dry_run=(False, "dry run: no reminder was set"),
        # A reminder is kept under its call's key: a step lost before it was stored would otherwise be
        # asked again of the model and set the reminder a second time.
        write_ahead=True,
    ),
    Tool(
        CANCEL_REMINDER,
        "Cancel a pending reminder of this chat by its id (list_reminders shows them).",
        {
            "type": "object",
            "properties": {"id": ID},
            "required": ["id"],
            "additionalProperties": False,
        },
        kind="work",
        offer="reminders",
        dry_run=(False, "dry run: no reminder was cancelled"),
    ),
    Tool(
        LIST_REMINDERS,
        "List this chat's pending reminders, soonest first: id, when (local time), for whom, text.",
        {"type": "object", "properties": {}, "additionalProperties": False},
        kind="work",
        offer="reminders",
    ),
)
