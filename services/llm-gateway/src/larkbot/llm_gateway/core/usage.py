"""Token usage, normalized: ``input_tokens`` is every billable input token, cache reads and writes included.

- openai-chat: ``prompt_tokens`` is already the total; cache reads are
  ``prompt_tokens_details.cached_tokens`` or DeepSeek's ``prompt_cache_hit_tokens``; no cache writes.
- anthropic-messages: ``input_tokens`` is the uncached part only; the total adds
  ``cache_read_input_tokens`` (reads) and ``cache_creation_input_tokens`` (writes).
- responses: ``input_tokens`` is the total; cache reads are ``input_tokens_details.cached_tokens``.

Reasoning tokens are reported by openai-chat (``completion_tokens_details.reasoning_tokens``) and responses
(``output_tokens_details.reasoning_tokens``); they are already part of the output count. A provider that
reports more cached tokens than input (seen with proxies) is clamped so the invariant holds.
"""

from __future__ import annotations

from typing import Any, Literal

from larkbot.canonical.llm import Usage

from .common import as_int

OpenAIUsageStyle = Literal["openai", "deepseek"]


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


def _reasoning(details: dict[str, Any]) -> int | None:
    value = details.get("reasoning_tokens")
    return as_int(value) if value is not None else None


def from_openai_chat(raw: dict[str, Any]) -> Usage:
    prompt = as_int(raw.get("prompt_tokens"))
    read = as_int(_details(raw, "prompt_tokens_details").get("cached_tokens"))
    if "prompt_cache_hit_tokens" in raw:
        read = as_int(raw.get("prompt_cache_hit_tokens"))
    completion = _details(raw, "completion_tokens_details")
    return _usage(prompt, as_int(raw.get("completion_tokens")), read, 0, _reasoning(completion))


def to_openai_chat(usage: Usage, style: OpenAIUsageStyle = "openai") -> dict[str, Any]:
    out: dict[str, Any] = {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }
    if style == "deepseek":
        out["prompt_cache_hit_tokens"] = usage.cache_read_tokens
        out["prompt_cache_miss_tokens"] = usage.input_tokens - usage.cache_read_tokens
    else:
        out["prompt_tokens_details"] = {"cached_tokens": usage.cache_read_tokens}
    if usage.reasoning_tokens is not None:
        out["completion_tokens_details"] = {"reasoning_tokens": usage.reasoning_tokens}
    return out


def from_anthropic(raw: dict[str, Any]) -> Usage:
    read = as_int(raw.get("cache_read_input_tokens"))
    write = as_int(raw.get("cache_creation_input_tokens"))
    uncached = as_int(raw.get("input_tokens"))
    return _usage(uncached + read + write, as_int(raw.get("output_tokens")), read, write, None)


def to_anthropic(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
        "output_tokens": usage.output_tokens,
    }


def from_responses(raw: dict[str, Any]) -> Usage:
    read = as_int(_details(raw, "input_tokens_details").get("cached_tokens"))
    reasoning = _reasoning(_details(raw, "output_tokens_details"))
    return _usage(as_int(raw.get("input_tokens")), as_int(raw.get("output_tokens")), read, 0, reasoning)


def to_responses(usage: Usage) -> dict[str, Any]:
    out: dict[str, Any] = {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cache_read_tokens},
        "output_tokens": usage.output_tokens,
    }
    if usage.reasoning_tokens is not None:
        out["output_tokens_details"] = {"reasoning_tokens": usage.reasoning_tokens}
    out["total_tokens"] = usage.input_tokens + usage.output_tokens
    return out
