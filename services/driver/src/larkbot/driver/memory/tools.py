"""The handlers of the memory tools (``memory.core.tools``): each runs on the chat's
:class:`~.memory_tools.MemoryTools`, or answers that memory is off."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from larkbot.driver.tools.handlers import Handlers, Result, text
from larkbot.driver.wake.core.protocol import ToolRun

from .core import tools as core
from .core.tools import MEMORY_PATCH, MEMORY_SAVE, MEMORY_SEARCH

if TYPE_CHECKING:
    from larkbot.driver.wake.executor import ToolExecutor

_OFF: Result = (False, text("error: memory is off in this chat"), False)


async def save(ex: ToolExecutor, call: ToolRun, args: dict[str, Any]) -> Result:
    if ex.memory is None:
        return _OFF
    ok, answer = await ex.memory.save(args, call.idempotency_key)
    return ok, text(answer), False


async def search(ex: ToolExecutor, call: ToolRun, args: dict[str, Any]) -> Result:
    if ex.memory is None:
        return _OFF
    ok, answer = await ex.memory.search(args)
    return ok, text(answer), False


async def patch(ex: ToolExecutor, call: ToolRun, args: dict[str, Any]) -> Result:
    if ex.memory is None:
        return _OFF
    ok, answer = await ex.memory.patch(args, call.idempotency_key)
    return ok, text(answer), False


handlers = Handlers(core.router, {MEMORY_SAVE: save, MEMORY_SEARCH: search, MEMORY_PATCH: patch})
