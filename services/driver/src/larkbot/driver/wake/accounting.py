"""What a wake-up adds to the driver's counters: tokens and cache use per model answer, tool calls by tool
and outcome per stored step."""

from __future__ import annotations

from larkbot.canonical.llm import AssistantMessage, LLMResponse, TextPart, ToolCallPart, ToolResultMessage
from larkbot.driver.tools.core import tools

from .. import metrics
from .core.records import TurnRecord


def count_usage(purpose: str, reply: LLMResponse) -> None:
    usage = reply.usage
    for kind, value in (
        ("input", usage.input_tokens),
        ("output", usage.output_tokens),
        ("cache_read", usage.cache_read_tokens),
        ("cache_write", usage.cache_write_tokens),
    ):
        metrics.TOKENS.labels(purpose, kind).inc(value)
    metrics.observe_cache(reply.model_identity, usage.input_tokens, usage.cache_read_tokens)


def count_record(record: TurnRecord) -> None:
    calls = {
        p.id: p.name
        for e in record.entries
        if isinstance(e, AssistantMessage)
        for p in e.parts
        if isinstance(p, ToolCallPart)
    }
    for entry in record.entries:
        if isinstance(entry, ToolResultMessage):
            metrics.TOOL_CALLS.labels(_tool_label(calls.get(entry.tool_call_id, "")), _outcome(entry)).inc()


def _tool_label(name: str) -> str:
    return name if name in tools.SPECS else "other"


def _outcome(result: ToolResultMessage) -> str:
    if not result.is_error:
        return "ok"
    first = result.parts[0] if result.parts else None
    text = first.text if isinstance(first, TextPart) else ""
    if text.startswith("error: unknown tool"):
        return "unknown"
    if text.startswith("error: invalid arguments"):
        return "invalid"
    if text.startswith("not executed"):
        return "not_executed"
    return "error"
