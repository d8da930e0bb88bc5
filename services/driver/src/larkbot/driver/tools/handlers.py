"""The I/O half of a feature's router: the async handler of each of its tools, keyed by name.

A feature declares its tools in ``<feature>/core/tools.py`` (a :class:`~.core.router.Router`, pure) and
handles them in ``<feature>/tools.py`` (:class:`Handlers` over that router). A handler gets the
wake-up's :class:`~larkbot.driver.wake.executor.ToolExecutor` (id resolution, the chat, the per-chat
accesses), the call and its validated arguments, and answers ``(ok, result parts, final)``: ``final``
closes the call (no follow-up step for it). ``wake.executor`` includes every feature's handlers, one
line each, and dispatches by name.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from larkbot.canonical.llm import TextPart, UserPart
from larkbot.driver.wake.core.protocol import ToolRun

from .core.router import Router

if TYPE_CHECKING:
    from larkbot.driver.wake.executor import ToolExecutor

Result = tuple[bool, tuple[UserPart, ...], bool]
Handler = Callable[["ToolExecutor", ToolRun, dict[str, Any]], Awaitable[Result]]


def text(value: str) -> tuple[UserPart, ...]:
    """A result of one text part."""
    return (TextPart(text=value),)


class Handlers:
    """One feature's handlers: one for each tool of its router but ``end`` (which the turn handles)."""

    def __init__(self, router: Router, handlers: Mapping[str, Handler]) -> None:
        wanted = frozenset(t.name for t in router.tools if t.kind != "end")
        if frozenset(handlers) != wanted:
            raise ValueError(f"the {router.feature} handlers do not match its tools: {sorted(wanted)}")
        self.router = router
        self.handlers = handlers


def dispatch(*features: Handlers) -> Mapping[str, Handler]:
    """Every included feature's handlers by tool name."""
    return {name: handler for f in features for name, handler in f.handlers.items()}
