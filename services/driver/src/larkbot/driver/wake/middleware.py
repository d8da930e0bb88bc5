"""Middleware of the wake-up interpreter, the aiogram way: every command the flow yields passes a chain
of middleware before it reaches the ports, and its feedback passes back through them.

One signature, :class:`Middleware`: ``await middleware(command, call_next)`` returns the command's
feedback; a middleware may look at the command, call ``call_next(command)`` (the rest of the chain, then
the port) or answer itself, and look at the feedback. :func:`chain` composes them around the ports once
per wake-up, the first one outermost. The service composes them in one fixed order
(``wake.runner.WakeRunner.run``)::

    trace → audit → dry run → metrics → ports

so the audit trail sees what a dry run withheld, and metrics count only what reached the ports.

- :class:`Tracing` (only while tracing is on) makes a span of each probe, primary step, tool run and
  compaction, with the model and its tokens; the gateway's and the ingress's spans are their children.

- :class:`DryRun` answers the platform actions a dry run withholds — the tools whose ``Tool.dry_run``
  says what to answer instead (their feature's ``core/tools.py``) and the typing indicator — and tells
  who records them (the audit draft's ``withheld``); with ``dry_run_call_model: false`` it answers the
  primary model call too, with ``end_turn`` at no cost (the ports still build the request, for the audit).
- :class:`Metrics` counts wake-up paths, probe decisions, recovered steps, trims, clips, the shell gate,
  turns and their duration, stored turn responses and recalls.
- ``audit.middleware.AuditTrail`` gathers the wake-up's audit record.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Protocol, assert_never

from larkbot.canonical.llm import AssistantMessage, LLMError, LLMResponse, TextPart, ToolCallPart, Usage
from larkbot.driver.tools.core import tools
from larkbot.runtime import tracing

from .. import metrics
from .accounting import count_record
from .clock import Clock
from .core.protocol import ModelAnswer, ModelCall, Persist, ToolDone, ToolRun
from .core.wake import Compact, LoadMemories, Note, ProbeCall, ShowTyping, WakeCommand, WakeFeedback

Next = Callable[[WakeCommand], Awaitable[WakeFeedback]]


class Middleware(Protocol):
    async def __call__(self, command: WakeCommand, call_next: Next) -> WakeFeedback: ...


def chain(handler: Next, middleware: Sequence[Middleware]) -> Next:
    """``handler`` wrapped in ``middleware``, the first one outermost."""
    for m in reversed(middleware):
        handler = partial(m, call_next=handler)
    return handler


#: The model identity of a primary answer a dry run made up instead of calling the model.
DRY_RUN_MODEL = "dry-run"
#: The primary's answer in a dry run that does not call the model: ``end_turn`` at no cost, so the turn
#: ends silent and its chain closes like any other.
DRY_RUN_ANSWER = LLMResponse(
    request_id="dry-run",
    model_identity=DRY_RUN_MODEL,
    message=AssistantMessage(
        parts=(ToolCallPart(id="dry_run_end", name=tools.END, arguments_json="{}"),),
        model_identity=DRY_RUN_MODEL,
    ),
    stop_reason="tool_use",
    usage=Usage(input_tokens=0, output_tokens=0),
    provider_latency_ms=0,
)


class DryRun:
    """Withholds a dry run's platform actions: a withheld tool answers what its ``Tool.dry_run`` says
    (``{id}`` becomes a made-up message id), the typing indicator is not shown. ``withheld`` hears the
    name of each (``typing`` for the indicator), in order. With ``unsent_model`` (the ports'
    ``withheld_model``: ``dry_run_call_model: false``), a primary model call is answered
    :data:`DRY_RUN_ANSWER` without being sent."""

    def __init__(
        self,
        clock: Clock,
        withheld: Callable[[str], None],
        unsent_model: Callable[[ModelCall, LLMResponse], ModelAnswer] | None,
    ) -> None:
        self.clock = clock
        self.withheld = withheld
        self.unsent_model = unsent_model

    async def __call__(self, command: WakeCommand, call_next: Next) -> WakeFeedback:
        if isinstance(command, ModelCall) and self.unsent_model is not None:
            return self.unsent_model(command, DRY_RUN_ANSWER)
        if isinstance(command, ToolRun):
            answer = tools.tool(command.name).dry_run
            if answer is None:
                return await call_next(command)
            self.withheld(command.name)
            ok, text = answer
            fake_id = f"dry-run-{command.step}-{command.call_index}"
            return ToolDone(ok, (TextPart(text=text.format(id=fake_id)),), self.clock.now_ms())
        if isinstance(command, ShowTyping):
            self.withheld("typing")
            return None
        return await call_next(command)


class Metrics:
    """The wake-up's metrics, from its notes and the commands that reached the ports."""

    def __init__(self, wake_kind: str) -> None:
        self.wake_kind = wake_kind
        #: When the primary turn's first model call was asked for; the ``turn`` note observes the span.
        self._turn_started: float | None = None

    async def __call__(self, command: WakeCommand, call_next: Next) -> WakeFeedback:
        if isinstance(command, Note):
            self.note(command)
            return await call_next(command)
        if isinstance(command, ModelCall) and self._turn_started is None:
            self._turn_started = time.perf_counter()
        feedback = await call_next(command)
        if isinstance(command, Persist) and not command.record.pending:
            count_record(command.record)
        elif isinstance(command, LoadMemories):
            metrics.MEMORY_OPS.labels("recall", "ok").inc()
        return feedback

    def note(self, note: Note) -> None:
        kind, detail = note.kind, note.detail
        match kind:
            case "path":
                metrics.WAKEUPS.labels(self.wake_kind, detail).inc()
            case "probe":
                metrics.PROBE_DECISIONS.labels(detail).inc()
            case "recovered":
                metrics.RECOVERED_STEPS.labels(detail).inc()
            case "trimmed":
                metrics.REQUESTS_TRIMMED.inc()
            case "clipped":
                metrics.INPUTS_CLIPPED.inc()
            case "gate":
                metrics.SHELL_GATE.labels(detail).inc()
            case "held":
                metrics.MANNERS_SUPPRESSIONS.labels(detail).inc()
            case "rate_limited":
                scope, _, reason = detail.partition(":")
                metrics.RATE_LIMITED.labels(scope, reason).inc()
            case "turn":
                metrics.TURNS.labels(detail).inc()
                if self._turn_started is not None:
                    metrics.TURN_SECONDS.observe(time.perf_counter() - self._turn_started)
                    self._turn_started = None
            case (
                "suppressed"
                | "probe_omitted"
                | "braked"
                | "recovering"
                | "recover_failed"
                | "context_length"
                | "gate_opened"
            ):
                pass
            case _:
                assert_never(kind)


