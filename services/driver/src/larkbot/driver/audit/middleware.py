"""The audit trail as middleware of the wake-up interpreter (``wake.middleware``): outermost, it sees
every command and its feedback, and gathers them into the wake-up's :class:`~.core.audit.AuditDraft` —
what the flow read, its path, the probe, the turn's outcome, every tool call and what it delivered, every
stored step.

The model requests (what was asked, its estimate, whether it was sent, the call's latency) are built by
the ports, who hand them back with the answer (``ModelAnswer.asked``); the trail records them.
"""

from __future__ import annotations

from typing import assert_never

from larkbot.driver.tools.core import tools
from larkbot.driver.wake.core.protocol import ModelAnswer, ModelCall, Persist, ToolDone, ToolRun
from larkbot.driver.wake.core.wake import (
    ChatView,
    Note,
    ProbeCall,
    ReadChat,
    StoreProbe,
    WakeCommand,
    WakeFeedback,
)
from larkbot.driver.wake.middleware import Next

from .core.audit import AuditDraft


class AuditTrail:
    def __init__(self, draft: AuditDraft) -> None:
        self.draft = draft

    async def __call__(self, command: WakeCommand, call_next: Next) -> WakeFeedback:
        if isinstance(command, Note):
            self.note(command)
            return await call_next(command)
        feedback = await call_next(command)
        draft = self.draft
        if isinstance(command, ToolRun):
            assert isinstance(feedback, ToolDone)
            remove = bool(command.args.get("remove", False))
            name = command.name
            draft.tool(name, feedback.ok, send=name == tools.SEND, react=name == tools.REACT and not remove)
            if feedback.message_ids:
                draft.delivered(feedback.message_ids, feedback.now_ms)
        elif isinstance(command, ReadChat):
            assert isinstance(feedback, ChatView)
            summary = feedback.summary
            draft.saw(feedback.segments, summary.cursor if summary is not None else None)
        elif isinstance(command, Persist):
            draft.stored(command.record)
        elif isinstance(command, StoreProbe):
            draft.probe = command.record
        elif isinstance(command, ModelCall | ProbeCall):
            assert isinstance(feedback, ModelAnswer)
            self.asked(command, feedback)
        return feedback

    def asked(self, command: ModelCall | ProbeCall, answer: ModelAnswer) -> None:
        asked = answer.asked
        if asked is None:
            return
        draft = self.draft
        step = command.step if isinstance(command, ModelCall) else None
        draft.requested(
            asked.request,
            step=step,
            at_ms=asked.at_ms,
            estimated_tokens=asked.estimated_tokens,
            called=asked.called,
        )
        if asked.answered_itself:
            draft.model_called = False
        if asked.latency_ms is not None:
            if step is None:
                draft.probe_latency_ms = asked.latency_ms
            else:
                draft.primary_call(asked.latency_ms)

    def note(self, note: Note) -> None:
        kind, detail = note.kind, note.detail
        match kind:
            case "path":
                self.draft.path = detail
            case "probe":
                self.draft.probe_error = detail == "error"
            case "turn":
                self.draft.turn_outcome = detail
            case (
                "suppressed"
                | "probe_omitted"
                | "braked"
                | "held"
                | "rate_limited"
                | "recovering"
                | "recovered"
                | "recover_failed"
                | "context_length"
                | "trimmed"
                | "clipped"
                | "gate"
                | "gate_opened"
            ):
                pass
            case _:
                assert_never(kind)
