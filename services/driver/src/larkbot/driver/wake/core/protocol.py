"""What the primary turn generator (:mod:`.turn`) and its runner say to each other: the plan, the commands
the generator yields, the feedback the runner sends back (each stamped with the current time), and the
result. Plain frozen values, no behaviour beyond the idempotency key."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Literal

from larkbot.canonical.llm import (
    LLMError,
    LLMRequest,
    LLMResponse,
    Message,
    ToolChoice,
    ToolSpec,
    UserMessage,
    UserPart,
)

from .budget import TurnBudget
from .records import ChainUsage, TurnRecord

TurnOutcome = Literal["sent", "reacted", "silent", "budget_exhausted", "failed", "interrupted"]


@dataclass(frozen=True, slots=True)
class TurnPlan:
    platform: str
    chat_id: str
    wake_id: str
    chain_id: str
    #: The chain's next step number (0 for a new chain).
    first_step: int
    usage: ChainUsage
    budget: TurnBudget
    react_only: bool
    started_ms: int
    system: str
    history: tuple[Message, ...]
    late_binding: UserMessage
    shell_tools_exposed: bool = False
    #: The memory tools are offered (a per-chat constant: the tool list is part of the cached prefix).
    memory_tools: bool = False
    #: ``ban_spammer`` is offered (the chat's ``ban_spammer_enabled``, a per-chat constant likewise).
    ban_spammer: bool = False
    #: The reminder tools are offered (the chat's ``reminders.enabled``, a per-chat constant likewise).
    reminders: bool = False
    #: A pending (write-ahead) step left by a process that died while running its tools.
    recover: TurnRecord | None = None
    #: Close ``recover`` without running its calls again.
    recover_abandon: bool = False


@dataclass(frozen=True, slots=True)
class ModelCall:
    step: int
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    tool_choice: ToolChoice
    deadline_ms: int


@dataclass(frozen=True, slots=True)
class ToolRun:
    step: int
    call_index: int
    name: str
    args: dict[str, Any]
    idempotency_key: str
    deadline_ms: int


@dataclass(frozen=True, slots=True)
class Persist:
    record: TurnRecord


@dataclass(frozen=True, slots=True)
class CheckInterrupt:
    step: int


Command = ModelCall | ToolRun | Persist | CheckInterrupt


@dataclass(frozen=True, slots=True)
class Asked:
    """A model request as the ports built it, for the audit trail (``audit.middleware``): asked at
    ``at_ms`` with its estimate; ``called`` unless refused or answered by a dry run
    (``answered_itself``); ``latency_ms`` of the call when there was one."""

    request: LLMRequest
    at_ms: int
    estimated_tokens: int
    called: bool
    answered_itself: bool = False
    latency_ms: int | None = None


@dataclass(frozen=True, slots=True)
class ModelAnswer:
    reply: LLMResponse | LLMError
    now_ms: int
    #: The request behind the answer; the ports' answers carry it, a test's made-up one need not.
    asked: Asked | None = None


@dataclass(frozen=True, slots=True)
class ToolDone:
    ok: bool
    parts: tuple[UserPart, ...]
    now_ms: int
    #: The outcome must not be followed up (a send whose delivery is unknown must not be retried).
    final: bool = False
    #: The canonical platform ids of the messages a ``send_message`` created (the request log links them
    #: to the wake-up); the model is shown them in ``parts``.
    message_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Ack:
    now_ms: int
    interrupted: bool = False


Feedback = ModelAnswer | ToolDone | Ack


@dataclass(frozen=True, slots=True)
class TurnResult:
    outcome: TurnOutcome
    steps: int
    chain_open: bool
    error: LLMError | None = None
    deadline_reached: bool = False
    usage: ChainUsage = field(default_factory=ChainUsage)


def idempotency_key(platform: str, chat_id: str, chain_id: str, step: int, call_index: int) -> str:
    """Stable per tool call: a retried request names the same side effect (Feishu ``uuid`` ≤ 50 chars)."""
    digest = hashlib.sha256(f"{platform}\x1f{chat_id}\x1f{chain_id}\x1f{step}\x1f{call_index}".encode())
    return "lb" + digest.hexdigest()[:40]
