"""The speaking budget: when the platform budgets run low the probe and the primary are told, in the
late-binding message only; read from the buckets the ingress writes, on the real bus."""

from __future__ import annotations

import asyncio
import time

import pytest

from larkbot.canonical.llm import Message, TextPart, UserMessage
from larkbot.driver.budgets.core.speaking import guidance
from larkbot.driver.tools.core import tools
from larkbot.driver.wake.clients import BusClients
from larkbot.driver.wake.core.protocol import ModelCall
from larkbot.driver.wake.core.scheduler import Wake
from larkbot.driver.wake.core.wake import ProbeCall, WakeDone
from larkbot.runtime.budgets.core import SpeakingBudget
from larkbot.runtime.budgets.store import BudgetPlan, Budgets
from larkbot.runtime.bus import Bus
from larkbot.testkit.driver.scripted import ScriptedPorts, wake_input
from larkbot.testkit.driver.synthetic import response, segment, tool_call

T0 = 1_800_000_000_000


@pytest.mark.parametrize(
    ("budget", "expected"),
    [
        (None, ()),
        (SpeakingBudget(), ()),
        # Healthy: more than a quarter left — no words spent on it.
        (SpeakingBudget(minute=6, minute_limit=20, day=2000, day_limit=5000), ()),
        (
            SpeakingBudget(minute=5, minute_limit=20),
            (
                "Speaking budget: 5 more message(s) in this chat this minute (the operator allows 20); each "
                "part of a long reply counts. Keep to what matters.",
            ),
        ),
        (
            SpeakingBudget(minute=0, minute_limit=20),
            (
                "Speaking budget: spent for this minute in this chat (the operator allows 20 messages a "
                "minute) — a message now would be refused; stay silent or react.",
            ),
        ),
        (
            SpeakingBudget(day=100, day_limit=5000, month=90000, month_limit=100000),
            (
                "Speaking budget: 100 of 5000 platform API calls left today (each message, reaction and "
                "lookup counts). Speak only when it matters, briefly.",
            ),
        ),
        (
            SpeakingBudget(minute=1, minute_limit=5, day=10, day_limit=5000, month=0, month_limit=100000),
            (
                "Speaking budget: 1 more message(s) in this chat this minute (the operator allows 5); each "
                "part of a long reply counts. Keep to what matters.",
                "Speaking budget: 10 of 5000 platform API calls left today (each message, reaction and "
                "lookup counts). Speak only when it matters, briefly.",
                "Speaking budget: the platform's API calls for this month are spent (100000) — nothing you "
                "send or do on the platform will go through until it resets; stay silent.",
            ),
        ),
    ],
)
def test_the_guidance_speaks_only_when_a_budget_runs_low(
    budget: SpeakingBudget | None, expected: tuple[str, ...]
) -> None:
    assert guidance(budget) == expected


def _late_binding(messages: tuple[Message, ...]) -> str:
    last = messages[-1]
    assert isinstance(last, UserMessage)
    (part,) = last.parts
    assert isinstance(part, TextPart)
    assert part.text.startswith("<late-binding>")
    return part.text


def _ports(budget: SpeakingBudget | None) -> ScriptedPorts:
    answers = [
        response(tool_call("decide", should_act="send_message", reason="asked")),
        response(tool_call(tools.SEND, "s", text="hello")),
    ]
    ports = ScriptedPorts(
        script=lambda _call: answers.pop(0), now_ms=T0, processed_until_ms=T0 - 1, speaking_budget=budget
    )
    ports.segments.append(segment(1, at_ms=T0))
    return ports


def test_a_low_budget_reaches_the_late_binding_message_and_nothing_before_it() -> None:
    low, healthy = _ports(SpeakingBudget(minute=2, minute_limit=20)), _ports(None)
    for ports in (low, healthy):
        assert asyncio.run(ports.run(wake_input(Wake("debounced", T0, 0, None)))) == WakeDone("probe")
    calls = {}
    for name, ports in (("low", low), ("healthy", healthy)):
        probe = next(c for c in ports.calls if isinstance(c, ProbeCall))
        primary = next(c for c in ports.calls if isinstance(c, ModelCall))
        calls[name] = (probe, primary)
    (probe_l, primary_l), (probe_h, primary_h) = calls["low"], calls["healthy"]
    for messages in (probe_l.messages, primary_l.messages):
        assert "Speaking budget: 2 more message(s) in this chat this minute" in _late_binding(messages)
    assert "Speaking budget" not in _late_binding(probe_h.messages)
    # The cached prefix is the same byte for byte.
    assert (probe_l.system, probe_l.messages[:-1]) == (probe_h.system, probe_h.messages[:-1])
    assert (primary_l.system, primary_l.tools, primary_l.messages[:-1]) == (
        primary_h.system,
        primary_h.tools,
        primary_h.messages[:-1],
    )


async def test_the_driver_reads_what_the_ingress_booked(bus: Bus) -> None:
    plan = BudgetPlan("telegram", messages_per_minute=20, groups_only=True)
    ingress = await Budgets.open(bus.js, plan)
    clients = BusClients(bus)
    now = time.time_ns() // 1_000_000
    assert await clients.speaking_budget("telegram", "-100777", now) == SpeakingBudget()
    await ingress.spend_messages("-100777", 16)
    seen = await clients.speaking_budget("telegram", "-100777", time.time_ns() // 1_000_000)
    assert seen == SpeakingBudget(minute=4, minute_limit=20)
    assert guidance(seen)[0].startswith("Speaking budget: 4 more message(s)")
