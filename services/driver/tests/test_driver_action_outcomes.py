"""A platform action whose outcome is open: the driver asks again with backoff (never a tight loop, never
past the deadline) only while asking can tell more, and the model is told plainly what is known.

``BusClients.act`` runs against a scripted bus (each ask answered from a list, or no answer), with its
sleep recorded, its jitter fixed and a clock that moves with the sleeps; ``settled_text`` is pure."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import pytest
from pydantic import BaseModel

from larkbot.canonical.actions import ActionError, ActionResult, SendMessageAction
from larkbot.canonical.llm import TextPart
from larkbot.canonical.names import Platform
from larkbot.driver.tools.core import tools
from larkbot.driver.wake.clients import BusClients
from larkbot.driver.wake.clock import ManualClock
from larkbot.driver.wake.core.outcomes import settled_text, settlement
from larkbot.driver.wake.core.turn import ToolRun
from larkbot.driver.wake.executor import ToolExecutor
from larkbot.runtime.bus import Bus, BusUnavailable

T0 = 1_700_000_000_000
KEY = "lb-key"
NO_ANSWER = None


class ScriptedBus:
    """Answers each ``actions.*`` request with the next scripted result (``None``: no answer)."""

    def __init__(self, *answers: ActionResult | None) -> None:
        self.answers: Iterator[ActionResult | None] = iter(answers)
        self.timeouts: list[float] = []

    async def request(self, subject: str, model: BaseModel, reply: type[Any], *, timeout_s: float) -> Any:
        assert subject.startswith("actions.")
        self.timeouts.append(timeout_s)
        answer = next(self.answers)
        if answer is None:
            raise BusUnavailable(f"request on {subject} timed out after {timeout_s:g} s")
        return answer


class MovingClock(ManualClock):
    """The driver's clock, moved by the re-ask waits (recorded) and nothing else."""

    def __init__(self) -> None:
        super().__init__(T0)
        self.sleeps: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(round(seconds, 6))
        self.advance(round(seconds * 1000))


def clients(bus: ScriptedBus, clock: MovingClock) -> BusClients:
    return BusClients(cast(Bus, bus), clock=clock, sleep=clock.sleep, jitter=lambda: 0.0)


def action(deadline_ms: int | None = T0 + 15_000) -> SendMessageAction:
    return SendMessageAction(
        platform=Platform.TELEGRAM, idempotency_key=KEY, chat_id="-100", text="hi", deadline_ms=deadline_ms
    )


def unknown(code: str, retryable: bool, ids: tuple[str, ...] = ()) -> ActionResult:
    error = ActionError(code=code, message="…", retryable=retryable)
    return ActionResult(idempotency_key=KEY, ok=False, outcome="unknown", message_ids=ids, error=error)


IN_PROGRESS = unknown("in_progress", True)
LOST = unknown("outcome_unknown", False)
DONE = ActionResult(idempotency_key=KEY, ok=True, outcome="duplicate", message_ids=("501",))


# -- asking again ------------------------------------------------------------------------------------
async def test_an_attempt_still_running_is_asked_again_with_backoff_until_it_settles() -> None:
    bus, clock = ScriptedBus(IN_PROGRESS, IN_PROGRESS, DONE), MovingClock()
    result = await clients(bus, clock).act(action(), attempts=3)
    assert result == DONE
    assert clock.sleeps == [0.375, 0.75]  # 0.5 s doubling, jitter at its low end: no tight loop
    assert len(bus.timeouts) == 3


async def test_a_lost_answer_is_not_asked_again() -> None:
    # Telegram's ledger says unknown for good: asking again cannot tell more.
    bus, clock = ScriptedBus(LOST), MovingClock()
    assert await clients(bus, clock).act(action(), attempts=3) == LOST
    assert clock.sleeps == []
    assert len(bus.timeouts) == 1


async def test_definite_answers_are_returned_at_once() -> None:
    failed = ActionResult(
        idempotency_key=KEY,
        ok=False,
        outcome="failed",
        error=ActionError(code="unavailable", message="Internal Server Error", retryable=True),
    )
    bus, clock = ScriptedBus(failed), MovingClock()
    # Retryable, but the ingress has already retried it until the deadline: one retry layer per send.
    assert await clients(bus, clock).act(action(), attempts=3) == failed
    assert clock.sleeps == []


async def test_no_answer_is_asked_again_with_backoff_and_then_raised() -> None:
    bus, clock = ScriptedBus(NO_ANSWER, NO_ANSWER, NO_ANSWER), MovingClock()
    with pytest.raises(BusUnavailable):
        await clients(bus, clock).act(action(), attempts=3)
    assert clock.sleeps == [0.375, 0.75]
    assert len(bus.timeouts) == 3


async def test_asking_again_stops_at_the_deadline() -> None:
    bus, clock = ScriptedBus(IN_PROGRESS, IN_PROGRESS, DONE), MovingClock()
    # 0.375 s fits before the deadline, 0.75 s more would not: the second answer is the result.
    result = await clients(bus, clock).act(action(deadline_ms=T0 + 1000), attempts=3)
    assert result == IN_PROGRESS
    assert clock.sleeps == [0.375]
    assert len(bus.timeouts) == 2


async def test_each_ask_waits_through_the_ingress_retries_until_the_deadline() -> None:
    bus, clock = ScriptedBus(DONE, DONE), MovingClock()
    c = clients(bus, clock)
    await c.act(action(deadline_ms=T0 + 15_000))
    await c.act(action(deadline_ms=None))
    # 15 s of retries at the ingress, plus the usual 10 s for its answer; without a deadline, 10 s.
    assert bus.timeouts == [25.0, 10.0]


