"""The interpreter's middleware: one signature, composed in one order; what each takes from the flow."""

from __future__ import annotations

from prometheus_client import REGISTRY

from larkbot.canonical.llm import LLMRequest, LLMResponse, TextPart, ToolCallPart, UserMessage
from larkbot.driver.audit.core.audit import AuditDraft
from larkbot.driver.audit.middleware import AuditTrail
from larkbot.driver.tools.core import tools
from larkbot.driver.wake.clock import ManualClock
from larkbot.driver.wake.core.protocol import Asked, ModelAnswer, ModelCall, ToolDone, ToolRun
from larkbot.driver.wake.core.wake import Note, ShowTyping, WakeCommand, WakeFeedback
from larkbot.driver.wake.middleware import DRY_RUN_MODEL, DryRun, Metrics, Middleware, Next, chain


def _run(name: str, **args: object) -> ToolRun:
    return ToolRun(step=1, call_index=0, name=name, args=dict(args), idempotency_key="k", deadline_ms=9_000)


class _Ports:
    """The end of the chain: what reached it, and a delivered send."""

    def __init__(self) -> None:
        self.reached: list[WakeCommand] = []

    async def __call__(self, command: WakeCommand) -> WakeFeedback:
        self.reached.append(command)
        if isinstance(command, ToolRun):
            return ToolDone(True, (TextPart(text="sent (id m1)"),), 5, message_ids=("m1",))
        return None


def _draft(dry_run: bool) -> AuditDraft:
    return AuditDraft("feishu", "c1", "w1", "debounced", 0, dry_run)


async def test_the_first_middleware_is_outermost() -> None:
    seen: list[str] = []

    def named(name: str) -> Middleware:
        async def middleware(command: WakeCommand, call_next: Next) -> WakeFeedback:
            seen.append(f"{name}>")
            feedback = await call_next(command)
            seen.append(f"<{name}")
            return feedback

        return middleware

    ports = _Ports()
    await chain(ports, [named("a"), named("b")])(Note("braked"))
    assert seen == ["a>", "b>", "<b", "<a"]
    assert ports.reached == [Note("braked")]


async def test_a_dry_run_withholds_actions_and_the_audit_trail_sees_it() -> None:
    draft, ports = _draft(True), _Ports()
    run = chain(
        ports, [AuditTrail(draft), DryRun(ManualClock(7), draft.withheld.append, None), Metrics("debounced")]
    )

    sent = await run(_run(tools.SEND, text="hi"))
    await run(ShowTyping(3))
    read = await run(_run(tools.READ_IMAGE, file_id="m:0", detail="low"))

    assert isinstance(sent, ToolDone)
    assert sent.parts == (TextPart(text="sent (id dry-run-1-0); dry run: nothing was posted to the chat"),)
    assert sent.now_ms == 7
    assert isinstance(read, ToolDone)
    assert [type(c) for c in ports.reached] == [ToolRun]  # only the read reached the ports
    assert draft.withheld == [tools.SEND, "typing"]
    assert draft.tool_calls == {tools.SEND: 1, tools.READ_IMAGE: 1}
    assert draft.sends == 1
    # The made-up send delivered nothing; the read's ports answered with a delivered id.
    assert [m.message_id for m in draft.sent] == ["m1"]


async def test_a_dry_run_that_does_not_call_the_model_answers_the_primary_itself() -> None:
    """``dry_run_call_model: false``: the primary call never reaches the ports; the request the ports built
    for it reaches the audit trail, marked as answered by the dry run."""
    draft, ports = _draft(True), _Ports()
    hello = (UserMessage(parts=(TextPart(text="hi"),)),)
    request = LLMRequest(
        request_id="w1-0-r",
        purpose="primary",
        endpoint="primary",
        system="s",
        messages=hello,
        deadline_ms=9_000,
    )
    unsent: list[ModelCall] = []

    def unsent_model(call: ModelCall, answer: LLMResponse) -> ModelAnswer:
        unsent.append(call)
        asked = Asked(request, 7, 120, called=False, answered_itself=True)
        return ModelAnswer(answer.model_copy(update={"request_id": request.request_id}), 7, asked)

    run = chain(ports, [AuditTrail(draft), DryRun(ManualClock(7), draft.withheld.append, unsent_model)])
    call = ModelCall(step=0, system="s", messages=hello, tools=(), tool_choice="auto", deadline_ms=9_000)
    answer = await run(call)

    assert isinstance(answer, ModelAnswer)
    assert isinstance(answer.reply, LLMResponse)
    assert answer.reply.model_identity == DRY_RUN_MODEL
    assert [p.name for p in answer.reply.message.parts if isinstance(p, ToolCallPart)] == [tools.END]
    assert unsent == [call]
    assert ports.reached == []
    assert draft.model_called is False
    assert [r.request.request_id for r in draft.requests] == ["w1-0-r"]


async def test_notes_feed_the_audit_record_and_the_metrics() -> None:
    draft, ports = _draft(False), _Ports()
    run = chain(ports, [AuditTrail(draft), Metrics("retry")])

    def wakeups() -> float:
        return (
            REGISTRY.get_sample_value("larkbot_driver_wakeups_total", {"kind": "retry", "path": "probe"})
            or 0.0
        )

    before = wakeups()
    await run(Note("path", "probe"))
    await run(Note("probe", "error"))
    await run(Note("turn", "silent"))

    assert (draft.path, draft.probe_error, draft.turn_outcome) == ("probe", True, "silent")
    assert wakeups() == before + 1
    assert ports.reached == [Note("path", "probe"), Note("probe", "error"), Note("turn", "silent")]