class Tracing:
    """A span per command that leaves the process or may take long: the probe, each primary step (its
    model call), each tool run, a compaction. Added by the runner only while tracing is on."""

    async def __call__(self, command: WakeCommand, call_next: Next) -> WakeFeedback:
        if isinstance(command, ModelCall):
            with tracing.span("primary step", attributes={"larkbot.step": command.step}) as span:
                feedback = await call_next(command)
                if isinstance(feedback, ModelAnswer):
                    tracing.set_attributes(span, _answered(feedback))
                return feedback
        if isinstance(command, ProbeCall):
            with tracing.span("probe") as span:
                feedback = await call_next(command)
                if isinstance(feedback, ModelAnswer):
                    tracing.set_attributes(span, _answered(feedback))
                return feedback
        if isinstance(command, ToolRun):
            attributes: dict[str, tracing.Value] = {
                "larkbot.step": command.step,
                "larkbot.tool": command.name,
            }
            with tracing.span(f"tool {command.name}", attributes=attributes) as span:
                feedback = await call_next(command)
                if isinstance(feedback, ToolDone):
                    tracing.set_attributes(span, {"larkbot.ok": feedback.ok})
                return feedback
        if isinstance(command, Compact):
            with tracing.span("compact"):
                return await call_next(command)
        return await call_next(command)


def _answered(answer: ModelAnswer) -> dict[str, tracing.Value]:
    reply = answer.reply
    if isinstance(reply, LLMError):
        return {"error.type": reply.category}
    usage = reply.usage
    return {
        "gen_ai.response.model": reply.model_identity,
        "gen_ai.response.finish_reasons": reply.stop_reason,
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        "larkbot.cache_read_tokens": usage.cache_read_tokens,
    }
