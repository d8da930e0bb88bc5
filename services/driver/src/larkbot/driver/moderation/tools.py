"""The handler of ``ban_spammer`` (``moderation.core.tools``): it runs on the wake-up's
:class:`~.moderation.Moderation`, or answers that it is off in the chat."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from larkbot.driver.tools.handlers import Handlers, Result, text
from larkbot.driver.wake.core.protocol import ToolRun

from .core import tools as core
from .core.tools import BAN_SPAMMER

if TYPE_CHECKING:
    from larkbot.driver.wake.executor import ToolExecutor


async def ban_spammer(ex: ToolExecutor, call: ToolRun, args: dict[str, Any]) -> Result:
    if ex.moderation is None:
        return False, text("error: ban_spammer is off in this chat"), False
    ok, answer = await ex.moderation.ban_spammer(call, args)
    return ok, text(answer), False


handlers = Handlers(core.router, {BAN_SPAMMER: ban_spammer})
