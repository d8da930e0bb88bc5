"""The audit trail as middleware of the wake-up interpreter (``wake.middleware``): outermost, it sees
every command and its feedback, and gathers them into the wake-up's :class:`~.core.audit.AuditDraft` —
what the flow read, its path, the probe, the turn's outcome, every tool call and what it delivered, every
stored step.

The model requests (what was asked, its estimate, whether it was sent, the call's latency) are recorded
by the ports that build them (``wake.runner``): only they see the request on the wire.
"""

from __future__ import annotations

from typing import assert_never

from larkbot.driver.tools.core import tools
from larkbot.driver.wake.core.protocol import Persist, ToolDone, ToolRun
from larkbot.driver.wake.core.wake import ChatView, Note, ReadChat, StoreProbe, WakeCommand, WakeFeedback
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
            draft.saw(feedback.segments)
        elif isinstance(command, Persist):
            draft.stored(command.record)
        elif isinstance(command, StoreProbe):
            draft.probe = command.record
        return feedback

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
