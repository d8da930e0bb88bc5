"""Tools registered by feature, the aiogram way: each feature declares its tools in one :class:`Router`
(its ``core/tools.py``) and the driver's :class:`Registry` (``tools.core.tools``) includes one router per
feature, one line each.

A :class:`Tool` is what the pure flow needs of it: its name, description and JSON Schema (draft 2020-12),
its :data:`Kind` (which budget a call counts against, ``end`` for the silence route) and its :data:`Offer`
(in which steps and chats it is offered). Its handler is the I/O half and lives beside the feature's
``core/`` (``<feature>/tools.py``), keyed by the same name; ``wake.executor`` dispatches to it.

The registry's order is the order of the tool list in every request: the routers in the order they are
included, each router's tools in the order it declares them. The tool list is part of the cached prefix,
so the order of the include line is part of the prompt cache.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, assert_never

from jsonschema import Draft202012Validator

from larkbot.canonical.llm import ToolSpec
from larkbot.driver.wake.core.records import StepMode

#: ``participation`` calls count against the participation attempt cap, ``work`` calls against the
#: work-call cap; ``end`` ends the turn (the silence route).
Kind = Literal["participation", "work", "end"]
#: Where a tool is offered: ``every_step`` (``react_only``, ``wrap_up`` and normal steps), ``speaking``
#: (``wrap_up`` and normal steps), ``normal`` (normal steps), and normal steps of the chats whose switch
#: is on: ``memory`` (memory on), ``ban_spammer`` (``ban_spammer_enabled``), ``reminders``
#: (``reminders.enabled``), ``shell`` (the maintainer gate open).
Offer = Literal["every_step", "speaking", "normal", "memory", "ban_spammer", "reminders", "shell"]
#: The schema of an id argument (a message, file or task id as the chat log shows it).
ID: Mapping[str, Any] = {"type": "string", "minLength": 1, "maxLength": 128}


@dataclass(frozen=True, slots=True)
class Switches:
    """The per-chat (``memory``, ``ban_spammer``, ``reminders``) and per-wake-up (``shell``) switches of a
    step."""

    memory: bool = False
    ban_spammer: bool = False
    reminders: bool = False
    shell: bool = False


def offered(offer: Offer, mode: StepMode, switches: Switches) -> bool:
    """Whether a tool offered as ``offer`` is in a step of ``mode`` with these switches."""
    if offer == "every_step":
        return True
    match mode:
        case "react_only":
            return False
        case "wrap_up":
            return offer == "speaking"
        case "normal":
            pass
        case _:
            assert_never(mode)
    match offer:
        case "speaking" | "normal":
            return True
        case "memory":
            return switches.memory
        case "ban_spammer":
            return switches.ban_spammer
        case "reminders":
            return switches.reminders
        case "shell":
            return switches.shell
        case _:
            assert_never(offer)


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    schema: Mapping[str, Any]
    kind: Kind
    offer: Offer
    #: What a dry run answers instead of running it (``ok``, text; ``{id}`` becomes a made-up message
    #: id); ``None``: the tool runs in a dry run too (it only reads).
    dry_run: tuple[bool, str] | None = None
    #: Its step is persisted (pending) before it runs, as a participation tool's always is: its effect
    #: is kept under the call's idempotency key, so a process dying before the step is stored must leave
    #: the step for recovery (same call, same key) rather than a new model call under a new key.
    write_ahead: bool = False
    spec: ToolSpec = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "spec", ToolSpec.of(self.name, self.description, dict(self.schema)))


class Router:
    """One feature's tools, in the order the feature offers them."""

    def __init__(self, feature: str, *tools: Tool) -> None:
        self.feature = feature
        self.tools = tools

    @property
    def names(self) -> frozenset[str]:
        return frozenset(t.name for t in self.tools)


@dataclass(frozen=True, slots=True)
class Invalid:
    message: str


class Registry:
    """The driver's tools: every included router's, in include order."""

    def __init__(self, *routers: Router) -> None:
        tools = [t for r in routers for t in r.tools]
        self.tools: Mapping[str, Tool] = {t.name: t for t in tools}
        if len(self.tools) != len(tools):
            raise ValueError("two routers declare a tool of the same name")
        self.specs: Mapping[str, ToolSpec] = {name: t.spec for name, t in self.tools.items()}
        self._validators = {name: Draft202012Validator(dict(t.schema)) for name, t in self.tools.items()}

    def of_kind(self, kind: Kind) -> frozenset[str]:
        return frozenset(name for name, t in self.tools.items() if t.kind == kind)

    def written_ahead(self) -> frozenset[str]:
        """The tools whose step is persisted before they run: participation tools and those declaring it."""
        return frozenset(n for n, t in self.tools.items() if t.kind == "participation" or t.write_ahead)

    def exposed(self, mode: StepMode, switches: Switches) -> tuple[ToolSpec, ...]:
        return tuple(t.spec for t in self.tools.values() if offered(t.offer, mode, switches))

    def validate(self, name: str, arguments_json: str) -> dict[str, Any] | Invalid:
        """Parsed arguments, or why they are invalid (the first error by path; it goes back to the model)."""
        try:
            args = json.loads(arguments_json) if arguments_json.strip() else {}
        except ValueError:
            return Invalid("arguments are not valid JSON")
        errors = sorted(self._validators[name].iter_errors(args), key=lambda e: list(e.path))
        if errors:
            first = errors[0]
            where = "/".join(str(p) for p in first.path) or "arguments"
            return Invalid(f"{where}: {first.message}"[:300])
        parsed: dict[str, Any] = args
        return parsed
