"""The wake-up's own tools: speaking (``send_message``, ``react``), the silence route (``end_turn``) and
the work tools every normal step offers (``read_image``, ``read_old_messages``, ``recall_message`` — the
bot's own messages only). Their handlers are in ``wake.executor``.

``send_message`` and ``react`` are *participation* tools (a separate attempt cap, kept in the wrap-up
step); ``end_turn`` is always offered.
"""

from __future__ import annotations

from typing import Final

from larkbot.driver.tools.core.router import ID, Router, Tool

SEND: Final = "send_message"
REACT: Final = "react"
END: Final = "end_turn"
READ_IMAGE: Final = "read_image"
READ_OLD: Final = "read_old_messages"
RECALL: Final = "recall_message"

router = Router(
    "wake",
    Tool(
        SEND,
        'Send a message to the chat (Markdown). Mention someone with <mention uid="ID">@name</mention>. '
        "Set still_working to keep your turn open after sending. Answers with the sent message's id.",
        {
            "type": "object",
            "properties": {
                "text": {"type": "string", "minLength": 1, "maxLength": 8000},
                "reply_to": {**ID, "description": "id of the message to reply to"},
                "still_working": {"type": "boolean"},
            },
            "required": ["text"],
            "additionalProperties": False,
        },
        kind="participation",
        offer="speaking",
        dry_run=(True, "sent (id {id}); dry run: nothing was posted to the chat"),
    ),
    Tool(
        REACT,
        "Add (or remove) an emoji reaction on a message.",
        {
            "type": "object",
            "properties": {
                "message_id": ID,
                "emoji": {"type": "string", "minLength": 1, "maxLength": 64},
                "remove": {"type": "boolean"},
            },
            "required": ["message_id", "emoji"],
            "additionalProperties": False,
        },
        kind="participation",
        offer="every_step",
        dry_run=(True, "reacted; dry run: nothing was done in the chat"),
    ),
    Tool(
        END,
        "End your turn. Calling it without sending anything is how you stay silent.",
        {"type": "object", "properties": {}, "additionalProperties": False},
        kind="end",
        offer="every_step",
    ),
    Tool(
        READ_IMAGE,
        "Look at an image attachment by its file-id.",
        {
            "type": "object",
            "properties": {"file_id": ID, "detail": {"enum": ["low", "high"]}},
            "required": ["file_id", "detail"],
            "additionalProperties": False,
        },
        kind="work",
        offer="normal",
    ),
    Tool(
        READ_OLD,
        "Read messages that are no longer in your context, by id.",
        {
            "type": "object",
            "properties": {"message_ids": {"type": "array", "items": ID, "minItems": 1, "maxItems": 20}},
            "required": ["message_ids"],
            "additionalProperties": False,
        },
        kind="work",
        offer="normal",
    ),
    Tool(
        RECALL,
        "Recall (delete for everyone) one of your own messages by its id, such as the id send_message "
        "answered with. Other people's messages cannot be recalled.",
        {
            "type": "object",
            "properties": {"message_id": ID},
            "required": ["message_id"],
            "additionalProperties": False,
        },
        kind="work",
        offer="normal",
        dry_run=(True, "recalled; dry run: nothing was deleted in the chat"),
    ),
)
