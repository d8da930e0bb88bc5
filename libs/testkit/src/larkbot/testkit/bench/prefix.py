"""The cacheable-prefix benchmark (DESIGN §8): replay a long synthetic chat and measure how much of each
primary request is byte-identical to a prefix of the previous one.

Bytes are taken in the order providers cache them: tool definitions, system prompt, then messages (the
canonical JSON of each, as the gateway receives them). For consecutive requests ``prev``, ``cur``, the
shared bytes are their longest common prefix; the ratio is ``Σ shared / Σ len(cur)`` over every request
but the first. A *break* is a request that does not extend everything of ``prev`` except its late-binding
message — the only part allowed to change. Wrap-up and react-only steps change the tool list and count
as breaks by construction.

Two replays of the same chat:

- :func:`cacheable_prefix_ratio` — pure and deterministic (no I/O, no clock): the driver's wake-up flow
  (``larkbot.driver.wake.core.wake``) through the service's interpreter on in-memory ports
  (:class:`larkbot.testkit.driver.scripted.ScriptedPorts`), with a scripted model, over synthetic
  segments; fast enough for a unit test.
- :func:`.replay.measure` — what ``larkbot bench`` reports: :func:`conversation` published as
  canonical events to ``EVENTS``, through the real pipeline and the driver service on the bus, the bot's
  sends coming back through the pipeline as self-sent messages; the requests taken as the LLM gateway
  receives them (:func:`request_bytes`, :func:`figures`).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from larkbot.canonical.llm import LLMRequest, LLMResponse, Message, ToolSpec
from larkbot.driver.tools.core import tools
from larkbot.driver.wake.core import prompt
from larkbot.driver.wake.core.protocol import ModelCall, ToolDone, ToolRun
from larkbot.driver.wake.core.records import Activation
from larkbot.driver.wake.core.scheduler import Wake
from larkbot.driver.wake.core.wake import ProbeCall, WakeInput

from ..driver.scripted import DEFAULT_LIMITS, ScriptedPorts, wake_input
from ..driver.synthetic import response, segment, tool_call

T0 = 1_800_000_000_000
SENDERS = (("ou_alice", "Alice"), ("ou_bob", "Bob"), ("ou_carol", "Carol"), ("ou_dan", "Dan"))
PHRASES = (
    "did anyone try the new build?",
    "lunch at noon works for me",
    "the deploy failed again, looking into it",
    "haha that's exactly what I meant",
    "can someone review my change before five?",
    "I think the cache is the culprit here",
)


def prompt_bytes(system: str, offered: Sequence[ToolSpec], messages: Sequence[Message]) -> bytes:
    parts = [spec.model_dump_json().encode() for spec in offered]
    parts.append(system.encode())
    parts.extend(m.model_dump_json().encode() for m in messages)
    return b"\n".join(parts)


def common_prefix(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    lo, hi = 0, n
    while lo < hi:  # binary search on the prefix length: comparisons of slices are fast in C
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


@dataclass(frozen=True, slots=True)
class PrefixReport:
    messages: int
    requests: int
    request_bytes: int
    shared_bytes: int
    breaks: int

    @property
    def ratio(self) -> float:
        return self.shared_bytes / self.request_bytes if self.request_bytes else 1.0


def prefix_report(requests: Sequence[tuple[bytes, bytes]]) -> PrefixReport:
    """``requests``: (full bytes, bytes without the late-binding message) of consecutive requests."""
    total = shared = breaks = 0
    for (prev, prev_stable), (cur, _) in itertools.pairwise(requests):
        total += len(cur)
        lcp = common_prefix(prev, cur)
        shared += lcp
        breaks += lcp < len(prev_stable)
    return PrefixReport(0, len(requests), total, shared, breaks)


def cacheable_prefix_ratio(messages: int = 500, *, burst: int = 3, reply_every: int = 4) -> PrefixReport:
    """Replay ``messages`` member messages in bursts of up to ``burst``; the bot is activated by every
    mention and every ``reply_every``-th burst, reads old messages on every third activation, and replies.
    Each activation is one wake-up of ``core.wake`` through the interpreter, on in-memory ports."""
    requests: list[tuple[bytes, bytes]] = []
    script: list[LLMResponse] = []

    def model(call: ModelCall | ProbeCall) -> LLMResponse:
        assert isinstance(call, ModelCall)
        requests.append(
            (
                prompt_bytes(call.system, call.tools, call.messages),
                prompt_bytes(call.system, call.tools, call.messages[:-1]),
            )
        )
        return script.pop(0)

    ports = ScriptedPorts(script=model, now_ms=T0, call_ms=200, limits=replace(DEFAULT_LIMITS, target=30_000))

    def send(run: ToolRun) -> ToolDone:
        if run.name == tools.SEND:
            ports.segments.append(
                segment(
                    100_000 + len(ports.segments),
                    sender="ou_bot",
                    name="Lark",
                    at_ms=ports.now_ms,
                    text=run.args["text"],
                    myself=True,
                    self_sent=True,
                )
            )
        return ToolDone(True, prompt.segment_parts(ports.segments[-1])[:1], ports.now_ms)

    ports.tool_script = send
    n = activations = bursts = 0
    while n < messages:
        for _ in range(1 + bursts % burst):
            if n >= messages:
                break
            n += 1
            sender, name = SENDERS[n % len(SENDERS)]
            ports.now_ms += 7_000
            mention = n % 11 == 0
            text = ("@Lark " if mention else "") + PHRASES[n % len(PHRASES)] + f" ({n})"
            ports.segments.append(
                segment(n, sender=sender, name=name, at_ms=ports.now_ms, text=text, mentions_me=mention)
            )
        bursts += 1
        if not (any(s.mentions_me for s in ports.segments[-burst:]) or bursts % reply_every == 0):
            continue
        activations += 1
        ports.now_ms += 1_000
        if activations % 3 == 0:
            script.append(response(tool_call(tools.READ_OLD, "r", message_ids=[f"m{max(1, n - 40)}"])))
        script.append(response(tool_call(tools.SEND, "s", text=f"answer {activations}")))
        wake = Wake("debounced", ports.now_ms, 0, Activation("send_message", "someone asked"))
        asyncio.run(ports.run(_inputs(wake, activations)))
    report = prefix_report(requests)
    return PrefixReport(messages, report.requests, report.request_bytes, report.shared_bytes, report.breaks)


def _inputs(wake: Wake, activation: int) -> WakeInput:
    return wake_input(
        wake,
        chat_id="oc_bench",
        wake_id=f"w{activation}",
        new_chain_id=f"c{activation}",
        persona_texts=("You are curious and brief.",),
    )


# -- through the bus -------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Line:
    """Member message ``n``, received ``at_ms`` after the start of the replay."""

    n: int
    at_ms: int
    sender: str
    name: str
    #: The words of the message; a mention of the bot (``mention``) comes before them.
    text: str
    mention: bool


@dataclass(frozen=True, slots=True)
class Burst:
    """1–3 member messages, then the clock moves to ``wake_at_ms`` (one debounced wake-up, one probe).
    ``activation`` > 0: the probe decides to act, the turn reads message ``read_old`` first (when set) and
    sends ``answer <activation>``."""

    lines: tuple[Line, ...]
    activation: int
    read_old: int | None
    wake_at_ms: int


def conversation(
    messages: int, *, burst: int = 3, reply_every: int = 4, spacing_ms: int = 7_000
) -> Iterator[Burst]:
    """The chat the bus replay feeds: four members, a message every ``spacing_ms`` in bursts of up to
    ``burst``, every 11th message mentions the bot; the bot is activated by a mention and by every
    ``reply_every``-th burst, and reads the message 40 back on every third activation."""
    at = n = bursts = activations = 0
    while n < messages:
        lines: list[Line] = []
        for _ in range(1 + bursts % burst):
            if n >= messages:
                break
            n += 1
            at += spacing_ms
            sender, name = SENDERS[n % len(SENDERS)]
            lines.append(Line(n, at, sender, name, PHRASES[n % len(PHRASES)] + f" ({n})", n % 11 == 0))
        bursts += 1
        activation = 0
        read_old = None
        if any(line.mention for line in lines) or bursts % reply_every == 0:
            activations += 1
            activation = activations
            read_old = max(1, n - 40) if activations % 3 == 0 else None
        at += 1_000
        yield Burst(tuple(lines), activation, read_old, at)


def request_bytes(requests: Sequence[LLMRequest]) -> list[tuple[bytes, bytes]]:
    """(full bytes, bytes without the late-binding message) of each request, for :func:`prefix_report`."""
    return [
        (prompt_bytes(r.system, r.tools, r.messages), prompt_bytes(r.system, r.tools, r.messages[:-1]))
        for r in requests
    ]


def figures(report: PrefixReport, seconds: float) -> dict[str, Any]:
    """What ``larkbot bench`` prints of a replay: the ratio, and the details under ``driver`` (the bench
    merges every measurement into one report)."""
    return {
        "cacheable_prefix_ratio": round(report.ratio, 4),
        "driver": {
            "messages": report.messages,
            "requests": report.requests,
            "breaks": report.breaks,
            "request_bytes": report.request_bytes,
            "shared_bytes": report.shared_bytes,
            "seconds": round(seconds, 2),
        },
    }
