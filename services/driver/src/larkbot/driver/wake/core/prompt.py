"""Prompt assembly for the primary turn and the probe (SPEC §4.2, §4.3).

Cache discipline (the prefix of consecutive requests must stay byte-identical):

- The system prompt depends only on the bot's name, the platform and the persona texts.
- The compaction summary (when there is one) heads the history as its own user message; it changes only
  when a compaction moves the cursor. A trimmed history (``select_history``) is headed by an
  ``<omitted messages="N"/>`` marker after it; unhandled input too large even for that (``core.fit``)
  shows the same marker inline where messages were left out.
- The history is the rendered context merged with stored turn responses by time — a segment by its
  ``received_at_ms``, a turn response by its ``requested_at_ms``, the segment first on equal times (role
  alternation), then context order. Consecutive segments form one user message, one part per segment, so
  a new segment appends parts and never rewrites earlier ones. Self-sent segments are dropped: the turn
  response already holds the send.
- Everything that changes on every request (time, participation, probe reason, interruption, the chat's
  running background tasks and pending reminders, the ``<memory>`` block of the people in the
  conversation) is in the late-binding message, always last.

Reasoning is replayed only to the model that produced it and only for the newest ``reasoning_replay``
turn responses (and the open chain); older reasoning is stripped here, stored records stay unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone

from larkbot.canonical.context import Segment
from larkbot.canonical.llm import (
    AssistantMessage,
    Message,
    ReasoningPart,
    TextPart,
    UserMessage,
    UserPart,
)
from larkbot.driver.compaction.core.compaction import summary_message

from .estimate import keep_last_tokens, messages_tokens, segment_tokens
from .participation import Participation
from .records import TurnRecord
from .templates import MEMORY_RULES, PERSONA_HEADER, PRIMARY_RULES, PROBE_RULES
from .window import Window

#: Default cap of the compaction summary in the probe request, outside the window's budget (SPEC §4.2
#: "capped"); chats set ``probe_summary_max_est_tokens``.
PROBE_SUMMARY_MAX_EST_TOKENS = 2000


def system_prompt(name: str, platform: str, personas: Sequence[str], *, memory: bool = False) -> str:
    """Byte-stable per chat: ``memory`` is the chat's setting, never what is remembered."""
    text = PRIMARY_RULES.format(name=name, platform=platform)
    if memory:
        text += MEMORY_RULES
    for persona in personas:
        text += PERSONA_HEADER + persona.strip() + "\n"
    return text


def probe_system_prompt(name: str, platform: str, personas: Sequence[str]) -> str:
    text = PROBE_RULES.format(name=name, platform=platform)
    for persona in personas:
        text += PERSONA_HEADER + persona.strip() + "\n"
    return text


def omitted_marker(count: int) -> str:
    return f'<omitted messages="{count}"/>'


def segment_parts(segment: Segment) -> tuple[UserPart, ...]:
    return (TextPart(text=segment.xml), *segment.image_parts)


def _strip_reasoning(message: Message, model_identity: str, keep: bool) -> Message:
    if not isinstance(message, AssistantMessage):
        return message
    parts = tuple(
        p
        for p in message.parts
        if not isinstance(p, ReasoningPart) or (keep and p.model_identity == model_identity)
    )
    if parts == message.parts and (keep or message.provider_extra is None):
        return message
    extra_kept = keep and message.model_identity == model_identity
    return message.model_copy(
        update={
            "parts": parts,
            "provider_extra": message.provider_extra if extra_kept else None,
            "provider_extra_format": message.provider_extra_format if extra_kept else None,
        }
    )


def merged(
    segments: tuple[Segment, ...], turns: tuple[TurnRecord, ...]
) -> list[tuple[int, int, int, Segment | TurnRecord]]:
    """``(time, kind, index, item)`` in history order: segments by arrival, turn responses by request
    time, a segment first on equal times, then context / storage order. Self-sent echoes are left out."""
    items: list[tuple[int, int, int, Segment | TurnRecord]] = [
        (s.received_at_ms, 0, i, s) for i, s in enumerate(segments) if not s.is_self_sent
    ]
    items += [(t.requested_at_ms, 1, i, t) for i, t in enumerate(turns)]
    items.sort(key=lambda item: (item[0], item[1], item[2]))
    return items


