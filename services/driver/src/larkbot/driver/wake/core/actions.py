"""The bot's own recent actions, rendered from its stored turn responses for prompts that do not carry the
turns themselves: the probe (so it can judge "already answered" before the platform's echo of the send
arrives) and the compaction request (so the summary knows what the bot said and did).

Each successful ``send_message`` / ``react`` becomes one segment, timed at the model call that made it:
``<my-action type="send_message" t="MM-DD HH:MM:SS" reply_to="…">text</my-action>`` or
``<my-action type="react" t="…" message_id="…" emoji="…" removed="true"/>``. Failed calls are left out:
they changed nothing anyone can see. The segments are built here (never by the pipeline), so their ids are
prefixed ``action:`` and they are system-like (``node_type="event"``): never external input.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from xml.sax.saxutils import escape, quoteattr

from larkbot.canonical.context import Segment
from larkbot.canonical.llm import AssistantMessage, ToolCallPart, ToolResultMessage
from larkbot.driver.tools.core import tools

from .records import TurnRecord


def short_time(at_ms: int, utc_offset_min: int) -> str:
    """``MM-DD HH:MM:SS`` in chat-local time, as the rendered context writes ``t``."""
    local = datetime.fromtimestamp(at_ms // 1000, tz=UTC).astimezone(
        timezone(timedelta(minutes=utc_offset_min))
    )
    return f"{local:%m-%d %H:%M:%S}"


def _render(call: ToolCallPart, at: str) -> str | None:
    try:
        args = json.loads(call.arguments_json)
    except ValueError:
        return None
    if not isinstance(args, dict):
        return None
    if call.name == tools.SEND and isinstance(args.get("text"), str):
        reply = f" reply_to={quoteattr(str(args['reply_to']))}" if args.get("reply_to") else ""
        return f'<my-action type="send_message" t="{at}"{reply}>{escape(args["text"])}</my-action>'
    if call.name == tools.REACT and args.get("message_id") and args.get("emoji"):
        removed = ' removed="true"' if args.get("remove") else ""
        return (
            f'<my-action type="react" t="{at}" message_id={quoteattr(str(args["message_id"]))} '
            f"emoji={quoteattr(str(args['emoji']))}{removed}/>"
        )
    return None


def action_segments(turns: tuple[TurnRecord, ...], utc_offset_min: int) -> tuple[Segment, ...]:
    """One segment per successful participation call of ``turns`` (storage order), pending steps
    excluded (their outcome is not known yet)."""
    out: list[Segment] = []
    for turn in turns:
        if turn.pending or not (turn.sent or turn.reacted):
            continue
        ok = {m.tool_call_id for m in turn.entries if isinstance(m, ToolResultMessage) and not m.is_error}
        at = short_time(turn.requested_at_ms, utc_offset_min)
        for message in turn.entries:
            if not isinstance(message, AssistantMessage):
                continue
            for index, part in enumerate(message.parts):
                if not isinstance(part, ToolCallPart) or part.id not in ok:
                    continue
                xml = _render(part, at)
                if xml is None:
                    continue
                out.append(
                    Segment(
                        segment_id=f"action:{turn.chain_id}:{turn.step}:{index}",
                        node_type="event",
                        event_seq=1,
                        xml=xml,
                        received_at_ms=turn.requested_at_ms,
                        timestamp_sec=turn.requested_at_ms / 1000,
                        is_myself=True,
                    )
                )
    return tuple(out)


def with_actions(segments: tuple[Segment, ...], actions: tuple[Segment, ...]) -> tuple[Segment, ...]:
    """``segments`` without self-sent echoes, merged with ``actions`` by time (a segment first on equal
    times, then context order), as the primary's history orders segments and turn responses."""
    items = [(s.received_at_ms, 0, i, s) for i, s in enumerate(segments) if not s.is_self_sent]
    items += [(a.received_at_ms, 1, i, a) for i, a in enumerate(actions)]
    items.sort(key=lambda item: (item[0], item[1], item[2]))
    return tuple(item[3] for item in items)
