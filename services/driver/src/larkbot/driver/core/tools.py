"""The chat tools offered to the primary model: schemas, which are exposed in which step, and argument
validation. Validation is JSON Schema (draft 2020-12) over the model's raw ``arguments_json``; an invalid
call becomes an error result for the model, never an exception in the loop.

``send_message`` and ``react`` are *participation* tools (a separate attempt cap, kept in the wrap-up
step); ``read_image`` and ``read_old_messages`` are *work* tools (counted against the work-call cap);
``end_turn`` is the silence route and is always exposed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from jsonschema import Draft202012Validator

from larkbot.canonical.llm import ToolSpec

from .records import StepMode

SEND: Final = "send_message"
REACT: Final = "react"
END: Final = "end_turn"
READ_IMAGE: Final = "read_image"
READ_OLD: Final = "read_old_messages"
PARTICIPATION_TOOLS: Final = frozenset({SEND, REACT})
WORK_TOOLS: Final = frozenset({READ_IMAGE, READ_OLD})

_ID = {"type": "string", "minLength": 1, "maxLength": 128}

_SPECS: Final[dict[str, tuple[str, dict[str, Any]]]] = {
    SEND: (
        'Send a message to the chat (Markdown). Mention someone with <mention uid="ID">@name</mention>. '
        "Set still_working to keep your turn open after sending.",
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
}
_ORDER: Final = (SEND, REACT, END, READ_IMAGE, READ_OLD)
SPECS: Final[dict[str, ToolSpec]] = {
    name: ToolSpec.of(name, description, schema) for name, (description, schema) in _SPECS.items()
}
_VALIDATORS: Final = {name: Draft202012Validator(schema) for name, (_, schema) in _SPECS.items()}


def exposed(mode: StepMode) -> tuple[ToolSpec, ...]:
    """The tools of one step, in a fixed order (the tool list is part of the cached prefix)."""
    if mode == "react_only":
        names: tuple[str, ...] = (REACT, END)
    elif mode == "wrap_up":
        names = (SEND, REACT, END)
    else:
        names = _ORDER
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