@dataclass(frozen=True, slots=True)
class Selected:
    """The part of the history a trimmed request shows; ``from_ms`` is the sticky start to remember."""

    segments: tuple[Segment, ...]
    turns: tuple[TurnRecord, ...]
    omitted: int
    from_ms: int | None
    #: ``(segment id, N)``: N messages were left out right before that kept segment (``core.fit``).
    gaps: tuple[tuple[str, int], ...] = ()


def select_history(
    segments: tuple[Segment, ...],
    turns: tuple[TurnRecord, ...],
    *,
    budget_tokens: int,
    sticky_from_ms: int | None,
    keep_from_ms: int | None = None,
) -> Selected:
    """The newest part of the history within ``budget_tokens``, for a chat whose history does not fit
    and could not be compacted. Like the probe window, the start is sticky: held while what follows it
    fits the budget, then moved to where half the budget remains, so consecutive requests still share
    their prefix between jumps. Turn responses from ``keep_from_ms`` on (an open chain) are always kept.
    """
    items = merged(segments, turns)
    sizes = [
        segment_tokens(item) if isinstance(item, Segment) else messages_tokens(item.entries)
        for _at, _kind, _i, item in items
    ]
    suffix = [0] * (len(items) + 1)
    for i in range(len(items) - 1, -1, -1):
        suffix[i] = suffix[i + 1] + sizes[i]
    if suffix[0] <= budget_tokens and sticky_from_ms is None:
        return Selected(segments, turns, 0, None)
    latest_start = len(items) - 1 if items else 0
    if keep_from_ms is not None:
        latest_start = min(latest_start, next((i for i, it in enumerate(items) if it[0] >= keep_from_ms), 0))
    sticky = None
    if sticky_from_ms is not None:
        sticky = next((i for i, it in enumerate(items) if it[0] >= sticky_from_ms), None)
    if sticky is not None and suffix[sticky] <= budget_tokens and sticky <= latest_start:
        start = sticky
    else:
        start = next((i for i in range(len(items)) if suffix[i] <= budget_tokens // 2), latest_start)
        start = min(start, latest_start)
    kept = items[start:]
    kept_segments = tuple(item for _a, _k, _i, item in kept if isinstance(item, Segment))
    kept_ids = {id(t) for _a, _k, _i, t in kept if isinstance(t, TurnRecord)}
    omitted = sum(1 for _a, _k, _i, item in items[:start] if isinstance(item, Segment))
    return Selected(
        kept_segments,
        tuple(t for t in turns if id(t) in kept_ids),
        omitted,
        items[start][0] if start < len(items) else None,
    )


def history(
    segments: tuple[Segment, ...],
    turns: tuple[TurnRecord, ...],
    *,
    model_identity: str,
    reasoning_replay: int,
    open_chain_id: str | None = None,
    summary: str | None = None,
    omitted: int = 0,
    gaps: tuple[tuple[str, int], ...] = (),
) -> tuple[Message, ...]:
    """RC merged with turn responses (see the module docstring). ``turns`` are in storage order."""
    replay_from = max(0, len(turns) - reasoning_replay)
    out: list[Message] = []
    if summary:
        out.append(summary_message(summary))
    if omitted:
        out.append(UserMessage(parts=(TextPart(text=omitted_marker(omitted)),)))
    gap_before = dict(gaps)
    pending: list[UserPart] = []
    for _at, _kind, index, item in merged(segments, turns):
        if isinstance(item, Segment):
            if (gap := gap_before.get(item.segment_id)) is not None:
                pending.append(TextPart(text=omitted_marker(gap)))
            pending.extend(segment_parts(item))
            continue
        if pending:
            out.append(UserMessage(parts=tuple(pending)))
            pending = []
        keep = index >= replay_from or item.chain_id == open_chain_id
        out.extend(_strip_reasoning(m, model_identity, keep) for m in item.entries)
    if pending:
        out.append(UserMessage(parts=tuple(pending)))
    return tuple(out)


def format_time(now_ms: int, utc_offset_min: int) -> str:
    tz = timezone(timedelta(minutes=utc_offset_min))
    local = datetime.fromtimestamp(now_ms / 1000, tz=UTC).astimezone(tz)
    sign = "+" if utc_offset_min >= 0 else "-"
    hours, minutes = divmod(abs(utc_offset_min), 60)
    return f"{local:%Y-%m-%d %H:%M:%S} {sign}{hours:02d}:{minutes:02d} ({local:%A})"


def _stats_lines(stats: Participation) -> list[str]:
    since = (
        "never"
        if stats.seconds_since_last_self_message is None
        else str(stats.seconds_since_last_self_message)
    )
    return [
        f"Your messages in the last 10 minutes: {stats.recent_self_messages_10m}",
        f"Seconds since your last message: {since}",
        f"Consecutive bot exchanges: {stats.consecutive_bot_exchanges}",
    ]


@dataclass(frozen=True, slots=True)
class ActiveTask:
    """A background task of the chat still running."""

    task_id: str
    intention: str | None
    started_at_ms: int


def _task_line(task: ActiveTask, now_ms: int) -> str:
    minutes, seconds = divmod(max(0, now_ms - task.started_at_ms) // 1000, 60)
    what = f" ({task.intention})" if task.intention else ""
    return f"- {task.task_id}{what}, running for {minutes}m{seconds:02d}s"


def late_binding(
    *,
    now_ms: int,
    utc_offset_min: int,
    stats: Participation,
    probe_reason: str | None,
    interrupted: bool,
    react_only: bool,
    memory_block: str | None = None,
    active_tasks: Sequence[ActiveTask] = (),
    guidance: Sequence[str] = (),
    reminders: Sequence[str] = (),
) -> UserMessage:
    """``guidance``: the chat's manners (``manners.core``), after the participation signals;
    ``reminders``: the chat's pending reminders (``reminders.core``), after its running tasks."""
    lines = [f"Current time: {format_time(now_ms, utc_offset_min)}", *_stats_lines(stats), *guidance]
    if active_tasks:
        lines.append("Your background tasks still running (their completion arrives as a runtime event):")
        lines.extend(_task_line(t, now_ms) for t in active_tasks)
    lines.extend(reminders)
    if memory_block:
        lines.append(memory_block)
    if probe_reason:
        lines.append(f"Why you were woken: {probe_reason}")
    if interrupted:
        lines.append(
            "Your previous turn was interrupted (by new messages, or a restart); its tool results are "
            "above. Continue from there, taking any new messages into account."
        )
    if react_only:
        lines.append("This turn allows only a reaction (react) or ending your turn (end_turn).")
    body = "\n".join(lines)
    return UserMessage(parts=(TextPart(text=f"<late-binding>\n{body}\n</late-binding>"),))


def probe_messages(
    window: Window,
    summary: str | None,
    *,
    now_ms: int,
    utc_offset_min: int,
    stats: Participation,
    summary_max_est_tokens: int = PROBE_SUMMARY_MAX_EST_TOKENS,
    guidance: Sequence[str] = (),
) -> tuple[Message, ...]:
    """The probe's window, preceded by the compaction summary. The summary sits outside the window's
    budget, capped at ``summary_max_est_tokens``; its newest part is kept (a summary runs oldest first)."""
    parts: list[UserPart] = []
    if summary:
        capped = keep_last_tokens(summary, summary_max_est_tokens)
        parts.append(TextPart(text=f"<summary>\n{capped}\n</summary>"))
    for segment in window.pinned:
        parts.extend(segment_parts(segment))
    if window.omitted:
        parts.append(TextPart(text=omitted_marker(window.omitted)))
    for segment in window.tail:
        parts.extend(segment_parts(segment))
    if not parts:
        parts.append(TextPart(text="<chat-log/>"))
    lines = [f"Current time: {format_time(now_ms, utc_offset_min)}", *_stats_lines(stats), *guidance]
    lines.append("Decide now with the decide tool.")
    body = "\n".join(lines)
    return (
        UserMessage(parts=tuple(parts)),
        UserMessage(parts=(TextPart(text=f"<late-binding>\n{body}\n</late-binding>"),)),
    )
