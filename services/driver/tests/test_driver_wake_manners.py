"""The chat's manners in the wake-up flow (``core.wake``) on in-memory ports: a wake-up held before the
probe (path ``held``), a direct address that still goes on, and the guidance that reaches the probe's and
the primary's late-binding message and nothing before it."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from larkbot.canonical.llm import LLMResponse, Message, TextPart, UserMessage
from larkbot.driver.manners.core.manners import Manners
from larkbot.driver.manners.core.quiet import QuietHours
from larkbot.driver.manners.core.share import VoiceLimits
from larkbot.driver.tools.core import tools
from larkbot.driver.wake.core.commands import Note
from larkbot.driver.wake.core.protocol import ModelCall
from larkbot.driver.wake.core.records import Activation
from larkbot.driver.wake.core.scheduler import Wake
from larkbot.driver.wake.core.wake import ProbeCall, WakeDone, WakeInput, WakeSettings
from larkbot.testkit.driver.scripted import DEFAULT_WAKE_SETTINGS, ScriptedPorts, wake_input
from larkbot.testkit.driver.synthetic import response, segment, tool_call

#: 2027-01-15 08:00:00 UTC: 16:00 at the inputs' +08:00.
T0 = 1_800_000_000_000
VOICE = VoiceLimits(window_messages=10, window_ms=600_000, soft_share=0.2, hard_share=0.3)


def _inputs(manners: Manners, *, wake: Wake | None = None) -> WakeInput:
    settings: WakeSettings = replace(DEFAULT_WAKE_SETTINGS, manners=manners)
    return wake_input(wake or Wake("debounced", T0, 0, None), settings=settings, utc_offset_min=480)


def _ports(bot_messages: int, answers: list[LLMResponse], **new: bool) -> ScriptedPorts:
    """A group where the bot wrote ``bot_messages`` of the messages before the new one (message 20, at
    T0), all handled."""
    queue = list(answers)
    ports = ScriptedPorts(script=lambda _call: queue.pop(0), now_ms=T0, processed_until_ms=T0 - 1)
    for n in range(1, 10):
        ports.segments.append(
            segment(n, at_ms=T0 - (10 - n) * 1000, myself=n <= bot_messages * 2 and n % 2 == 0)
        )
    ports.segments.append(segment(20, at_ms=T0, **new))
    return ports


def _decide(decision: str = "send_message") -> LLMResponse:
    return response(tool_call("decide", should_act=decision, reason="because"))


def _send() -> LLMResponse:
    return response(tool_call(tools.SEND, "s", text="hello"))


def _late_binding(messages: tuple[Message, ...]) -> str:
    last = messages[-1]
    assert isinstance(last, UserMessage)
    (part,) = last.parts
    assert isinstance(part, TextPart)
    assert part.text.startswith("<late-binding>")
    return part.text


def _before_late_binding(messages: tuple[Message, ...]) -> str:
    return str(messages[:-1])


def test_over_the_hard_limit_an_undirected_message_ends_the_wake_up_before_the_probe() -> None:
    ports = _ports(3, [])
    outcome = asyncio.run(ports.run(_inputs(Manners(voice=VOICE))))
    assert outcome == WakeDone("held")
    assert ports.calls == []  # no model call at all
    assert Note("held", "share_of_voice") in ports.notes
    assert Note("path", "held") in ports.notes
    assert ports.processed_until_ms == T0
    assert ports.probes == []
    assert ports.turns == []


def test_over_the_hard_limit_a_mention_is_probed_and_answered_and_told_its_share() -> None:
    ports = _ports(3, [_decide(), _send()], mentions_me=True)
    outcome = asyncio.run(ports.run(_inputs(Manners(voice=VOICE))))
    assert outcome == WakeDone("probe")
    probe = next(c for c in ports.calls if isinstance(c, ProbeCall))
    primary = next(c for c in ports.calls if isinstance(c, ModelCall))
    for messages in (probe.messages, primary.messages):
        text = _late_binding(messages)
        assert "3 of the last 10 (soft limit 20%, hard limit 30%)" in text
        assert "Over the hard limit, only direct addresses wake you" in text
        assert "share of this chat" not in _before_late_binding(messages)
    assert [t.sent for t in ports.turns] == [True]


def test_under_the_hard_limit_an_undirected_message_is_probed() -> None:
    ports = _ports(2, [_decide("no_action")])
    outcome = asyncio.run(ports.run(_inputs(Manners(voice=VOICE))))
    assert outcome == WakeDone("suppressed")
    (probe,) = ports.calls
    assert isinstance(probe, ProbeCall)
    assert "2 of the last 10" in _late_binding(probe.messages)  # at the soft limit: told


def test_at_normal_level_and_a_low_share_the_late_binding_holds_no_guidance() -> None:
    ports = _ports(0, [_decide(), _send()])
    asyncio.run(ports.run(_inputs(Manners(voice=VOICE))))
    probe = next(c for c in ports.calls if isinstance(c, ProbeCall))
    primary = next(c for c in ports.calls if isinstance(c, ModelCall))
    for text in (_late_binding(probe.messages), _late_binding(primary.messages)):
        assert "share of this chat" not in text
        assert "Talk level" not in text
        assert "Quiet hours" not in text


def test_a_talk_level_changes_only_the_late_binding_message() -> None:
    requests: dict[str, tuple[ProbeCall, ModelCall]] = {}
    for level in ("normal", "reserved"):
        ports = _ports(0, [_decide(), _send()])
        asyncio.run(ports.run(_inputs(Manners(talk_level=level, voice=VOICE))))  # type: ignore[arg-type]
        probe = next(c for c in ports.calls if isinstance(c, ProbeCall))
        primary = next(c for c in ports.calls if isinstance(c, ModelCall))
        requests[level] = (probe, primary)
    (probe_n, primary_n), (probe_r, primary_r) = requests["normal"], requests["reserved"]
    # The cached prefix (system block, tools, history) is the same byte for byte.
    assert (probe_r.system, probe_r.messages[:-1]) == (probe_n.system, probe_n.messages[:-1])
    assert (primary_r.system, primary_r.tools, primary_r.messages[:-1]) == (
        primary_n.system,
        primary_n.tools,
        primary_n.messages[:-1],
    )
    assert "Talk level in this chat: reserved" in _late_binding(probe_r.messages)
    assert "Talk level in this chat: reserved" in _late_binding(primary_r.messages)


def test_quiet_hours_hold_an_undirected_message_and_let_a_reply_to_the_bot_through() -> None:
    afternoon = Manners(voice=VOICE, quiet=QuietHours(15 * 60, 3 * 60))  # 16:00 at +08:00 is inside
    held = _ports(0, [])
    assert asyncio.run(held.run(_inputs(afternoon))) == WakeDone("held")
    assert Note("held", "quiet_hours") in held.notes
    assert held.calls == []
    answered = _ports(0, [_decide(), _send()], replies_to_me=True)
    assert asyncio.run(answered.run(_inputs(afternoon))) == WakeDone("probe")
    probe = next(c for c in answered.calls if isinstance(c, ProbeCall))
    assert "Quiet hours in this chat (15:00–03:00 local time)" in _late_binding(probe.messages)


def test_quiet_hours_allowing_none_hold_a_mention_too_and_a_direct_chat_is_always_addressed() -> None:
    closed = Manners(voice=VOICE, quiet=QuietHours(15 * 60, 3 * 60, "none"))
    ports = _ports(0, [], mentions_me=True)
    assert asyncio.run(ports.run(_inputs(closed))) == WakeDone("held")
    direct = Manners(voice=VOICE, quiet=QuietHours(15 * 60, 3 * 60), direct_chat=True)
    ports = _ports(3, [_decide(), _send()])
    assert asyncio.run(ports.run(_inputs(direct))) == WakeDone("probe")


def test_a_retry_carrying_its_activation_is_not_held_again() -> None:
    # The first attempt passed the gate; its retry goes on to the primary whatever the share is now.
    ports = _ports(3, [_send()])
    retry = Wake("retry", T0, 1, Activation("send_message", "asked"))
    outcome = asyncio.run(ports.run(_inputs(Manners(voice=VOICE), wake=retry)))
    assert outcome == WakeDone("activation")
    assert [t.sent for t in ports.turns] == [True]
