"""The handlers of the reminder tools (``reminders.core.tools``): each runs on the wake-up's
:class:`~.reminders.ReminderAccess`, or answers that reminders are off in the chat."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from larkbot.driver.tools.handlers import Handlers, Result, text
from larkbot.driver.wake.core.protocol import ToolRun

from .core import tools as core
from .core.tools import CANCEL_REMINDER, LIST_REMINDERS, SET_REMINDER

if TYPE_CHECKING:
    from larkbot.driver.wake.executor import ToolExecutor

_OFF = "error: reminders are off in this chat"


async def set_reminder(ex: ToolExecutor, call: ToolRun, args: dict[str, Any]) -> Result:
    if ex.reminders is None:
        return False, text(_OFF), False
    ok, answer = await ex.reminders.set(ex.platform.value, ex.chat_id, call, args)
    return ok, text(answer), False


async def cancel_reminder(ex: ToolExecutor, call: ToolRun, args: dict[str, Any]) -> Result:
    if ex.reminders is None:
        return False, text(_OFF), False
    ok, answer = await ex.reminders.cancel(ex.platform.value, ex.chat_id, args["id"])
    return ok, text(answer), False


async def list_reminders(ex: ToolExecutor, call: ToolRun, args: dict[str, Any]) -> Result:
    if ex.reminders is None:
        return False, text(_OFF), False
    ok, answer = await ex.reminders.show(ex.platform.value, ex.chat_id)
    return ok, text(answer), False


handlers = Handlers(
    core.router,
    {SET_REMINDER: set_reminder, CANCEL_REMINDER: cancel_reminder, LIST_REMINDERS: list_reminders},
)
