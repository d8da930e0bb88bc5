"""Requests that do not fit the model's window, through the wake-up flow on in-memory ports (issue 23):
the input a wake-up answers is never trimmed away, is clipped rather than dropped when it alone does not
fit, and a probe refused as too long is compacted and asked again with less, like the primary."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from larkbot.canonical.llm import LLMError, LLMResponse, Message, TextPart
from larkbot.driver.tools.core import tools
from larkbot.driver.wake.core.estimate import request_tokens, segment_tokens
from larkbot.driver.wake.core.protocol import ModelCall
from larkbot.driver.wake.core.scheduler import Wake
from larkbot.driver.wake.core.wake import PROBE_FIT_ATTEMPTS, ProbeCall, WakeDone, WakeFailure, WakeInput
from larkbot.testkit.driver.scripted import DEFAULT_LIMITS, ScriptedPorts, wake_input
from larkbot.testkit.driver.synthetic import response, segment, tool_call

T0 = 1_800_000_000_000
MENTION = "@Lark what do you think of the plan?"
#: Messages 1-60 were answered by earlier wake-ups; 61-120 are the input of this one, 90 the mention.
HANDLED_UNTIL = T0 + 60_000
REFUSED = LLMError(request_id="r", category="context_length", message="too long")


def _inputs() -> WakeInput:
    return wake_input(Wake("debounced", T0 + 120_000, 0, None))


def _chat(**kw: object) -> list:  # type: ignore[type-arg]
    return [
        segment(n, at_ms=T0 + n * 1000, mentions_me=True, text=MENTION)
        if n == 90
        else segment(n, at_ms=T0 + n * 1000, text=f"message number {n} " + "and some more words " * 3)
        for n in range(1, 121)
    ]


def _ports(answers: list[LLMResponse | LLMError], **kw: object) -> ScriptedPorts:
    queue = list(answers)
    ports = ScriptedPorts(
        script=lambda _call: queue.pop(0),
        now_ms=T0 + 200_000,
        processed_until_ms=HANDLED_UNTIL,
        **kw,  # type: ignore[arg-type]
    )
    ports.segments.extend(_chat())
    return ports


def _decide() -> LLMResponse:
    return response(tool_call("decide", should_act="send_message", reason="unanswered address"))


def _send() -> LLMResponse:
    return response(tool_call(tools.SEND, "s", text="I like it"))


def _text(messages: tuple[Message, ...]) -> str:
    return "".join(p.text for m in messages for p in m.parts if isinstance(p, TextPart))


def _primaries(ports: ScriptedPorts) -> list[ModelCall]:
    return [c for c in ports.calls if isinstance(c, ModelCall)]


def _probes(ports: ScriptedPorts) -> list[ProbeCall]:
    return [c for c in ports.calls if isinstance(c, ProbeCall)]


def _sizes() -> tuple[int, int]:
    """(what a primary request holds besides the history, the history's 120 segments)."""
    ports = _ports([_decide(), _send()])
    asyncio.run(ports.run(_inputs()))
    (whole,) = _primaries(ports)
    history = sum(segment_tokens(s) for s in _chat())
    return request_tokens(whole.system, whole.tools, whole.messages) - history, history


def test_a_trimmed_request_keeps_all_of_the_input_it_answers() -> None:
    fixed, history = _sizes()
    # The whole history does not fit; the 60 unanswered messages do. The trim budget alone would keep
    # only the newest dozen, and the mention (message 90) would be cut away with the rest.
    limits = replace(DEFAULT_LIMITS, request_limit=fixed + history * 7 // 10, target=history // 10)
    ports = _ports([_decide(), _send()], limits=limits)
    outcome = asyncio.run(ports.run(_inputs()))
    assert outcome == WakeDone("probe")
    (primary,) = _primaries(ports)
    text = _text(primary.messages)
    assert MENTION in text
    assert all(f'id="m{n}"' in text for n in range(61, 121))
    assert request_tokens(primary.system, primary.tools, primary.messages) <= limits.request_limit  # type: ignore[operator]
    assert text.count("<omitted messages=") == 1  # the head's, for part of what was answered before
    assert [t.sent for t in ports.turns] == [True]


def test_input_that_alone_does_not_fit_is_clipped_with_markers_not_dropped() -> None:
    fixed, history = _sizes()
    limit = fixed + history // 5  # the 60 unanswered messages take half the history: they do not fit
    limits = replace(DEFAULT_LIMITS, request_limit=limit, target=history // 10)
    ports = _ports([_decide(), _send()], limits=limits)
    outcome = asyncio.run(ports.run(_inputs()))
    assert outcome == WakeDone("probe")
    (primary,) = _primaries(ports)
    text = _text(primary.messages)
    assert request_tokens(primary.system, primary.tools, primary.messages) <= limit
    assert MENTION in text  # the direct address is pinned
    assert 'id="m120"' in text  # and so is the newest message
    assert 'id="m60"' not in text  # what was answered before goes first
    assert (
        text.count("<omitted messages=") >= 2
    )  # the head, and inside the input where messages were left out
    assert any(n.kind == "clipped" for n in ports.notes)
    assert [t.sent for t in ports.turns] == [True]


def test_a_mention_too_large_even_alone_is_clipped_to_the_window() -> None:
    fixed, _history = _sizes()
    huge = segment(121, at_ms=T0 + 121_000, mentions_me=True, text="@Lark read this: " + "word " * 4000)
    limit = fixed + 600
    ports = _ports([_decide(), _send()], limits=replace(DEFAULT_LIMITS, request_limit=limit, target=300))
    ports.segments.append(huge)
    outcome = asyncio.run(ports.run(wake_input(Wake("debounced", T0 + 121_000, 0, None))))
    assert outcome == WakeDone("probe")
    (primary,) = _primaries(ports)
    text = _text(primary.messages)
    assert request_tokens(primary.system, primary.tools, primary.messages) <= limit
    assert "@Lark read this" in text
    assert "<clipped omitted-chars=" in text


def test_a_probe_refused_as_too_long_compacts_and_asks_again() -> None:
    def compact(ports: ScriptedPorts) -> bool:
        # As the compactor would: what was answered before leaves the context (never the input).
        del ports.segments[:50]
        return True

    ports = _ports([REFUSED, _decide(), _send()], compact_with=compact)
    outcome = asyncio.run(ports.run(_inputs()))
    assert outcome == WakeDone("probe")
    first, second = _probes(ports)
    assert ports.compactions == 1
    assert 'id="m10"' in _text(first.messages)
    assert 'id="m10"' not in _text(second.messages)
    assert MENTION in _text(second.messages)
    assert [n.detail for n in ports.notes if n.kind == "context_length"] == ["probe"]
    assert [t.sent for t in ports.turns] == [True]


def test_a_probe_refused_when_nothing_can_be_compacted_shows_half_its_window() -> None:
    ports = _ports([REFUSED, REFUSED, _decide(), _send()], last_action_ms=HANDLED_UNTIL)
    outcome = asyncio.run(ports.run(_inputs()))
    assert outcome == WakeDone("probe")
    sizes = [request_tokens(p.system, (), p.messages) for p in _probes(ports)]
    assert sizes[1] < sizes[0]
    assert sizes[2] < sizes[1]
    for probe in _probes(ports):
        assert MENTION in _text(probe.messages)  # a direct address since the last action is pinned
    assert [t.sent for t in ports.turns] == [True]


def test_a_probe_that_never_fits_fails_for_good_after_its_attempts() -> None:
    ports = _ports([REFUSED] * PROBE_FIT_ATTEMPTS)
    outcome = asyncio.run(ports.run(_inputs()))
    assert isinstance(outcome, WakeFailure)
    assert not outcome.transient
    assert outcome.reason == "probe failed: context_length"
    assert len(_probes(ports)) == PROBE_FIT_ATTEMPTS
    assert ports.processed_until_ms == HANDLED_UNTIL  # the chat loop latches it, as for any failure
