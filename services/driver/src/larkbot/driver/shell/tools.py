"""The handler of the shell tools (``shell.core.tools``): each runs on the wake-up's
:class:`~.shell.ShellAccess`, which tells them apart, or answers that the shell is not available."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from larkbot.driver.tools.handlers import Handlers, Result, text
from larkbot.driver.wake.core.protocol import ToolRun

from .core import tools as core
from .core.tools import BASH, KILL_TASK, READ_TASK_OUTPUT

if TYPE_CHECKING:
    from larkbot.driver.wake.executor import ToolExecutor


async def shell(ex: ToolExecutor, call: ToolRun, args: dict[str, Any]) -> Result:
    if ex.shell is None:
        return False, text("error: the shell tools are not available here"), False
    ok, answer = await ex.shell.call(call, ex.platform.value, ex.chat_id)
    return ok, text(answer), False


handlers = Handlers(core.router, {BASH: shell, KILL_TASK: shell, READ_TASK_OUTPUT: shell})
