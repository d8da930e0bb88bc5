"""Scenario tests: the driver on the real bus with a scripted LLM, a fake platform and a fake pipeline,
time driven by a manual clock (issue "Done when")."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from larkbot.canonical.actions import ReactAction, SendMessageAction
from larkbot.canonical.llm import LLMError, LLMReply, LLMRequest, TextPart, ToolResultMessage, UserMessage
from larkbot.driver.tools.core import tools
from larkbot.runtime.bus import Bus
from larkbot.testkit.bench.prefix import prefix_report, request_bytes
from larkbot.testkit.driver.harness import CHAT_ID, decide, world
from larkbot.testkit.driver.synthetic import response, tool_call


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}"


def _metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def _tool_names(request: LLMRequest) -> list[str]:
    return [t.name for t in request.tools]


def _late_binding(request: LLMRequest) -> str:
    last = request.messages[-1]
    assert isinstance(last, UserMessage)
    first = last.parts[0]
    assert isinstance(first, TextPart)
    return first.text


def _probe_text(request: LLMRequest) -> str:
    window = request.messages[0]
    assert isinstance(window, UserMessage)
    return "".join(p.text for p in window.parts if isinstance(p, TextPart))


async def test_a_mention_that_the_probe_declines(bus: Bus, nats_url: str, db: str) -> None:
    declined = _metric("larkbot_driver_probe_decisions_total", outcome="no_action")
    async with world(bus, nats_url, db) as w:
        w.probe_answers.append(decide("no_action", "a greeting to everyone"))
        await w.say(1, 0, mentions_me=True, text="@Lark hello all")
        await w.tick(999)
        assert w.llm.requests == []
        await w.tick(1000)
        assert len(w.llm.by_purpose("probe")) == 1
        assert w.llm.by_purpose("primary") == []
        assert w.platform.requests == []
        probes = await w.driver.repo.probes("feishu", CHAT_ID)  # type: ignore[union-attr]
        assert [(p.decision, p.reason, p.activated) for p in probes] == [
            ("no_action", "a greeting to everyone", False)
        ]
        await w.tick(60_000)
        assert len(w.llm.requests) == 1  # processed: no second wake-up for the same input
    assert _metric("larkbot_driver_probe_decisions_total", outcome="no_action") == declined + 1


async def test_a_burst_is_one_wake_up_and_another_sender_does_not_extend_it(
    bus: Bus, nats_url: str, db: str
) -> None:
    async with world(bus, nats_url, db) as w:
        await w.say(1, 0, sender="ou_a", name="A")
        await w.say(2, 300, sender="ou_a", name="A")
        await w.say(3, 900, sender="ou_b", name="B")
        await w.tick(1299)
        assert w.llm.requests == []
        await w.tick(1300)
        probes = w.llm.by_purpose("probe")
        assert len(probes) == 1
        text = _probe_text(probes[0])
        assert all(f"message number {n}" in text for n in (1, 2, 3))
        await w.tick(10_000)
        assert len(w.llm.requests) == 1


async def test_typing_extends_the_delay_up_to_the_max_delay(bus: Bus, nats_url: str, db: str) -> None:
    async with world(bus, nats_url, db) as w:
        await w.say(1, 0, sender="ou_a")
        await w.typing("ou_b", 500)
        await w.tick(1000)
        assert w.llm.requests == []
        for at in range(4000, 30000, 4000):  # keeps typing: each signal pushes the wake-up 5 s out
            await w.typing("ou_a", at)
            await w.tick(at + 100)
            assert w.llm.requests == [], at
        await w.tick(29_999)
        assert w.llm.requests == []
        await w.tick(30_000)  # capped at window start + max_delay, although typing continues
        assert len(w.llm.by_purpose("probe")) == 1


async def test_react_only_exposes_only_react_and_resolves_the_alias(bus: Bus, nats_url: str, db: str) -> None:
    async with world(bus, nats_url, db) as w:
        w.probe_answers.append(decide("react_only", "a joke landed"))
        w.primary_answers.append(
            response(
                tool_call(tools.SEND, "c0", text="haha"),
                tool_call(tools.REACT, "c1", message_id="m1", emoji="😂"),
            )
        )
        await w.say(1, 0, text="knock knock")
        await w.tick(1000)
        primary = w.llm.by_purpose("primary")
        assert len(primary) == 1
        assert _tool_names(primary[0]) == ["react", "end_turn"]
        assert "a joke landed" in _late_binding(primary[0])
        assert w.platform.delivered == []
        assert [(r.message_id, r.emoji) for r in w.platform.reactions] == [("om_1", "😂")]
        assert isinstance(w.platform.requests[0], ReactAction)
        latest = await w.driver.repo.latest_turn("feishu", CHAT_ID)  # type: ignore[union-attr]
        assert latest is not None
        assert not latest.requires_follow_up


async def test_an_interrupted_chain_continues_without_probe_with_its_budget(
    bus: Bus, nats_url: str, database_url: str
) -> None:
    # Also runs on PostgreSQL when TEST_DATABASE_URL is set.
    async with world(bus, nats_url, database_url, max_tool_rounds=2) as w:

        async def read_then_interrupted(request: LLMRequest) -> LLMReply:
            # New input lands while the step runs; the driver sees it after persisting the step.
            await w.say(2, 1500, sender="ou_b", text="also, what about tomorrow?")
            return response(
                tool_call(tools.READ_OLD, "r1", message_ids=["m1"]), request_id=request.request_id
            )

        w.probe_answers.append(decide("send_message", "asked a question"))
        w.primary_answers.extend(
            [
                read_then_interrupted,
                response(tool_call(tools.READ_OLD, "r2", message_ids=["m2"])),
                response(tool_call(tools.SEND, "s1", text="tomorrow works")),
            ]
        )
        await w.say(1, 0, text="what about today?", mentions_me=True)
        await w.tick(1000)
        assert len(w.llm.by_purpose("primary")) == 1
        turns = await w.driver.repo.turns("feishu", CHAT_ID)  # type: ignore[union-attr]
        assert [t.requires_follow_up for t in turns] == [True]  # open: interrupted after the step
        await w.tick(2500)
        assert len(w.llm.by_purpose("probe")) == 1  # the continuation skipped the probe
        primary = w.llm.by_purpose("primary")
        assert len(primary) == 3
        assert "interrupted" in _late_binding(primary[1])
        assert "read_old_messages" in _tool_names(primary[1])  # a normal step: work tools offered
        assert _tool_names(primary[2]) == ["send_message", "react", "end_turn"]  # round 2 carried over
        turns = await w.driver.repo.turns("feishu", CHAT_ID)  # type: ignore[union-attr]
        assert [(t.chain_id == turns[0].chain_id, t.step, t.mode) for t in turns] == [
            (True, 0, "normal"),
            (True, 1, "normal"),
            (True, 2, "wrap_up"),
        ]
        assert [d.text for d in w.platform.delivered] == ["tomorrow works"]


async def test_budget_exhaustion_ends_with_a_wrap_up_step(bus: Bus, nats_url: str, db: str) -> None:
    exhausted = _metric("larkbot_driver_turns_total", outcome="budget_exhausted")
    async with world(bus, nats_url, db) as w:
        w.probe_answers.append(decide("send_message", "asked"))
        read = response(tool_call(tools.READ_OLD, "r", message_ids=["m1"]))
        w.primary_answers.extend([read, read, read])
        await w.say(1, 0, mentions_me=True)
        await w.tick(1000)
        primary = w.llm.by_purpose("primary")
        assert len(primary) == 3
        assert _tool_names(primary[2]) == ["send_message", "react", "end_turn"]
        latest = await w.driver.repo.latest_turn("feishu", CHAT_ID)  # type: ignore[union-attr]
        assert latest is not None
        assert latest.mode == "wrap_up"
        assert not latest.requires_follow_up  # the chain is closed: next input goes through the probe
        await w.say(2, 5000)
        await w.tick(6000)
        assert len(w.llm.by_purpose("probe")) == 2
    assert _metric("larkbot_driver_turns_total", outcome="budget_exhausted") == exhausted + 1


async def test_a_transient_provider_failure_is_retried_then_succeeds(
    bus: Bus, nats_url: str, db: str
) -> None:
    async with world(bus, nats_url, db) as w:
        w.probe_answers.append(decide("send_message", "asked"))
        w.primary_answers.extend(
            [
                LLMError(request_id="x", category="transient", message="503 from provider", status=503),
                response(tool_call(tools.SEND, "s", text="here")),
            ]
        )
        await w.say(1, 0, mentions_me=True)
        await w.tick(1000)
        assert len(w.llm.by_purpose("primary")) == 1
        await w.tick(5999)
        assert len(w.llm.by_purpose("primary")) == 1
        await w.tick(6000)
        assert len(w.llm.by_purpose("probe")) == 1  # the retry reused the activation
        assert len(w.llm.by_purpose("primary")) == 2
        assert "asked" in _late_binding(w.llm.by_purpose("primary")[1])
        assert [d.text for d in w.platform.delivered] == ["here"]


async def test_a_permanent_failure_is_latched_until_new_input(bus: Bus, nats_url: str, db: str) -> None:
    async with world(bus, nats_url, db) as w:
        w.probe_answers.append(decide("send_message", "asked"))
        w.primary_answers.append(LLMError(request_id="x", category="invalid_request", message="bad"))
        await w.say(1, 0, mentions_me=True)
        await w.tick(1000)
        await w.tick(120_000)
        assert len(w.llm.requests) == 2
        await w.say(2, 130_000, text="hello?")
        await w.tick(131_000)
        assert len(w.llm.by_purpose("probe")) == 2


async def test_a_send_with_an_unknown_outcome_is_delivered_exactly_once(
    bus: Bus, nats_url: str, db: str
) -> None:
    async with world(bus, nats_url, db) as w:
        w.platform.lose_answers = 1
        w.probe_answers.append(decide("send_message", "asked"))
        w.primary_answers.append(response(tool_call(tools.SEND, "s", text="only once")))
        await w.say(1, 0, mentions_me=True)
        await w.tick(1000)
        assert [d.text for d in w.platform.delivered] == ["only once"]
        keys = [r.idempotency_key for r in w.platform.requests if isinstance(r, SendMessageAction)]
        assert len(keys) == 2
        assert keys[0] == keys[1]
        turns = await w.driver.repo.turns("feishu", CHAT_ID)  # type: ignore[union-attr]
        assert turns[-1].sent
        await w.synced()
        await w.tick(60_000)  # the bot's own (self-sent) message never wakes it
        assert len(w.llm.requests) == 2


async def test_bot_to_bot_exchanges_do_not_loop(bus: Bus, nats_url: str, db: str) -> None:
    async with world(bus, nats_url, db) as w:
        await w.say(1, 0, text="bots, talk to each other")
        w.probe_answers.append(decide("no_action"))
        await w.tick(1000)
        at = 2000
        for n in range(2, 20):
            w.probe_answers.append(decide("send_message", "the other bot asked"))
            w.primary_answers.append(response(tool_call(tools.SEND, "s", text=f"reply {n}")))
            await w.say(n * 100, at, sender="ou_otherbot", name="Other", bot=True)
            at += 2000
            await w.tick(at)
            await w.synced()
        assert len(w.platform.delivered) == 2
        assert len(w.llm.by_purpose("probe")) == 3  # then the brake ends wake-ups before the probe


async def test_a_lost_update_is_recovered_from_a_snapshot(bus: Bus, nats_url: str, db: str) -> None:
    async with world(bus, nats_url, db) as w:
        await w.say(1, 0)
        from larkbot.testkit.driver.synthetic import segment

        taken_over = w.pipeline.snapshots  # one per chat when the partition was taken over
        await w.pipeline.append(segment(2, at_ms=w.t0 + 100), publish=False)
        chat = await w.say(3, 200)
        assert [s.segment_id for s in chat.context.segments] == ["om_1", "om_2", "om_3"]
        assert w.pipeline.snapshots == taken_over + 1
        await w.tick(1200)
        assert "message number 2" in _probe_text(w.llm.by_purpose("probe")[0])


async def test_consecutive_primary_requests_extend_each_other_byte_for_byte(
    bus: Bus, nats_url: str, db: str
) -> None:
    async with world(bus, nats_url, db) as w:
        at = 0
        for n in range(1, 31):
            at += 3000
            if n % 3 == 0:
                w.probe_answers.append(decide("send_message", "asked"))
                reply = response(tool_call(tools.SEND, "s", text=f"answer {n}", reply_to=f"m{n}"))
                if n % 9 == 0:
                    w.primary_answers.append(response(tool_call(tools.READ_OLD, "r", message_ids=["m1"])))
                w.primary_answers.append(reply)
            await w.say(n, at, sender=f"ou_{n % 4}", name=f"U{n % 4}", mentions_me=n % 3 == 0)
            await w.tick(at + 1000)
            await w.synced()
        primary = w.llm.by_purpose("primary")
        assert len(primary) == 13
        report = prefix_report(request_bytes(primary))
        assert report.breaks == 0
        assert report.ratio > 0.8
        assert len(w.platform.delivered) == 10


async def test_the_bot_exchange_cap_is_a_chat_setting(bus: Bus, nats_url: str, db: str) -> None:
    async with world(bus, nats_url, db, bot_exchange_cap=2) as w:
        at = 0
        for n in range(1, 10):
            w.probe_answers.append(decide("send_message", "the other bot asked"))
            w.primary_answers.append(response(tool_call(tools.SEND, "s", text=f"reply {n}")))
            await w.say(n * 100, at, sender="ou_otherbot", name="Other", bot=True)
            at += 2000
            await w.tick(at)
            await w.synced()
        assert len(w.platform.delivered) == 1
        assert len(w.llm.by_purpose("probe")) == 1


async def test_action_attempts_is_a_chat_setting(bus: Bus, nats_url: str, db: str) -> None:
    async with world(bus, nats_url, db, action_attempts=1) as w:
        w.platform.lose_answers = 1
        w.probe_answers.append(decide("send_message", "asked"))
        w.primary_answers.append(response(tool_call(tools.SEND, "s", text="once, unconfirmed")))
        await w.say(1, 0, mentions_me=True)
        await w.tick(1000)
        sends = [r for r in w.platform.requests if isinstance(r, SendMessageAction)]
        assert len(sends) == 1  # not asked again
        turns = await w.driver.repo.turns("feishu", CHAT_ID)  # type: ignore[union-attr]
        result = turns[-1].entries[-1]
        assert isinstance(result, ToolResultMessage)
        assert result.is_error
        assert not result.requires_follow_up
