"""The wake-up flow (``core.wake``) through the service's interpreter on in-memory ports: paths, probe
failures, and keeping the primary request within the model's window."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from larkbot.canonical.llm import LLMError, LLMResponse, TextPart, UserMessage
from larkbot.driver.tools.core import tools
from larkbot.driver.wake.core.estimate import request_tokens
from larkbot.driver.wake.core.protocol import ModelCall
from larkbot.driver.wake.core.scheduler import Wake
from larkbot.driver.wake.core.wake import (
    CLIP_ATTEMPTS,
    ProbeCall,
    WakeDone,
    WakeFailure,
    WakeInput,
    WakeSettings,
)
from larkbot.testkit.driver.scripted import DEFAULT_LIMITS, DEFAULT_WAKE_SETTINGS, ScriptedPorts, wake_input
from larkbot.testkit.driver.synthetic import response, segment, tool_call

T0 = 1_800_000_000_000
SETTINGS = DEFAULT_WAKE_SETTINGS


def _inputs(settings: WakeSettings = SETTINGS, until: int = T0 + 100_000) -> WakeInput:
    return wake_input(Wake("debounced", until, 0, None), settings=settings)


def _ports(answers: list[LLMResponse | LLMError], messages: int = 3, **kw: object) -> ScriptedPorts:
    queue = list(answers)
    ports = ScriptedPorts(script=lambda _call: queue.pop(0), now_ms=T0 + 200_000, **kw)  # type: ignore[arg-type]
    ports.segments.extend(segment(n, at_ms=T0 + n * 1000) for n in range(1, messages + 1))
    return ports


def _decide(decision: str) -> LLMResponse:
    return response(tool_call("decide", should_act=decision, reason="because"))


def _send(text: str = "hello") -> LLMResponse:
    return response(tool_call(tools.SEND, "s", text=text))


def _primaries(ports: ScriptedPorts) -> list[ModelCall]:
    return [c for c in ports.calls if isinstance(c, ModelCall)]


def test_a_suppressed_wake_up_stores_the_probe_and_marks_the_input_processed() -> None:
    ports = _ports([_decide("no_action")])
    outcome = asyncio.run(ports.run(_inputs()))
    assert outcome == WakeDone("suppressed")
    assert [type(c) for c in ports.calls] == [ProbeCall]
    assert [p.decision for p in ports.probes] == ["no_action"]
    assert ports.processed_until_ms == T0 + 100_000
    assert ports.turns == []


def test_a_failed_probe_call_is_a_transient_failure_and_nothing_is_processed() -> None:
    ports = _ports([LLMError(request_id="r", category="transient", message="timeout")])
    outcome = asyncio.run(ports.run(_inputs()))
    assert isinstance(outcome, WakeFailure)
    assert outcome.transient
    assert ports.processed_until_ms == 0


def test_an_activation_runs_the_primary_and_the_send_is_stored() -> None:
    ports = _ports([_decide("send_message"), _send()])
    outcome = asyncio.run(ports.run(_inputs()))
    assert outcome == WakeDone("probe")
    assert len(_primaries(ports)) == 1
    assert [t.sent for t in ports.turns] == [True]
    assert ports.last_action_ms == ports.turns[0].requested_at_ms


def test_a_request_over_the_window_compacts_first_then_trims() -> None:
    limits = replace(DEFAULT_LIMITS, request_limit=3_000, target=600)
    # Messages 1-110 were handled by earlier wake-ups; 111-120 are this one's input.
    ports = _ports(
        [_decide("send_message"), _send()], messages=120, limits=limits, processed_until_ms=T0 + 110_000
    )
    outcome = asyncio.run(ports.run(_inputs(until=T0 + 120_000)))
    assert outcome == WakeDone("probe")
    assert ports.compactions == 1  # asked first; the scripted compactor could not move the cursor
    (primary,) = _primaries(ports)
    assert request_tokens(primary.system, primary.tools, primary.messages) <= 3_000
    head = primary.messages[0]
    assert isinstance(head, UserMessage)
    assert isinstance(head.parts[0], TextPart)
    assert head.parts[0].text.startswith('<omitted messages="')
    assert ports.trim_from_ms is not None  # sticky for the next request
    assert any(n.kind == "trimmed" for n in ports.notes)


def test_a_context_length_refusal_compacts_and_asks_again() -> None:
    refusal = LLMError(request_id="r", category="context_length", message="too long")
    moved: list[bool] = []

    def compact(ports: ScriptedPorts) -> bool:
        # As the compactor would: the oldest part leaves the context.
        del ports.segments[:2]
        moved.append(True)
        return True

    ports = _ports([_decide("send_message"), refusal, _send("after compaction")], compact_with=compact)
    outcome = asyncio.run(ports.run(_inputs()))
    assert outcome == WakeDone("probe")
    assert moved == [True]
    first, second = _primaries(ports)
    assert len(second.messages) < len(first.messages) or second.messages != first.messages
    assert [n.kind for n in ports.notes].count("context_length") == 1


def test_when_compaction_cannot_help_the_retry_is_trimmed_then_clipped_and_a_last_refusal_fails() -> None:
    refusal = LLMError(request_id="r", category="context_length", message="too long")
    ports = _ports(
        [_decide("send_message"), *[refusal] * (2 + CLIP_ATTEMPTS)],
        messages=40,
        processed_until_ms=T0 + 30_000,
    )
    outcome = asyncio.run(ports.run(_inputs()))
    assert isinstance(outcome, WakeFailure)
    assert not outcome.transient
    assert ports.compactions == 1  # tried once; the scripted compactor could not move the cursor
    assert len(_primaries(ports)) == 2 + CLIP_ATTEMPTS  # whole, trimmed, clipped smaller and smaller
    clipped = [request_tokens(p.system, p.tools, p.messages) for p in _primaries(ports)[2:]]
    assert clipped == sorted(clipped, reverse=True)
    assert clipped[-1] < clipped[0]
    trimmed = _primaries(ports)[1]
    head = trimmed.messages[0]
    assert isinstance(head, UserMessage)
    assert isinstance(head.parts[0], TextPart)
    assert head.parts[0].text.startswith('<omitted messages="')
