"""``ban_spammer`` (``moderation.core.moderation``): a work tool offered in normal steps only where the
chat enables it (``ban_spammer_enabled``), a per-chat constant. Its handler is in ``moderation.tools``."""

from __future__ import annotations

from typing import Final

from larkbot.driver.tools.core.router import ID, Router, Tool

BAN_SPAMMER: Final = "ban_spammer"

router = Router(
    "moderation",
    Tool(
        BAN_SPAMMER,
        "Ban a spam account from this chat and delete its messages you know of. message_id: a message "
        "of the account showing the spam (the account is its author, never someone it names); reason: "
        "why, for the record (never shown to the chat). Refused for you, for maintainers and for "
        "established members. The result says what actually happened and gives the exact announcement "
        "to send.",
        {
            "type": "object",
            "properties": {"message_id": ID, "reason": {"type": "string", "minLength": 1, "maxLength": 500}},
            "required": ["message_id", "reason"],
            "additionalProperties": False,
        },
        kind="work",
        offer="ban_spammer",
        dry_run=(False, "dry run: nobody was banned and nothing was deleted"),
    ),
)
