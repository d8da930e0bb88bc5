"""Input too large for the model's window even with the rest of the history trimmed away (SPEC §4.5,
"never silent because of size").

A trimmed history (``prompt.select_history``) always keeps the input the wake-up answers: everything from
the oldest unhandled external message on. When that alone does not fit, it is clipped, never dropped:

- the history before it goes (counted in the head's ``<omitted messages="N"/>``);
- every direct address in it (a mention of the bot, a reply to it) and its newest message are kept, then
  the newest of the others that fit the budget; where messages were left out, ``<omitted messages="N"/>``
  stands in their place;
- when the kept direct addresses and the newest message alone exceed the budget, each is clipped
  (``core.clip``) to an equal share of it;
- turn responses (an open chain) are kept whole.

This is the last resort of one wake-up; nothing here is sticky, so requests that needed it do not share a
prefix with the ones before. What fits is decided on estimates, like every other limit.
"""

from __future__ import annotations

from larkbot.canonical.context import Segment

from .clip import clip_segment
from .estimate import segment_tokens
from .prompt import Selected

#: The smallest share a clipped direct address keeps (estimate units).
MIN_CLIP_TOKENS = 64


def _shown_tokens(segment: Segment) -> int:
    # Self-sent echoes are never shown (the turn response holds the send).
    return 0 if segment.is_self_sent else segment_tokens(segment)


def clip_input(selected: Selected, *, start: int, budget_tokens: int) -> Selected:
    """``selected`` with its segments from ``start`` on (the unhandled input) within ``budget_tokens``,
    and none before them (see the module docstring)."""
    before = selected.segments[:start]
    pending = selected.segments[start:]
    if not pending:
        return selected
    last = len(pending) - 1
    pinned = {
        i
        for i, s in enumerate(pending)
        if i == last or (not s.is_self_sent and (s.mentions_me or s.replies_to_me))
    }
    room = budget_tokens - sum(_shown_tokens(pending[i]) for i in pinned)
    kept = set(pinned)
    for i in range(last - 1, -1, -1):
        if i in kept:
            continue
        size = _shown_tokens(pending[i])
        if size <= room:
            kept.add(i)
            room -= size
    share = max(MIN_CLIP_TOKENS, budget_tokens // max(1, len(pinned)))
    segments: list[Segment] = []
    gaps: list[tuple[str, int]] = []
    left_out = 0
    for i, segment in enumerate(pending):
        if i not in kept:
            left_out += 0 if segment.is_self_sent else 1
            continue
        if room < 0 and i in pinned:
            segment = clip_segment(segment, share)
        if left_out and not segment.is_self_sent:
            gaps.append((segment.segment_id, left_out))
            left_out = 0
        segments.append(segment)
    dropped = sum(1 for s in before if not s.is_self_sent)
    return Selected(
        tuple(segments),
        selected.turns,
        selected.omitted + dropped,
        selected.from_ms,
        (*selected.gaps, *gaps),
    )
