"""Builders of synthetic rendered context and model answers, shared by tests, the benchmark and the
playground. Pure: no I/O. The XML imitates the pipeline's vocabulary closely enough for sizes and ids;
it is not the renderer."""

from __future__ import annotations

import json
from typing import Any
from xml.sax.saxutils import escape as xml_escape
from xml.sax.saxutils import quoteattr

from larkbot.canonical.context import Segment
from larkbot.canonical.events import RuntimeEvent
from larkbot.canonical.llm import AssistantMessage, LLMResponse, TextPart, ToolCallPart, Usage

MODEL = "fake-model"


def segment(
    n: int,
    *,
    sender: str = "ou_alice",
    name: str = "Alice",
    at_ms: int = 1_700_000_000_000,
    text: str | None = None,
    myself: bool = False,
    self_sent: bool = False,
    bot: bool = False,
    mentions_me: bool = False,
    replies_to_me: bool = False,
    node_type: str = "message",
    forwarded: bool = False,
    reply_to: str | None = None,
    deleted: bool = False,
) -> Segment:
    """Message ``n`` (segment and message id ``om_<n>``, alias ``m<n>``) sent by ``sender`` at ``at_ms``."""
    body = xml_escape(text if text is not None else f"message number {n}")
    flags = (' bot="true"' if bot else "") + (' myself="true"' if myself else "")
    if forwarded:
        flags = ' forwarded_from="Someone"' + flags
    if deleted:
        flags += ' deleted="true"'
    if reply_to is not None:
        body = f'<in-reply-to id="m{reply_to.removeprefix("om_")}"/>{body}'
    if node_type == "message" and deleted:
        xml = f"<message id={quoteattr(f'm{n}')} sender={quoteattr(name)}{flags}/>"
    elif node_type == "message":
        xml = f"<message id={quoteattr(f'm{n}')} sender={quoteattr(name)}{flags}>{body}</message>"
    else:
        xml = f'<runtime-event type="task_done">{body}</runtime-event>'
    return Segment(
        segment_id=f"om_{n}",
        node_type="message" if node_type == "message" else "runtime",
        event_seq=n,
        xml=xml,
        received_at_ms=at_ms,
        timestamp_sec=at_ms / 1000,
        sender_id=sender if node_type == "message" else None,
        message_id=f"om_{n}" if node_type == "message" else None,
        is_myself=myself,
        is_self_sent=self_sent,
        is_bot=bot,
        is_deleted=deleted,
        is_forwarded=forwarded,
        reply_to_message_id=reply_to,
        mentions_me=mentions_me,
        replies_to_me=replies_to_me,
    )


def runtime_segment(event: RuntimeEvent, n: int) -> Segment:
    """A runtime event as the pipeline renders it (``<runtime-event type t? …attributes>text``); its
    segment id is ``rt_<n>``."""
    attributes = "".join(f" {key}={quoteattr(value)}" for key, value in event.attributes)
    body = xml_escape(event.text) if event.text else None
    head = f"<runtime-event type={quoteattr(event.type)}{attributes}"
    return Segment(
        segment_id=f"rt_{n}",
        node_type="runtime",
        event_seq=1_000_000 + n,
        xml=f"{head}>{body}</runtime-event>" if body else f"{head}/>",
        received_at_ms=event.received_at_ms,
        timestamp_sec=event.timestamp_sec,
        sender_id=None,
        message_id=None,
        is_myself=False,
        is_self_sent=False,
        is_bot=False,
        is_deleted=False,
        is_forwarded=False,
        reply_to_message_id=None,
        mentions_me=False,
        replies_to_me=False,
    )


def tool_call(name: str, call_id: str = "call_1", **args: Any) -> ToolCallPart:
    return ToolCallPart(id=call_id, name=name, arguments_json=json.dumps(args, ensure_ascii=False))


def response(
    *calls: ToolCallPart,
    request_id: str = "r",
    text: str | None = None,
    usage: Usage | None = None,
    model: str = MODEL,
) -> LLMResponse:
    parts: list[TextPart | ToolCallPart] = [TextPart(text=text)] if text else []
    parts.extend(calls)
    return LLMResponse(
        request_id=request_id,
        model_identity=model,
        message=AssistantMessage(parts=tuple(parts), model_identity=model),
        stop_reason="tool_use" if calls else "end_turn",
        usage=usage or Usage(input_tokens=100, output_tokens=10, cache_read_tokens=80),
        provider_latency_ms=1,
    )
