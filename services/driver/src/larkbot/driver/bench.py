"""The cacheable-prefix benchmark (DESIGN §8): replay a long synthetic chat through the driver's prompt
assembly and primary-turn loop with a scripted model, and measure how much of each primary request is
byte-identical to a prefix of the previous one.

Bytes are taken in the order providers cache them: tool definitions, system prompt, then messages (the
canonical JSON of each, as the gateway receives them). For consecutive requests ``prev``, ``cur``, the
shared bytes are their longest common prefix; the ratio is ``Σ shared / Σ len(cur)`` over every request
but the first. A *break* is a request that does not extend everything of ``prev`` except its late-binding
message — the only part allowed to change. Wrap-up and react-only steps change the tool list and count
as breaks by construction.

Pure and deterministic (no I/O, no clock): ``larkbot bench`` calls :func:`cacheable_prefix_ratio`; the
scenario tests check the same property through the real bus.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from larkbot.canonical.context import Segment
from larkbot.canonical.llm import Message, ToolSpec

from .core import prompt, tools
from .core.budget import TurnBudget
from .core.participation import participation
from .core.records import ChainUsage, TurnRecord
from .core.turn import Ack, CheckInterrupt, ModelAnswer, ModelCall, Persist, ToolDone, TurnPlan, primary_turn
from .synthetic import response, segment, tool_call

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


def measure(requests: Sequence[tuple[bytes, bytes]]) -> PrefixReport:
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
    mention and every ``reply_every``-th burst, reads old messages on every third activation, and replies."""
    segments: list[Segment] = []
    turns: list[TurnRecord] = []
    requests: list[tuple[bytes, bytes]] = []
    system = prompt.system_prompt("Lark", "feishu", ("You are curious and brief.",))
    now = T0
    n = 0
    activations = 0
    bursts = 0
    while n < messages:
        for _ in range(1 + bursts % burst):
            if n >= messages:
                break
            n += 1
            sender, name = SENDERS[n % len(SENDERS)]
            now += 7_000
            mention = n % 11 == 0
            text = ("@Lark " if mention else "") + PHRASES[n % len(PHRASES)] + f" ({n})"
            segments.append(segment(n, sender=sender, name=name, at_ms=now, text=text, mentions_me=mention))
        bursts += 1
        if not (any(s.mentions_me for s in segments[-burst:]) or bursts % reply_every == 0):
            continue
        activations += 1
        now += 1_000
        now = _turn(segments, turns, requests, system, now, activations, read_first=activations % 3 == 0)
    report = measure(requests)
    return PrefixReport(messages, report.requests, report.request_bytes, report.shared_bytes, report.breaks)


def _turn(
    segments: list[Segment],
    turns: list[TurnRecord],
    requests: list[tuple[bytes, bytes]],
    system: str,
    now: int,
    activation: int,
    *,
    read_first: bool,
) -> int:
    snapshot = tuple(segments)
    plan = TurnPlan(
        platform="feishu",
        chat_id="oc_bench",
        wake_id=f"w{activation}",
        chain_id=f"c{activation}",
        first_step=0,
        usage=ChainUsage(),
        budget=TurnBudget(),
        react_only=False,
        started_ms=now,
        system=system,
        history=prompt.history(snapshot, tuple(turns), model_identity="fake-model", reasoning_replay=3),
        late_binding=prompt.late_binding(
            now_ms=now,
            utc_offset_min=480,
            stats=participation(snapshot, now),
            probe_reason="someone asked",
            interrupted=False,
            react_only=False,
        ),
    )
    script = [tool_call(tools.SEND, "s", text=f"answer {activation}")]
    if read_first:
        script.insert(0, tool_call(tools.READ_OLD, "r", message_ids=[f"m{max(1, len(segments) - 40)}"]))
    gen = primary_turn(plan)
    command = next(gen)
    while True:
        if isinstance(command, ModelCall):
            full = prompt_bytes(command.system, command.tools, command.messages)
            stable = prompt_bytes(command.system, command.tools, command.messages[:-1])
            requests.append((full, stable))
            feedback: ModelAnswer | ToolDone | Ack = ModelAnswer(response(script.pop(0)), now)
        elif isinstance(command, Persist):
            turns.append(command.record)
            feedback = Ack(now)
        elif isinstance(command, CheckInterrupt):
            feedback = Ack(now)
        else:
            now += 200
            if command.name == tools.SEND:
                segments.append(
                    segment(
                        100_000 + activation,
                        sender="ou_bot",
                        name="Lark",
                        at_ms=now,
                        text=command.args["text"],
                        myself=True,
                        self_sent=True,
                    )
                )
            feedback = ToolDone(True, prompt.segment_parts(segments[-1])[:1], now)
        try:
            command = gen.send(feedback)
        except StopIteration:
            return now
