"""The tool registry: one router per feature, a handler for every tool, the tool list's order."""

from __future__ import annotations

import pytest

from larkbot.driver.tools.core import tools
from larkbot.driver.tools.core.router import Router, Tool
from larkbot.driver.tools.handlers import Handlers
from larkbot.driver.wake.executor import HANDLERS


def test_every_tool_but_end_has_one_handler() -> None:
    assert set(HANDLERS) == set(tools.SPECS) - {tools.END}


def test_the_tool_list_follows_the_include_order() -> None:
    names = [
        t.name for t in tools.exposed("normal", memory=True, ban_spammer=True, reminders=True, shell=True)
    ]
    assert names == [
        "send_message",
        "react",
        "end_turn",
        "read_image",
        "read_old_messages",
        "recall_message",
        "read_file",
        "memory_save",
        "memory_search",
        "memory_patch",
        "ban_spammer",
        "set_reminder",
        "cancel_reminder",
        "list_reminders",
        "bash",
        "kill_task",
        "read_task_output",
    ]
    assert [t.name for t in tools.exposed("wrap_up", memory=True, reminders=True, shell=True)] == [
        "send_message",
        "react",
        "end_turn",
    ]
    assert [t.name for t in tools.exposed("react_only", ban_spammer=True)] == ["react", "end_turn"]


def test_a_feature_must_handle_each_of_its_tools() -> None:
    router = Router("x", Tool("x_tool", "A tool.", {"type": "object"}, kind="work", offer="normal"))
    with pytest.raises(ValueError, match="do not match"):
        Handlers(router, {})
