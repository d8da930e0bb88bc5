"""The probe's bounded, cache-stable window (SPEC §4.2).

The window must reach back at least to the bot's last real action (its latest own message or a turn that
sent or reacted), so an unanswered address cannot be judged away. Within the budget it may show earlier
context. Its start is *sticky*: held while the slice grows from half the budget to the budget, then jumps
forward to restore the half-budget target, so consecutive probe prompts share their prefix between jumps.

When the unprocessed input alone exceeds the budget, the newest part is kept (start sticky as above) plus
every direct address since the last action (``mentions_me`` / ``replies_to_me``), pinned regardless of
age, and an ``<omitted messages="N"/>`` marker records what was left out.

Every comparison is on segment positions of the current context; the sticky start is remembered by
segment id, and forgotten when that segment left the context (compaction).
"""

from __future__ import annotations

from dataclasses import dataclass

from larkbot.canonical.context import Segment

from .estimate import segment_tokens


@dataclass(frozen=True, slots=True)
class Window:
    #: Pinned direct addresses from the omitted part, in context order.
    pinned: tuple[Segment, ...]
    #: Segments left out between the mandatory start and the tail (0: nothing omitted).
    omitted: int
    tail: tuple[Segment, ...]
    #: The segment id to hold as the sticky start next time.
    start_id: str | None

    @property
    def segments(self) -> tuple[Segment, ...]:
        return (*self.pinned, *self.tail)


def _suffix_tokens(segments: tuple[Segment, ...]) -> list[int]:
    """``out[i]`` = estimated tokens of ``segments[i:]``; ``out[len]`` = 0."""
    out = [0] * (len(segments) + 1)
    for i in range(len(segments) - 1, -1, -1):
        out[i] = out[i + 1] + segment_tokens(segments[i])
    return out


def _half_budget_start(suffix: list[int], lo: int, budget: int) -> int:
    """The earliest index ≥ ``lo`` whose suffix fits in half the budget (the last segment always fits)."""
    n = len(suffix) - 1
    for i in range(lo, n):
        if suffix[i] <= budget // 2:
            return i
    return max(lo, n - 1) if n else 0


def select_window(
    segments: tuple[Segment, ...], last_action_ms: int, budget_tokens: int, sticky_id: str | None
) -> Window:
    if not segments:
        return Window((), 0, (), None)
    suffix = _suffix_tokens(segments)
    # The mandatory start: the first segment after the bot's last action.
    mandatory = next((i for i, s in enumerate(segments) if s.received_at_ms > last_action_ms), len(segments))
    sticky = next((i for i, s in enumerate(segments) if s.segment_id == sticky_id), None)
    if suffix[mandatory] <= budget_tokens:
        if sticky is not None and sticky <= mandatory and suffix[sticky] <= budget_tokens:
            start = sticky
        else:
            start = min(_half_budget_start(suffix, 0, budget_tokens), mandatory)
        return Window((), 0, segments[start:], segments[start].segment_id if start < len(segments) else None)

    # Overflow: unprocessed input alone exceeds the budget.
    def pinned_before(start: int) -> tuple[Segment, ...]:
        return tuple(s for s in segments[mandatory:start] if s.mentions_me or s.replies_to_me)

    def size(start: int) -> int:
        return suffix[start] + sum(segment_tokens(s) for s in pinned_before(start))

    if sticky is not None and sticky > mandatory and size(sticky) <= budget_tokens:
        start = sticky
    else:
        # The newest segment is always shown, even when it alone exceeds the budget (it is clipped as it
        # enters the driver's context, ``core.clip``, so that happens only with a budget below the cap).
        start = _half_budget_start(suffix, min(mandatory + 1, len(segments) - 1), budget_tokens)
    pinned = pinned_before(start)
    omitted = start - mandatory - len(pinned)
    return Window(pinned, omitted, segments[start:], segments[start].segment_id)
