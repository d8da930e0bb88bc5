"""Token usage, normalized: ``input_tokens`` is every billable input token, cache reads and writes included;
``output_tokens`` is every generated token, reasoning included.

- openai-chat: ``prompt_tokens`` is already the total input. Cache reads are
  ``prompt_tokens_details.cached_tokens`` or DeepSeek's ``prompt_cache_hit_tokens``; cache writes are
  ``prompt_tokens_details.cache_write_tokens`` (OpenRouter; OpenAI from the GPT-5.6 family on), part of
  ``prompt_tokens`` as well. Reasoning is ``completion_tokens_details.reasoning_tokens``.
- anthropic-messages: ``input_tokens`` is the uncached part only; the total adds
  ``cache_read_input_tokens`` (reads) and ``cache_creation_input_tokens`` (writes). ``output_tokens``
  includes thinking; its share is ``output_tokens_details.thinking_tokens``.
- responses: ``input_tokens`` is the total, with ``input_tokens_details.cached_tokens`` (reads) and
  ``input_tokens_details.cache_write_tokens`` (writes); reasoning is
  ``output_tokens_details.reasoning_tokens``.

Reasoning inside or beside the output count: OpenAI counts reasoning inside ``completion_tokens`` /
``output_tokens`` (``total = prompt + completion``); xAI and Gemini's compatibility endpoint count it
beside them (``total = prompt + completion + reasoning``), and Gemini at times reports no reasoning field
at all (``total = prompt + completion + hidden thinking``). The reported total decides, in both OpenAI
formats: what it holds beyond ``prompt + completion`` is added to the output. It is the reasoning share
when a reasoning detail equals it; otherwise (no detail, or one inside the output count) it is reasoning
besides, added to the detail. Without a total, or with none above the sum, OpenAI's rule holds and
nothing is added. Anthropic reports no total; its ``output_tokens`` include thinking.

A provider that reports more cached tokens than input (seen with proxies) is clamped so the invariant holds.
"""

from __future__ import annotations

from typing import Any, Literal

from larkbot.canonical.llm import Usage

from .common import as_int

#: How the fake provider spells openai-chat usage: OpenAI's, DeepSeek's cache fields, xAI's reasoning
#: beside ``completion_tokens``, or Gemini's reasoning beside it with no reasoning field (only the total
#: shows it).
OpenAIUsageStyle = Literal["openai", "deepseek", "xai", "gemini"]


def _usage(input_tokens: int, output: int, read: int, write: int, reasoning: int | None) -> Usage:
    input_tokens = max(input_tokens, read + write)
    return Usage(
        input_tokens=input_tokens,
        output_tokens=output,
        cache_read_tokens=read,
        cache_write_tokens=write,
        reasoning_tokens=reasoning,
    )


def _details(raw: dict[str, Any], key: str) -> dict[str, Any]:
    found = raw.get(key)
    return found if isinstance(found, dict) else {}


def _reasoning(details: dict[str, Any], key: str = "reasoning_tokens") -> int | None:
    value = details.get(key)
    return as_int(value) if value is not None else None


def _output(
    raw: dict[str, Any], prompt: int, completion: int, reasoning: int | None
) -> tuple[int, int | None]:
    """Output and reasoning counts, read against the provider's ``total_tokens``: what the total holds
    beyond ``prompt + completion`` was generated too, and is reasoning the output count left out."""
    total = raw.get("total_tokens")
    if not isinstance(total, int) or isinstance(total, bool):
        return completion, reasoning
    hidden = total - prompt - completion
    if hidden <= 0:
        return completion, reasoning
    if reasoning == hidden:  # the detail explains the difference: reasoning beside the output (xAI)
        return completion + hidden, reasoning
    # No detail, or one that does not explain it: the detail is inside the output count (OpenAI's
    # convention) and the difference is reasoning besides. Gemini's compatibility endpoint sends
    # total 109 = 35 prompt + 12 completion + 62 thinking, with no reasoning field at all.
    output = completion + hidden
    return output, min((reasoning or 0) + hidden, output)


