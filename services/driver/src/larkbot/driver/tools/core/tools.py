"""The driver's tool registry: one router per feature, included here in the order of the tool list.

Each feature declares its tools in its own ``core/tools.py`` (name, schema, kind, where it is offered,
what a dry run answers) and handles them in its ``tools.py`` beside it; ``tools.core.router`` says how.
The include order below is the order of the tools in every request (part of the cached prefix): the
wake-up's own tools and ``read_file``, then the per-chat constants (memory, ``ban_spammer``,
reminders), then the shell tools while the maintainer gate is open, so opening the gate appends to the
list.

Validation is JSON Schema (draft 2020-12) over the model's raw ``arguments_json``; an invalid call
becomes an error result for the model, never an exception in the loop.
"""

from __future__ import annotations

from typing import Any, Final

from larkbot.canonical.llm import ToolSpec
from larkbot.driver.files.core import tools as files
from larkbot.driver.memory.core import tools as memory
from larkbot.driver.memory.core.tools import (
    MEMORY_CONTENT_MAX_CHARS,
    MEMORY_PATCH,
    MEMORY_SAVE,
    MEMORY_SEARCH,
)
from larkbot.driver.moderation.core import tools as moderation
from larkbot.driver.moderation.core.tools import BAN_SPAMMER
from larkbot.driver.reminders.core import tools as reminders
from larkbot.driver.reminders.core.tools import CANCEL_REMINDER, LIST_REMINDERS, SET_REMINDER
from larkbot.driver.shell.core import tools as shell
from larkbot.driver.shell.core.tools import BASH, KILL_TASK, READ_TASK_OUTPUT
from larkbot.driver.wake.core import tools as wake
from larkbot.driver.wake.core.records import StepMode
from larkbot.driver.wake.core.tools import END, REACT, READ_IMAGE, READ_OLD, RECALL, SEND

from .router import Invalid, Kind, Registry, Switches, Tool

REGISTRY: Final = Registry(
    wake.router,
    files.router,
    memory.router,
    moderation.router,
    reminders.router,
    shell.router,
)

SPECS: Final = REGISTRY.specs
PARTICIPATION_TOOLS: Final = REGISTRY.of_kind("participation")
WORK_TOOLS: Final = REGISTRY.of_kind("work")
WRITE_AHEAD_TOOLS: Final = REGISTRY.written_ahead()
MEMORY_TOOLS: Final = memory.router.names
SHELL_TOOLS: Final = shell.router.names
REMINDER_TOOLS: Final = reminders.router.names


def exposed(
    mode: StepMode,
    *,
    memory: bool = False,
    ban_spammer: bool = False,
    reminders: bool = False,
    shell: bool = False,
) -> tuple[ToolSpec, ...]:
    """The tools of one step, in the registry's order."""
    switches = Switches(memory=memory, ban_spammer=ban_spammer, reminders=reminders, shell=shell)
    return REGISTRY.exposed(mode, switches)


def validate(name: str, arguments_json: str) -> dict[str, Any] | Invalid:
    return REGISTRY.validate(name, arguments_json)


def kind(name: str) -> Kind:
    return REGISTRY.tools[name].kind


def tool(name: str) -> Tool:
    return REGISTRY.tools[name]


__all__ = [
    "BAN_SPAMMER",
    "BASH",
    "CANCEL_REMINDER",
    "END",
    "KILL_TASK",
    "LIST_REMINDERS",
    "MEMORY_CONTENT_MAX_CHARS",
    "MEMORY_PATCH",
    "MEMORY_SAVE",
    "MEMORY_SEARCH",
    "MEMORY_TOOLS",
    "PARTICIPATION_TOOLS",
    "REACT",
    "READ_IMAGE",
    "READ_OLD",
    "READ_TASK_OUTPUT",
    "RECALL",
    "REGISTRY",
    "REMINDER_TOOLS",
    "SEND",
    "SET_REMINDER",
    "SHELL_TOOLS",
    "SPECS",
    "WORK_TOOLS",
    "WRITE_AHEAD_TOOLS",
    "Invalid",
    "exposed",
    "kind",
    "tool",
    "validate",
]