# -- what the model is told --------------------------------------------------------------------------
def failed(
    code: str, retryable: bool, message: str = "", *, ids: tuple[str, ...] = (), wait: float | None = None
) -> ActionResult:
    error = ActionError(code=code, message=message, retryable=retryable, retry_after_s=wait)
    return ActionResult(idempotency_key=KEY, ok=False, outcome="failed", message_ids=ids, error=error)


@pytest.mark.parametrize(
    ("result", "kind", "delivered", "text"),
    [
        (
            LOST,
            "send_message",
            (),
            "delivery unknown: Telegram's answer was lost, so it may or may not have happened; "
            "do not repeat it",
        ),
        (
            unknown("outcome_unknown", False, ("7",)),
            "send_message",
            ("7",),
            "delivery unknown: Telegram's answer was lost, so it may or may not have happened; "
            "the first part was delivered (id 7); do not repeat it",
        ),
        (
            IN_PROGRESS,
            "send_message",
            (),
            "delivery unknown: Telegram was still working on an earlier attempt when the turn's deadline "
            "came, so it may or may not have happened; do not repeat it",
        ),
        (
            failed("unavailable", True, "Internal Server Error"),
            "send_message",
            (),
            "not sent: Telegram kept failing (unavailable) until the retries ran out; nothing was delivered",
        ),
        (
            failed("rate_limited", True, "Too Many Requests: retry after 30", wait=30),
            "send_message",
            (),
            "not sent: Telegram kept failing (rate_limited, asking to wait 30 s) until the retries ran out; "
            "nothing was delivered",
        ),
        (
            failed("forbidden", False, "Forbidden: bot was kicked from the group chat", ids=("7", "8")),
            "send_message",
            ("7", "8"),
            "not sent: Telegram refused it (forbidden: Forbidden: bot was kicked from the group chat); "
            "the first 2 parts were delivered (ids 7, 8), the rest was not",
        ),
        (
            failed("deadline", False, "the deadline passed before execution"),
            "send_message",
            (),
            "not sent: the turn's deadline passed before it could run; nothing was delivered",
        ),
        (
            failed("not_found", False, "Bad Request: message to react not found"),
            "react",
            (),
            "not done: Telegram refused it (not_found: Bad Request: message to react not found); "
            "nothing changed",
        ),
    ],
    ids=["lost", "lost-after-part", "in-progress", "5xx", "429", "refused-after-parts", "deadline", "react"],
)
def test_the_model_is_told_plainly_what_is_known(
    result: ActionResult, kind: str, delivered: tuple[str, ...], text: str
) -> None:
    assert settled_text(result, kind, "telegram", delivered) == text


def test_each_result_settles_as_one_of_five_kinds() -> None:
    assert settlement(LOST) == settlement(IN_PROGRESS) == "unknown"
    assert settlement(SPENT) == "budget"
    assert settlement(failed("deadline", False, "the deadline passed before execution")) == "deadline"
    assert settlement(failed("unavailable", True, "Internal Server Error")) == "exhausted"
    assert settlement(failed("forbidden", False, "Forbidden")) == "refused"


SPENT = failed(
    "budget_spent",
    True,
    "the telegram budget of 20 messages a minute in this chat is spent",
    wait=34.2,
)


def test_a_spent_budget_tells_the_model_it_cannot_speak_now_and_when() -> None:
    assert settled_text(SPENT, "send_message", "telegram") == (
        "not sent: the speaking budget for Telegram is spent (the telegram budget of 20 messages a minute "
        "in this chat is spent); nothing was delivered. You cannot speak here now: it allows more in about "
        "34 s. Stay silent until then — do not try again in this turn"
    )
    daily = failed("budget_spent", True, "the feishu budget of 5000 API calls a UTC day is spent", wait=7200)
    assert "it allows more in about 2 h" in settled_text(daily, "send_message", "feishu")


def test_a_refusal_quotes_only_the_start_of_the_platforms_reason() -> None:
    text = settled_text(failed("platform", False, "x" * 500), "send_message", "feishu")
    assert text == f"not sent: Feishu refused it (platform: {'x' * 160}); nothing was delivered"


class _Answering(BusClients):
    def __init__(self, result: ActionResult) -> None:
        super().__init__(cast(Bus, None))
        self.result = result

    async def act(self, action: Any, attempts: int = 3) -> ActionResult:
        return self.result


@pytest.mark.parametrize(
    ("result", "final"),
    [(LOST, True), (SPENT, True), (failed("unavailable", True), False), (failed("forbidden", False), False)],
    ids=[
        "unknown-closes-the-call",
        "a-spent-budget-closes-the-call",
        "failed-may-be-followed-up",
        "refused-may-be-followed-up",
    ],
)
async def test_only_an_unknown_send_closes_the_call(result: ActionResult, final: bool) -> None:
    ex = ToolExecutor(_Answering(result), ManualClock(T0), "telegram", "-100", (), max_segment_tokens=4000)
    done = await ex.run(ToolRun(1, 0, tools.SEND, {"text": "hi"}, KEY, T0 + 15_000))
    assert not done.ok
    assert done.final is final
    [part] = done.parts
    assert isinstance(part, TextPart)
    assert part.text == settled_text(result, "send_message", "telegram")


async def test_parts_delivered_before_a_refusal_can_be_recalled() -> None:
    refused = failed("forbidden", False, "Forbidden", ids=("7",))
    ex = ToolExecutor(_Answering(refused), ManualClock(T0), "telegram", "-100", (), max_segment_tokens=4000)
    done = await ex.run(ToolRun(1, 0, tools.SEND, {"text": "long"}, KEY, T0 + 15_000))
    assert done.message_ids == ("7",)  # the members see it: the request log and recall_message know it
    assert ex.sent == ["7"]
