"""A parameter the model refused (pure): which one, so the gateway can resend without it.

Configuration and family defaults (``LlmEndpoint.accepts``) decide what is sent; this is the safety net
when they are wrong, so that a wrong parameter never costs a turn. It reads an ``invalid_request`` answer
and names the one capability to turn off, and only when the refused thing was actually in the body:

- ``max_tokens`` ↔ ``max_completion_tokens``: OpenAI's "Unsupported parameter: 'max_tokens' is not
  supported with this model. Use 'max_completion_tokens' instead." (and a server refusing the newer name).
- ``temperature``: OpenAI's "Unsupported value: 'temperature' does not support 0.2 with this model",
  Anthropic's "`temperature` may only be set to 1 when thinking is enabled", Kimi's "invalid temperature:
  only 1 is allowed for this model".
- forced ``tool_choice``: Anthropic's "Thinking may not be enabled when tool_choice forces tool use.",
  DashScope's "The tool_choice parameter does not support being set to required or object in thinking
  mode".
- replayed reasoning or provider fields (openai-chat): Groq's "'messages.2' : for 'role:assistant' the
  following must be satisfied[('messages.2' : property 'reasoning' is unsupported)]".

Each resend turns one capability off, so a call resends at most once per capability.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from larkbot.canonical.llm import WireFormat

from .common import Accepts
from .errors import ErrorInfo

_REFUSAL = re.compile(
    r"unsupported|not supported|unknown|unrecognized|not permitted|not allowed|extra inputs"
)
_STANDARD_ASSISTANT_KEYS = frozenset({"role", "content", "tool_calls", "name"})
_STANDARD_CALL_KEYS = frozenset({"id", "type", "function"})


def refused_capability(
    fmt: WireFormat, info: ErrorInfo, sent: dict[str, Any], accepts: Accepts
) -> tuple[str, Accepts] | None:
    """``(what, accepts without it)`` when the error refuses something the body carried."""
    text = info.text()
    if fmt == "openai-chat":
        if "max_tokens" in sent and "max_completion_tokens" in text:
            return "max_tokens", replace(accepts, max_tokens_field="max_completion_tokens")
        if "max_completion_tokens" in sent and "max_completion_tokens" in text and _REFUSAL.search(text):
            return "max_completion_tokens", replace(accepts, max_tokens_field="max_tokens")
    if "temperature" in sent and accepts.temperature and "temperature" in text:
        return "temperature", replace(accepts, temperature=False)
    if accepts.forced_tool_choice and _forces_tool(sent.get("tool_choice")) and "tool_choice" in text:
        return "forced tool_choice", replace(accepts, forced_tool_choice=False)
    if fmt == "openai-chat" and accepts.replay_reasoning and _REFUSAL.search(text):
        for field in sorted(_replayed_fields(sent)):
            if re.search(rf"\b{re.escape(field)}\b", text):
                return f"replayed {field}", replace(accepts, replay_reasoning=False)
    return None


def _forces_tool(choice: Any) -> bool:
    """``any``/``tool`` (Anthropic), ``required`` or a named function (OpenAI formats)."""
    if isinstance(choice, dict):
        return bool(choice.get("type") in ("any", "tool", "function"))
    return bool(choice == "required")


def _replayed_fields(sent: dict[str, Any]) -> set[str]:
    """Non-standard fields of assistant messages and their tool calls: reasoning and provider extras."""
    found: set[str] = set()
    messages = sent.get("messages")
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        found.update(k for k in message if k not in _STANDARD_ASSISTANT_KEYS)
        calls = message.get("tool_calls")
        for call in calls if isinstance(calls, list) else []:
            if isinstance(call, dict):
                found.update(k for k in call if k not in _STANDARD_CALL_KEYS)
    return found