def from_openai_chat(raw: dict[str, Any]) -> Usage:
    prompt = as_int(raw.get("prompt_tokens"))
    details = _details(raw, "prompt_tokens_details")
    read = as_int(details.get("cached_tokens"))
    if "prompt_cache_hit_tokens" in raw:
        read = as_int(raw.get("prompt_cache_hit_tokens"))
    write = as_int(details.get("cache_write_tokens"))
    completion = as_int(raw.get("completion_tokens"))
    output, reasoning = _output(
        raw, prompt, completion, _reasoning(_details(raw, "completion_tokens_details"))
    )
    return _usage(prompt, output, read, write, reasoning)


def to_openai_chat(usage: Usage, style: OpenAIUsageStyle = "openai") -> dict[str, Any]:
    completion = usage.output_tokens
    if style in ("xai", "gemini") and usage.reasoning_tokens:
        completion = max(0, usage.output_tokens - usage.reasoning_tokens)
    out: dict[str, Any] = {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": completion,
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }
    if style == "deepseek":
        out["prompt_cache_hit_tokens"] = usage.cache_read_tokens
        out["prompt_cache_miss_tokens"] = usage.input_tokens - usage.cache_read_tokens
    else:
        details: dict[str, Any] = {"cached_tokens": usage.cache_read_tokens}
        if usage.cache_write_tokens:
            details["cache_write_tokens"] = usage.cache_write_tokens
        out["prompt_tokens_details"] = details
    if usage.reasoning_tokens is not None and style != "gemini":
        out["completion_tokens_details"] = {"reasoning_tokens": usage.reasoning_tokens}
    return out


def from_anthropic(raw: dict[str, Any]) -> Usage:
    read = as_int(raw.get("cache_read_input_tokens"))
    write = as_int(raw.get("cache_creation_input_tokens"))
    uncached = as_int(raw.get("input_tokens"))
    thinking = _reasoning(_details(raw, "output_tokens_details"), "thinking_tokens")
    return _usage(uncached + read + write, as_int(raw.get("output_tokens")), read, write, thinking)


def to_anthropic(usage: Usage) -> dict[str, Any]:
    out: dict[str, Any] = {
        "input_tokens": usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
        "output_tokens": usage.output_tokens,
    }
    if usage.reasoning_tokens is not None:
        out["output_tokens_details"] = {"thinking_tokens": usage.reasoning_tokens}
    return out


def sum_anthropic(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """The usage of two calls of one paused turn: every count added (both calls are billed)."""
    out: dict[str, Any] = {}
    for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens"):
        out[key] = as_int(first.get(key)) + as_int(second.get(key))
    thinking = [_reasoning(_details(u, "output_tokens_details"), "thinking_tokens") for u in (first, second)]
    if any(t is not None for t in thinking):
        out["output_tokens_details"] = {"thinking_tokens": sum(t or 0 for t in thinking)}
    return out


def from_responses(raw: dict[str, Any]) -> Usage:
    details = _details(raw, "input_tokens_details")
    read = as_int(details.get("cached_tokens"))
    write = as_int(details.get("cache_write_tokens"))
    prompt = as_int(raw.get("input_tokens"))
    reported = _reasoning(_details(raw, "output_tokens_details"))
    output, reasoning = _output(raw, prompt, as_int(raw.get("output_tokens")), reported)
    return _usage(prompt, output, read, write, reasoning)


def to_responses(usage: Usage) -> dict[str, Any]:
    details: dict[str, Any] = {"cached_tokens": usage.cache_read_tokens}
    if usage.cache_write_tokens:
        details["cache_write_tokens"] = usage.cache_write_tokens
    out: dict[str, Any] = {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": details,
        "output_tokens": usage.output_tokens,
    }
    if usage.reasoning_tokens is not None:
        out["output_tokens_details"] = {"reasoning_tokens": usage.reasoning_tokens}
    out["total_tokens"] = usage.input_tokens + usage.output_tokens
    return out
