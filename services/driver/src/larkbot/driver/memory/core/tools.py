"""The memory tools (``memory_save``, ``memory_search``, ``memory_patch``; docs/memory.md): work tools
offered in normal steps of the chats that have memory on — a per-chat constant, so the tool list stays
part of the cached prefix. Their handlers are in ``memory.tools``."""

from __future__ import annotations

from typing import Final

from larkbot.driver.tools.core.router import ID, Router, Tool

MEMORY_SAVE: Final = "memory_save"
MEMORY_SEARCH: Final = "memory_search"
MEMORY_PATCH: Final = "memory_patch"
#: The longest memory content accepted (a memory is a fact, not a transcript).
MEMORY_CONTENT_MAX_CHARS: Final = 500

router = Router(
    "memory",
    Tool(
        MEMORY_SAVE,
        "Remember a durable fact about a person (preferences, plans, background, how they want to be "
        "treated), drawn only from their own messages. person: their uid; evidence_message_ids: ids of "
        "messages they wrote in this chat that state it (not ones they quoted or forwarded). scope: "
        "group (used in this chat) or private (only in a direct chat with them). importance: high "
        "(always shown to you while they are in the conversation; keep these few) or normal (found by "
        "memory_search).",
        {
            "type": "object",
            "properties": {
                "person": ID,
                "content": {"type": "string", "minLength": 1, "maxLength": MEMORY_CONTENT_MAX_CHARS},
                "evidence_message_ids": {
                    "type": "array",
                    "items": ID,
                    "minItems": 1,
                    "maxItems": 10,
                    "uniqueItems": True,
                },
                "importance": {"enum": ["high", "normal"]},
                "scope": {"enum": ["group", "private", "global"]},
                "supersedes": {"type": "array", "items": {"type": "integer", "minimum": 1}, "maxItems": 10},
            },
            "required": ["person", "content", "evidence_message_ids", "importance", "scope"],
            "additionalProperties": False,
        },
        kind="work",
        offer="memory",
    ),
    Tool(
        MEMORY_SEARCH,
        "Search what you remember about people here (full text, any language). Optionally only one "
        "person's memories (their uid).",
        {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": 200},
                "person": ID,
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        kind="work",
        offer="memory",
    ),
    Tool(
        MEMORY_PATCH,
        "Change a memory by its id: disable it (wrong or outdated), change its importance or scope, or "
        "mark which memories it supersedes or is related to. Its content never changes: save a new memory "
        "that supersedes it instead.",
        {
            "type": "object",
            "properties": {
                "id": {"type": "integer", "minimum": 1},
                "enabled": {"type": "boolean"},
                "importance": {"enum": ["high", "normal"]},
                "scope": {"enum": ["group", "private", "global"]},
                "supersedes": {"type": "array", "items": {"type": "integer", "minimum": 1}, "maxItems": 10},
                "related_to": {"type": "array", "items": {"type": "integer", "minimum": 1}, "maxItems": 10},
                "reason": {"type": "string", "maxLength": 200},
            },
            "required": ["id"],
            "minProperties": 2,
            "additionalProperties": False,
        },
        kind="work",
        offer="memory",
    ),
)
