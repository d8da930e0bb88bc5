"""Compaction (SPEC §4.5): which part of a chat's history to summarize, and the summarization request.

The history after the cursor is the rendered context (segments after the pipeline's cursor, an event
sequence) merged with the turn responses requested at or after the summary's turn boundary. When its
estimate exceeds the trigger, the oldest part is summarized, together with the previous summary, so that
the newest part left is at most the target. A cut always falls before a segment ``k``: segments before it
(their newest ``event_seq`` becomes the cursor) and turn responses requested before segment ``k`` arrived
(the new turn boundary) are covered by the summary; nothing is covered twice or dropped.

Constraints on the cut:

- an open chain, a pending step and a wake-up in progress stay after it (their turn responses are still
  part of the turn);
- the input the bot has not handled yet (external segments after ``processed_until_ms``, and everything
  after the first of them) stays after it: it is what the next or the current wake-up answers, and a
  summary of a mention is not a mention. Only a wake-up that finished, or failed for good, marks input
  processed;
- the newest segment stays after it;
- what is summarized must fit the input cap (the compaction model's window, less the previous summary):
  when it does not, the cut moves back to the oldest part that fits, and the rest waits for the next
  compaction. The cursor advances only to what was actually summarized.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from larkbot.canonical.context import Segment
from larkbot.canonical.llm import Message, TextPart, Usage, UserMessage, UserPart
from larkbot.driver.wake.core.actions import action_segments, with_actions
from larkbot.driver.wake.core.context import is_external
from larkbot.driver.wake.core.estimate import messages_tokens, segment_tokens, text_tokens
from larkbot.driver.wake.core.records import TurnRecord
from larkbot.driver.wake.core.templates import COMPACTION_INSTRUCTION, COMPACTION_RULES


@dataclass(frozen=True, slots=True)
class Summary:
    """One stored compaction (append-only): the summary of everything up to ``cursor`` (segments) and
    before ``turns_from_ms`` (turn responses), the previous summary included."""

    platform: str
    chat_id: str
    cursor: int
    turns_from_ms: int
    text: str
    created_at_ms: int
    model_identity: str
    usage: Usage
    #: Segments and turn responses this compaction summarized (the previous summary not counted).
    segments: int
    turns: int
    #: The history's estimate before and after.
    tokens_before: int
    tokens_after: int


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    segments: tuple[Segment, ...]
    turns: tuple[TurnRecord, ...]
    cursor: int
    turns_from_ms: int
    tokens_before: int
    tokens_after: int
    summarized_tokens: int


def turn_tokens(turn: TurnRecord) -> int:
    return messages_tokens(turn.entries)


def history_tokens(segments: tuple[Segment, ...], turns: tuple[TurnRecord, ...]) -> int:
    """The estimate of RC + TR as the primary sees them (self-sent echoes are not shown)."""
    return sum(segment_tokens(s) for s in segments if not s.is_self_sent) + sum(turn_tokens(t) for t in turns)


def _protected_from(turns: tuple[TurnRecord, ...]) -> int | None:
    """The request time of the oldest turn response that must stay: a pending step or the open chain."""
    times = [t.requested_at_ms for t in turns if t.pending]
    if turns and turns[-1].requires_follow_up:
        chain = turns[-1].chain_id
        times += [t.requested_at_ms for t in turns if t.chain_id == chain]
    return min(times) if times else None


def first_unprocessed(
    segments: tuple[Segment, ...], processed_until_ms: int, blocked: frozenset[str] = frozenset()
) -> int | None:
    """The index of the oldest input not handled yet: an external segment that arrived after
    ``processed_until_ms`` (``None``: all of it was handled)."""
    return next(
        (
            i
            for i, s in enumerate(segments)
            if s.received_at_ms > processed_until_ms and is_external(s, blocked)
        ),
        None,
    )


def plan_compaction(
    segments: tuple[Segment, ...],
    turns: tuple[TurnRecord, ...],
    *,
    previous_turns_from_ms: int,
    trigger_tokens: int,
    target_tokens: int,
    input_cap_tokens: int,
    processed_until_ms: int,
    blocked: frozenset[str] = frozenset(),
    force: bool = False,
    protected_from_ms: int | None = None,
) -> CompactionPlan | None:
    """The cut (see the module docstring), or ``None`` when the history is within the trigger (and the
    compaction is not forced) or no cut is possible."""
    stored = [t for t in turns if not t.pending]
    before = history_tokens(segments, tuple(stored))
    if (before <= trigger_tokens and not force) or len(segments) < 2:
        return None
    by_time = sorted(range(len(stored)), key=lambda i: (stored[i].requested_at_ms, i))
    times = [stored[i].requested_at_ms for i in by_time]
    suffix = [0] * (len(by_time) + 1)  # suffix[j]: tokens of the turns from by_time[j] on
    for j in range(len(by_time) - 1, -1, -1):
        suffix[j] = suffix[j + 1] + turn_tokens(stored[by_time[j]])
    seg_suffix = [0] * (len(segments) + 1)
    for i in range(len(segments) - 1, -1, -1):
        shown = 0 if segments[i].is_self_sent else segment_tokens(segments[i])
        seg_suffix[i] = seg_suffix[i + 1] + shown
    protected = _protected_from(turns)
    if protected_from_ms is not None:
        # A wake-up in progress may still store turn responses requested from then on.
        protected = protected_from_ms if protected is None else min(protected, protected_from_ms)

    def boundary(k: int) -> int:
        return max(previous_turns_from_ms, segments[k].received_at_ms)

    def kept(k: int) -> int:
        return seg_suffix[k] + suffix[bisect.bisect_left(times, boundary(k))]

    # Segments before the cut are summarized: the cut falls at or before the oldest unhandled input.
    last_cut = len(segments) - 1
    unhandled = first_unprocessed(segments, processed_until_ms, blocked)
    if unhandled is not None:
        last_cut = min(last_cut, unhandled)
    allowed = [k for k in range(1, last_cut + 1) if protected is None or boundary(k) <= protected]
    if not allowed:
        return None
    k = next((k for k in allowed if kept(k) <= target_tokens), allowed[-1])
    # Within the input cap: the oldest part that fits (at least one segment).
    while k > 1 and before - kept(k) > input_cap_tokens:
        k -= 1
    cut_at = boundary(k)
    covered = tuple(t for t in stored if t.requested_at_ms < cut_at)
    after = kept(k)
    return CompactionPlan(
        segments=segments[:k],
        turns=covered,
        cursor=segments[k - 1].event_seq,
        turns_from_ms=cut_at,
        tokens_before=before,
        tokens_after=after,
        summarized_tokens=before - after,
    )


def compaction_system(name: str, platform: str, max_tokens: int) -> str:
    return COMPACTION_RULES.format(name=name, platform=platform, max_words=max(50, max_tokens // 2))


def compaction_messages(
    previous: str | None, plan: CompactionPlan, utc_offset_min: int
) -> tuple[Message, ...]:
    """The part to summarize as one chat log (the bot's own sends and reactions rendered from its turn
    responses), after the previous summary; image parts are left out (their alt texts are in the XML)."""
    parts: list[UserPart] = []
    if previous:
        parts.append(TextPart(text=f"<previous-summary>\n{previous}\n</previous-summary>"))
    log = with_actions(plan.segments, action_segments(plan.turns, utc_offset_min))
    parts.append(TextPart(text="<chat-log>"))
    parts.extend(TextPart(text=s.xml) for s in log)
    parts.append(TextPart(text="</chat-log>"))
    return (UserMessage(parts=tuple(parts)), UserMessage(parts=(TextPart(text=COMPACTION_INSTRUCTION),)))


def summary_message(text: str) -> UserMessage:
    """How the summary heads the primary's history (byte-stable until the next compaction)."""
    return UserMessage(parts=(TextPart(text=f"<summary>\n{text}\n</summary>"),))


def summary_tokens(text: str | None) -> int:
    return text_tokens(text) + 8 if text else 0
