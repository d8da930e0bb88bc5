"""What the fake provider answers: a script maps each call to an action.

A script is any ``Callable[[FakeCall], Action]``: a :class:`Sequence` of canned actions, a small rule
function, or :func:`echo` (the default of ``larkbot fake-llm``). Actions:

- :class:`Reply` — an assistant message (text, tool calls, reasoning) with a stop reason and usage. With
  ``usage=None`` the fake computes usage itself, with the cache reads (and Anthropic's writes) a real
  provider would report for the prefix shared with the previous request of the same conversation
  (``cache.py``).
- :class:`Fail` — an HTTP error in the format's own error shape, optionally with ``retry-after``, any
  other headers (``x-should-retry``, rate-limit resets) or a body of its own (a recorded provider error).
- :class:`ContextOverflow` — the format's real "request too long" answer (OpenAI's 400
  ``context_length_exceeded`` or, with ``dialect``, DeepSeek's, vLLM's or the 429 "Request too large …
  TPM"; Anthropic's 400 "prompt is too long: N tokens > M maximum"; the Responses API's 400
  ``context_length_exceeded``), as the fake also sends on its own for any request larger than its
  ``context_window``.
- :class:`Drop` — the connection closes without an answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from larkbot.canonical.llm import (
    AssistantMessage,
    AssistantPart,
    StopReason,
    TextPart,
    ToolCallPart,
    Usage,
    UserMessage,
    WireFormat,
)

from ..core.common import ParsedRequest
from ..core.error_bodies import ContextDialect


@dataclass(frozen=True, slots=True)
class FakeCall:
    """One request the fake received: the raw bytes and headers, and the body read back into IR."""

    index: int
    format: WireFormat
    path: str
    headers: dict[str, str]
    raw: bytes
    body: dict[str, Any]
    request: ParsedRequest

    def last_user_text(self) -> str:
        for message in reversed(self.request.messages):
            if isinstance(message, UserMessage):
                return "".join(p.text for p in message.parts if isinstance(p, TextPart))
        return ""


@dataclass(frozen=True, slots=True)
class Reply:
    parts: tuple[AssistantPart, ...] = ()
    stop_reason: StopReason | None = None
    usage: Usage | None = None
    latency_s: float = 0.0
    usage_style: str = "openai"
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def text(cls, text: str, **kwargs: Any) -> Reply:
        return cls(parts=(TextPart(text=text),), **kwargs)

    @classmethod
    def tool_call(cls, name: str, arguments: dict[str, Any], call_id: str = "call_1", **kwargs: Any) -> Reply:
        part = ToolCallPart(
            id=call_id, name=name, arguments_json=json.dumps(arguments, separators=(",", ":"))
        )
        return cls(parts=(part,), **kwargs)

    def stop(self) -> StopReason:
        if self.stop_reason is not None:
            return self.stop_reason
        return "tool_use" if any(isinstance(p, ToolCallPart) for p in self.parts) else "end_turn"

    def message(self) -> AssistantMessage:
        return AssistantMessage(parts=self.parts)


@dataclass(frozen=True, slots=True)
class Fail:
    """``body`` replaces the generated error body (a recorded provider error, sent as is)."""

    status: int
    message: str = "fake provider error"
    retry_after: str | None = None
    latency_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None


@dataclass(frozen=True, slots=True)
class ContextOverflow:
    """The format's "request too long" error. ``limit`` defaults to the fake's ``context_window``, else
    one token less than the request's estimate; ``dialect`` picks the openai-chat wording."""

    dialect: ContextDialect = "openai"
    limit: int | None = None
    latency_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Drop:
    pass


Action = Reply | Fail | ContextOverflow | Drop
Script = Callable[[FakeCall], Action]


class Sequence:
    """Canned actions in order; when they run out, every further call gets HTTP 500."""

    def __init__(self, actions: Iterable[Action]) -> None:
        self._actions = list(actions)
        self._next = 0

    def __call__(self, call: FakeCall) -> Action:
        if self._next >= len(self._actions):
            return Fail(500, "fake script exhausted")
        action = self._actions[self._next]
        self._next += 1
        return action

    @property
    def remaining(self) -> int:
        return len(self._actions) - self._next


def echo(call: FakeCall) -> Action:
    """A rule good enough for the playground: obey a forced tool choice, else echo the last user text.

    Forced ``any``: ``end_turn`` when offered (silence is the safe default of the driver), else the first
    tool; arguments are ``{}``.
    """
    request = call.request
    names = [tool.name for tool in request.tools]
    if request.tool_choice.mode == "tool" and request.tool_choice.name is not None:
        return Reply.tool_call(request.tool_choice.name, {})
    if request.tool_choice.mode == "any" and names:
        return Reply.tool_call("end_turn" if "end_turn" in names else names[0], {})
    return Reply.text(f"echo: {call.last_user_text()[:200]}")
