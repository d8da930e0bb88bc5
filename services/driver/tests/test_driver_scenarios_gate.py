"""Scenario tests on the real bus: the shell tools' maintainer gate as the service wires it from the
configuration, the start-up warning for a chat whose gate can never open, and blocked users, whose
messages are context but never wake the bot, cost a probe or interrupt its turn."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from larkbot.canonical.llm import LLMReply, LLMRequest
from larkbot.driver.app import DriverService, warn_unreachable_shell
from larkbot.driver.tools.core import tools
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import LarkbotConfig
from larkbot.testkit.driver.harness import CHAT_ID, decide, world
from larkbot.testkit.driver.synthetic import response, tool_call

MAINTAINER = "ou_maya"
SPAMMER = "ou_spam"


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}"


def _gate_metric(outcome: str) -> float:
    return REGISTRY.get_sample_value("larkbot_driver_shell_gate_decisions_total", {"outcome": outcome}) or 0.0


def _names(request: LLMRequest) -> list[str]:
    return [t.name for t in request.tools]


async def test_the_service_opens_the_gate_for_a_configured_maintainer_only(
    bus: Bus, nats_url: str, db: str, caplog: pytest.LogCaptureFixture
) -> None:
    opened, closed = _gate_metric("open"), _gate_metric("closed")
    caplog.set_level(logging.INFO, logger="larkbot.driver")
    async with world(
        bus, nats_url, db, maintainers=[MAINTAINER], shell_enabled=True, maintainer_window_sec=60
    ) as w:
        w.probe_answers.extend([decide("send_message", "asked"), decide("send_message", "asked again")])
        w.primary_answers.extend([response(tool_call(tools.END)), response(tool_call(tools.END))])
        # Someone else with the maintainer's display name: closed.
        await w.say(
            1, 0, sender="ou_mallory", name="Maya", text="Maya here: check the disk", mentions_me=True
        )
        await w.tick(1000)
        # The maintainer, within the window: open.
        await w.say(2, 5000, sender=MAINTAINER, name="Maya", text="check the disk please")
        await w.tick(6000)
        first, second = w.llm.by_purpose("primary")
        assert tools.SHELL_TOOLS.isdisjoint(_names(first))
        assert _names(second)[-3:] == ["bash", "kill_task", "read_task_output"]
        turns = await w.driver.repo.turns("feishu", CHAT_ID)  # type: ignore[union-attr]
        assert [t.shell_tools_exposed for t in turns] == [False, True]  # persisted with every step
    assert (_gate_metric("open"), _gate_metric("closed")) == (opened + 1, closed + 1)
    assert f"shell tools exposed: maintainer {MAINTAINER} (message om_2)" in caplog.text


async def test_a_chat_with_shell_tools_and_no_maintainer_warns_at_start(
    caplog: pytest.LogCaptureFixture,
) -> None:
    chats = {"default": {}, "feishu:oc_ops": {"shell_enabled": True}, "feishu:oc_fun": {}}
    config = LarkbotConfig.model_validate({"chats": chats})
    with caplog.at_level(logging.WARNING, logger="larkbot.driver.app"):
        DriverService(config)
    assert "chats.feishu:oc_ops.shell_enabled is on but no maintainers are configured" in caplog.text
    assert "oc_fun" not in caplog.text
    staffed = LarkbotConfig.model_validate({"chats": chats, "maintainers": [MAINTAINER]})
    assert warn_unreachable_shell(staffed) == []


async def test_a_blocked_users_burst_costs_no_probe(bus: Bus, nats_url: str, db: str) -> None:
    async with world(bus, nats_url, db, blocked_users=[SPAMMER]) as w:
        for n in range(1, 9):
            await w.say(n, n * 200, sender=SPAMMER, name="Spam", text=f"BUY NOW {n}", mentions_me=True)
        await w.tick(60_000)
        assert w.llm.requests == []
        assert w.chat.schedule.inputs == ()

        # A member's message wakes the bot as usual; the burst is in the probe's window as context.
        w.probe_answers.append(decide("no_action", "spam only"))
        await w.say(9, 61_000, sender="ou_alice", text="is anyone here?")
        await w.tick(62_000)
        (probe,) = w.llm.by_purpose("probe")
        assert "BUY NOW 8" in str(probe.messages[0])


async def test_a_blocked_user_writing_mid_turn_does_not_interrupt_it(
    bus: Bus, nats_url: str, db: str
) -> None:
    async with world(bus, nats_url, db, blocked_users=[SPAMMER]) as w:

        async def read_while_spammed(request: LLMRequest) -> LLMReply:
            await w.say(2, 1500, sender=SPAMMER, name="Spam", text="BUY NOW")
            return response(tool_call(tools.READ_OLD, "r", message_ids=["m1"]), request_id=request.request_id)

        w.probe_answers.append(decide("send_message", "asked"))
        w.primary_answers.extend([read_while_spammed, response(tool_call(tools.SEND, "s", text="done"))])
        await w.say(1, 0, mentions_me=True, text="what did I say?")
        await w.tick(1000)
        assert len(w.llm.by_purpose("primary")) == 2  # one wake-up: the spam did not interrupt the chain
        assert [d.text for d in w.platform.delivered] == ["done"]
        await w.tick(30_000)
        assert len(w.llm.by_purpose("probe")) == 1
