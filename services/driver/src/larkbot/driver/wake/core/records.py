"""What the driver remembers: one :class:`TurnRecord` per primary model call, one :class:`ProbeRecord` per
probe. Both are plain frozen values; the SQL repository stores and loads them unchanged.

A *chain* is the sequence of primary steps that follow one another through ``requires_follow_up``; it may
span several wake-ups when new input interrupts it. ``step`` counts from 0 across the whole chain, so
``(chain_id, step)`` names a model call for good (idempotency keys of sends are derived from it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from larkbot.canonical.llm import Message, Usage

StepMode = Literal["normal", "react_only", "wrap_up"]
Decision = Literal["send_message", "react_only", "no_action"]
DECISIONS: tuple[Decision, ...] = ("send_message", "react_only", "no_action")


@dataclass(frozen=True, slots=True)
class TurnRecord:
    platform: str
    chat_id: str
    chain_id: str
    step: int
    wake_id: str
    requested_at_ms: int
    entries: tuple[Message, ...]
    usage: Usage
    model_identity: str
    #: Whether the loop actually continued after this step: steps that close the chain (end_turn, wrap-up,
    #: react_only, deadline, no follow-up) are stored with it cleared, so an open last step means an
    #: interrupted chain.
    requires_follow_up: bool
    shell_tools_exposed: bool
    mode: StepMode
    work_calls: int
    participation_attempts: int
    sent: bool
    reacted: bool
    #: A write-ahead record: the model's answer is stored, its tool calls may or may not have run (see
    #: ``core.turn``). Never part of a prompt; the next wake-up of the chat redoes its calls.
    pending: bool = False
    #: The endpoints that failed before the one that answered the step's model call (``llm.fallbacks``):
    #: another model answered, and the provider's prompt cache started over.
    fallback_from: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ProbeRecord:
    platform: str
    chat_id: str
    wake_id: str
    requested_at_ms: int
    decision: Decision
    reason: str
    #: ``True`` for ``send_message`` and ``react_only``.
    activated: bool
    #: The model's answer was missing or malformed and the gate failed closed.
    failed_closed: bool
    model_identity: str | None
    usage: Usage | None
    window_start: str | None
    omitted: int


@dataclass(frozen=True, slots=True)
class Activation:
    """A probe decision that activated the primary; a transient retry reuses it instead of probing again."""

    decision: Decision
    reason: str


@dataclass(frozen=True, slots=True)
class ChainUsage:
    """Counts of an interruption chain so far (SPEC §4.3: they accumulate across the chain)."""

    rounds: int = 0
    work_calls: int = 0
    participation_attempts: int = 0

    @classmethod
    def of(cls, records: tuple[TurnRecord, ...]) -> ChainUsage:
        return cls(
            rounds=sum(1 for r in records if r.requires_follow_up),
            work_calls=sum(r.work_calls for r in records),
            participation_attempts=sum(r.participation_attempts for r in records),
        )


def open_chain(records: tuple[TurnRecord, ...]) -> tuple[TurnRecord, ...]:
    """The steps of the chain left open by the newest record (empty when the newest step closed it)."""
    if not records or not records[-1].requires_follow_up:
        return ()
    chain_id = records[-1].chain_id
    return tuple(r for r in records if r.chain_id == chain_id)
