"""The driver's copy of a chat's rendered context, kept in step with ``context.*`` updates.

An update applies only on top of the sequence it was built on (``base_seq``); anything else is a gap and
the caller asks ``pipeline.snapshot`` for a full copy. A ``ReplaceOp`` of an unknown segment is a gap too.
Segments too large for the model are clipped as they enter the copy (``core.clip``).

*External input* is what may wake the bot: message and runtime nodes from someone other than the bot.
The bot's own messages and self-sent echoes never wake it; system events (reactions, joins, renames)
are context, not triggers. Neither are messages of the chat's ``blocked_users``: the pipeline renders
them as blocked, and they never wake the bot, cost a probe or interrupt a turn.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from larkbot.canonical.context import AppendOp, ContextSnapshot, ContextUpdate, ReplaceOp, ResetOp, Segment

from .clip import clip_segment


@dataclass(frozen=True, slots=True)
class ChatContext:
    seq: int = 0
    cursor: int = 0
    title: str | None = None
    segments: tuple[Segment, ...] = ()


class Gap(Exception):
    """The update does not apply to what we hold; fetch a snapshot."""


def from_snapshot(snapshot: ContextSnapshot, max_segment_tokens: int) -> ChatContext:
    return ChatContext(
        seq=snapshot.seq,
        cursor=snapshot.cursor,
        title=snapshot.title,
        segments=tuple(clip_segment(s, max_segment_tokens) for s in snapshot.segments),
    )


def is_stale(ctx: ChatContext, update: ContextUpdate) -> bool:
    """Already applied (a redelivery, or an update older than a snapshot we took)."""
    return update.seq <= ctx.seq


def apply_update(ctx: ChatContext, update: ContextUpdate, max_segment_tokens: int) -> ChatContext:
    """Apply ``update`` (raises :class:`Gap` when it does not follow ``ctx``); new segments are clipped to
    ``max_segment_tokens`` (``core.clip``)."""
    if update.base_seq != ctx.seq:
        raise Gap(f"update {update.seq} is based on {update.base_seq}, we hold {ctx.seq}")
    segments = list(ctx.segments)
    for op in update.ops:
        if isinstance(op, AppendOp):
            segments.extend(clip_segment(s, max_segment_tokens) for s in op.segments)
        elif isinstance(op, ReplaceOp):
            index = next((i for i, s in enumerate(segments) if s.segment_id == op.segment.segment_id), None)
            if index is None:
                raise Gap(f"replace of unknown segment in update {update.seq}")
            segments[index] = clip_segment(op.segment, max_segment_tokens)
        elif isinstance(op, ResetOp):
            segments = [clip_segment(s, max_segment_tokens) for s in op.segments]
    title = update.title if update.title is not None else ctx.title
    return replace(ctx, seq=update.seq, cursor=update.cursor, title=title, segments=tuple(segments))


def is_external(segment: Segment, blocked: frozenset[str] = frozenset()) -> bool:
    return (
        segment.node_type in ("message", "runtime")
        and not segment.is_myself
        and not segment.is_self_sent
        and not segment.is_deleted
        and (segment.sender_id is None or segment.sender_id not in blocked)
    )


def new_external(
    before: ChatContext, after: ChatContext, since_ms: int, blocked: frozenset[str] = frozenset()
) -> tuple[Segment, ...]:
    """External segments of ``after`` that ``before`` did not hold and that arrived after ``since_ms``."""
    known = {s.segment_id for s in before.segments}
    return tuple(
        s
        for s in after.segments
        if s.segment_id not in known and is_external(s, blocked) and s.received_at_ms > since_ms
    )


def latest_external_ms(segments: tuple[Segment, ...], blocked: frozenset[str] = frozenset()) -> int:
    return max((s.received_at_ms for s in segments if is_external(s, blocked)), default=0)
