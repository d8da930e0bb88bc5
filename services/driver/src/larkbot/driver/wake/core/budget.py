"""The turn budget (SPEC §4.3): how much one primary turn may do.

Counts (rounds, work-tool calls, send/react attempts) accumulate across an interrupted chain; the
deadline is per wake-up and starts when the primary starts (the probe never consumes it). ``end_turn`` is
exempt from every count.
"""

from __future__ import annotations

from dataclasses import dataclass

from larkbot.runtime.config import ChatSettings

from .records import ChainUsage, StepMode


@dataclass(frozen=True, slots=True)
class TurnBudget:
    max_rounds: int = 2
    max_work_calls: int = 4
    max_participation_attempts: int = 3
    deadline_ms: int = 15_000
    min_model_call_ms: int = 2_000

    @classmethod
    def of(cls, chat: ChatSettings) -> TurnBudget:
        return cls(
            max_rounds=chat.max_tool_rounds,
            max_work_calls=chat.max_work_tool_calls,
            max_participation_attempts=chat.max_send_attempts,
            deadline_ms=round(chat.turn_deadline_s * 1000),
            min_model_call_ms=round(chat.min_model_call_s * 1000),
        )

    def step_mode(self, usage: ChainUsage, react_only: bool) -> StepMode:
        """``react_only`` for an activation that allows only a reaction; ``wrap_up`` once the counts ran
        out (only participation tools, and the chain closes after it); ``normal`` otherwise."""
        if react_only:
            return "react_only"
        if usage.rounds >= self.max_rounds or usage.work_calls >= self.max_work_calls:
            return "wrap_up"
        return "normal"

    def work_call_allowed(self, usage: ChainUsage) -> bool:
        return usage.work_calls < self.max_work_calls

    def participation_allowed(self, usage: ChainUsage) -> bool:
        return usage.participation_attempts < self.max_participation_attempts

    def can_start_model_call(self, started_ms: int, now_ms: int) -> bool:
        return started_ms + self.deadline_ms - now_ms >= self.min_model_call_ms

    def expired(self, started_ms: int, now_ms: int) -> bool:
        return now_ms >= started_ms + self.deadline_ms
