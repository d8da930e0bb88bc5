"""The chat tools offered to the primary model: schemas, which are exposed in which step, and argument
validation. Validation is JSON Schema (draft 2020-12) over the model's raw ``arguments_json``; an invalid
call becomes an error result for the model, never an exception in the loop.

``send_message`` and ``react`` are *participation* tools (a separate attempt cap, kept in the wrap-up
step); ``read_image`` and ``read_old_messages`` are *work* tools (counted against the work-call cap);
``end_turn`` is the silence route and is always exposed. The memory tools (``memory_save``,
``memory_search``, ``memory_patch``; docs/memory.md) are work tools too, exposed in normal steps of the
chats that have memory on — a per-chat constant, so the tool list stays part of the cached prefix.
The shell tools (``bash``, ``kill_task``, ``read_task_output``; docs/driver.md "Shell tools") are work
tools behind the maintainer gate (``core.gate``): offered in normal steps while it is open, decided once
per wake-up and kept for the whole chain. ``recall_message`` (the bot's own messages only) is a work tool
of every normal step.
``ban_spammer`` (``core.moderation``) is a work tool offered in normal steps only where the chat enables
it (``ban_spammer_enabled``), likewise a per-chat constant.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from jsonschema import Draft202012Validator

from larkbot.canonical.llm import ToolSpec
from larkbot.driver.wake.core.records import StepMode

SEND: Final = "send_message"
REACT: Final = "react"
END: Final = "end_turn"
READ_IMAGE: Final = "read_image"
READ_OLD: Final = "read_old_messages"
MEMORY_SAVE: Final = "memory_save"
MEMORY_SEARCH: Final = "memory_search"
MEMORY_PATCH: Final = "memory_patch"
RECALL: Final = "recall_message"
BASH: Final = "bash"
KILL_TASK: Final = "kill_task"
READ_TASK_OUTPUT: Final = "read_task_output"
PARTICIPATION_TOOLS: Final = frozenset({SEND, REACT})
MEMORY_TOOLS: Final = frozenset({MEMORY_SAVE, MEMORY_SEARCH, MEMORY_PATCH})
BAN_SPAMMER: Final = "ban_spammer"
SHELL_TOOLS: Final = frozenset({BASH, KILL_TASK, READ_TASK_OUTPUT})
WORK_TOOLS: Final = frozenset({READ_IMAGE, READ_OLD, RECALL, BAN_SPAMMER}) | MEMORY_TOOLS | SHELL_TOOLS
#: The longest memory content accepted (a memory is a fact, not a transcript).
MEMORY_CONTENT_MAX_CHARS: Final = 500
#: The maintainer-gated shell tools (``core.gate``), offered in this order in normal steps when the gate
#: is open.
_SHELL_ORDER: Final = (BASH, KILL_TASK, READ_TASK_OUTPUT)

_ID = {"type": "string", "minLength": 1, "maxLength": 128}

_SPECS: Final[dict[str, tuple[str, dict[str, Any]]]] = {
    SEND: (
        'Send a message to the chat (Markdown). Mention someone with <mention uid="ID">@name</mention>. '
        "Set still_working to keep your turn open after sending. Answers with the sent message's id.",
        {
            "type": "object",
            "properties": {
                "text": {"type": "string", "minLength": 1, "maxLength": 8000},
                "reply_to": {**_ID, "description": "id of the message to reply to"},
                "still_working": {"type": "boolean"},
            },
            "required": ["text"],
            "additionalProperties": False,
        },
    ),
    REACT: (
        "Add (or remove) an emoji reaction on a message.",
        {
            "type": "object",
            "properties": {
                "message_id": _ID,
                "emoji": {"type": "string", "minLength": 1, "maxLength": 64},
                "remove": {"type": "boolean"},
            },
            "required": ["message_id", "emoji"],
            "additionalProperties": False,
        },
    ),
    END: (
        "End your turn. Calling it without sending anything is how you stay silent.",
        {"type": "object", "properties": {}, "additionalProperties": False},
    ),
    READ_IMAGE: (
        "Look at an image attachment by its file-id.",
        {
            "type": "object",
            "properties": {"file_id": _ID, "detail": {"enum": ["low", "high"]}},
            "required": ["file_id", "detail"],
            "additionalProperties": False,
        },
    ),
    READ_OLD: (
        "Read messages that are no longer in your context, by id.",
        {
            "type": "object",
            "properties": {"message_ids": {"type": "array", "items": _ID, "minItems": 1, "maxItems": 20}},
            "required": ["message_ids"],
            "additionalProperties": False,
        },
    ),
    RECALL: (
        "Recall (delete for everyone) one of your own messages by its id, such as the id send_message "
        "answered with. Other people's messages cannot be recalled.",
        {
            "type": "object",
            "properties": {"message_id": _ID},
            "required": ["message_id"],
            "additionalProperties": False,
        },
    ),
    MEMORY_SAVE: (
        "Remember a durable fact about a person (preferences, plans, background, how they want to be "
        "treated), drawn only from their own messages. person: their uid; evidence_message_ids: ids of "
        "messages they wrote in this chat that state it (not ones they quoted or forwarded). scope: "
        "group (used in this chat) or private (only in a direct chat with them). importance: high "
        "(always shown to you while they are in the conversation; keep these few) or normal (found by "
        "memory_search).",
        {
            "type": "object",
            "properties": {
                "person": _ID,
                "content": {"type": "string", "minLength": 1, "maxLength": MEMORY_CONTENT_MAX_CHARS},
                "evidence_message_ids": {
                    "type": "array",
                    "items": _ID,
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
    ),
    MEMORY_SEARCH: (
        "Search what you remember about people here (full text, any language). Optionally only one "
        "person's memories (their uid).",
        {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": 200},
                "person": _ID,
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    ),
    MEMORY_PATCH: (
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
    ),
    BASH: (
        "Run a shell command (bash) on the bot's host, in its working directory. It waits up to "
        "timeout_seconds (less when the configuration or your turn allows less) and returns the exit "
        "status and the output (long output is cut in the middle). A command still running then is not "
        "stopped: it continues as a background task, and its completion arrives later as a runtime event. "
        "intention: what the command is for, in a few words.",
        {
            "type": "object",
            "properties": {
                "command": {"type": "string", "minLength": 1, "maxLength": 10000},
                "timeout_seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": 3600},
                "intention": {"type": "string", "maxLength": 200},
            },
            "required": ["command", "timeout_seconds"],
            "additionalProperties": False,
        },
    ),
    KILL_TASK: (
        "Stop a background task started by bash (SIGTERM to its processes, then SIGKILL).",
        {
            "type": "object",
            "properties": {"task_id": _ID},
            "required": ["task_id"],
            "additionalProperties": False,
        },
    ),
    READ_TASK_OUTPUT: (
        "Read a background task's output, from a byte offset (negative: counted from the end), at most "
        "limit bytes.",
        {
            "type": "object",
            "properties": {
                "task_id": _ID,
                "offset": {"type": "integer"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100000},
            },
            "required": ["task_id"],
            "additionalProperties": False,
        },
    ),
    BAN_SPAMMER: (
        "Ban a spam account from this chat and delete its messages you know of. message_id: a message "
        "of the account showing the spam (the account is its author, never someone it names); reason: "
        "why, for the record (never shown to the chat). Refused for you, for maintainers and for "
        "established members. The result says what actually happened and gives the exact announcement "
        "to send.",
        {
            "type": "object",
            "properties": {"message_id": _ID, "reason": {"type": "string", "minLength": 1, "maxLength": 500}},
            "required": ["message_id", "reason"],
            "additionalProperties": False,
        },
    ),
}
_ORDER: Final = (SEND, REACT, END, READ_IMAGE, READ_OLD, RECALL)
_MEMORY_ORDER: Final = (MEMORY_SAVE, MEMORY_SEARCH, MEMORY_PATCH)
SPECS: Final[dict[str, ToolSpec]] = {
    name: ToolSpec.of(name, description, schema) for name, (description, schema) in _SPECS.items()
}
_VALIDATORS: Final = {name: Draft202012Validator(schema) for name, (_, schema) in _SPECS.items()}


def exposed(
    mode: StepMode, *, memory: bool = False, ban_spammer: bool = False, shell: bool = False
) -> tuple[ToolSpec, ...]:
    """The tools of one step, in a fixed order (the tool list is part of the cached prefix): the per-chat
    constants first (memory, ``ban_spammer``), then the shell tools while the maintainer gate is open
    (``shell``), so opening the gate appends to the list. Extras join normal steps only."""
    if mode == "react_only":
        names: tuple[str, ...] = (REACT, END)
    elif mode == "wrap_up":
        names = (SEND, REACT, END)
    else:
        names = (*_ORDER, *_MEMORY_ORDER) if memory else _ORDER
        if ban_spammer:
            names = (*names, BAN_SPAMMER)
        if shell:
            names = (*names, *_SHELL_ORDER)
    return tuple(SPECS[n] for n in names)


@dataclass(frozen=True, slots=True)
class Invalid:
    message: str


def validate(name: str, arguments_json: str) -> dict[str, Any] | Invalid:
    """Parsed arguments, or why they are invalid (the first error by path; it goes back to the model)."""
    try:
        args = json.loads(arguments_json) if arguments_json.strip() else {}
    except ValueError:
        return Invalid("arguments are not valid JSON")
    errors = sorted(_VALIDATORS[name].iter_errors(args), key=lambda e: list(e.path))
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.path) or "arguments"
        return Invalid(f"{where}: {first.message}"[:300])
    parsed: dict[str, Any] = args
    return parsed
