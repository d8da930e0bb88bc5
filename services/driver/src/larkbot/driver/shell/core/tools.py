"""The shell tools (``bash``, ``kill_task``, ``read_task_output``; docs/driver.md "Shell tools"): work
tools behind the maintainer gate (``shell.core.gate``), offered in normal steps while it is open, decided
once per wake-up and kept for the whole chain; last in the tool list, so opening the gate appends to it.
Their handlers are in ``shell.tools``."""

from __future__ import annotations

from typing import Final

from larkbot.driver.tools.core.router import ID, Router, Tool

BASH: Final = "bash"
KILL_TASK: Final = "kill_task"
READ_TASK_OUTPUT: Final = "read_task_output"

router = Router(
    "shell",
    Tool(
        BASH,
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
        kind="work",
        offer="shell",
        dry_run=(False, "dry run: the command was not run"),
    ),
    Tool(
        KILL_TASK,
        "Stop a background task started by bash (SIGTERM to its processes, then SIGKILL).",
        {
            "type": "object",
            "properties": {"task_id": ID},
            "required": ["task_id"],
            "additionalProperties": False,
        },
        kind="work",
        offer="shell",
        dry_run=(False, "dry run: no task runs"),
    ),
    Tool(
        READ_TASK_OUTPUT,
        "Read a background task's output, from a byte offset (negative: counted from the end), at most "
        "limit bytes.",
        {
            "type": "object",
            "properties": {
                "task_id": ID,
                "offset": {"type": "integer"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100000},
            },
            "required": ["task_id"],
            "additionalProperties": False,
        },
        kind="work",
        offer="shell",
        dry_run=(False, "dry run: no task runs"),
    ),
)
