"""Long-lived chats (SPEC §4.5): compaction triggers after a wake-up, summarizes the oldest part, moves the
cursor through the pipeline, backs off after a failed summary and recovers; a request that would not fit
the model's window, or that the provider refuses as too long, leads to compaction (then trimming) and a
reply, never to silence."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from larkbot.canonical.llm import LLMError, LLMRequest, TextPart, UserMessage
from larkbot.driver.tools.core import tools
from larkbot.driver.wake.core.estimate import request_tokens
from larkbot.runtime.bus import Bus
from larkbot.testkit.driver.harness import CHAT_ID, World, decide, world
from larkbot.testkit.driver.synthetic import response, tool_call

#: Small windows so a few dozen synthetic messages (~30 estimated tokens each) overflow them.
SMALL: dict[str, Any] = {
    "max_context_est_tokens": 1600,
    "working_window_est_tokens": 800,
    "max_segment_est_tokens": 200,
    "probe_context_est_tokens": 1000,
    "summary_max_est_tokens": 200,
}


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}"


def _metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def _text(request: LLMRequest, index: int = 0) -> str:
    message = request.messages[index]
    assert isinstance(message, UserMessage)
    return "".join(p.text for p in message.parts if isinstance(p, TextPart))


def _all_text(request: LLMRequest) -> str:
    return "\n".join(
        p.text for m in request.messages for p in getattr(m, "parts", ()) if isinstance(p, TextPart)
    )


async def _chatter(w: World, first: int, last: int, *, start_ms: int) -> int:
    """Members' messages ``first``..``last``, one per second; returns the time after the last."""
    at = start_ms
    for n in range(first, last + 1):
        await w.say(n, at, sender=f"ou_{n % 3}", name=f"Member{n % 3}")
        at += 1000
    return at


async def _mention(w: World, n: int, at: int, token: str) -> None:
    w.probe_answers.append(decide("send_message", "asked directly"))
    w.primary_answers.append(response(tool_call(tools.SEND, "s", text=f"answer {token}")))
    await w.say(n, at, mentions_me=True, text=f"@Lark {token}?")
    await w.tick(at + 1000)


async def test_compaction_summarizes_the_oldest_part_and_moves_the_cursor(
    bus: Bus, nats_url: str, db: str
) -> None:
    before = _metric("larkbot_driver_compactions_total", outcome="ok")
    async with world(bus, nats_url, db, **SMALL) as w:
        at = await _chatter(w, 1, 60, start_ms=0)
        await _mention(w, 61, at, "first")
        compactions = w.llm.by_purpose("compaction")
        assert len(compactions) == 1
        log = _text(compactions[0])
        assert '<message id="m1"' in log  # the oldest part
        assert '<message id="m61"' not in log  # the newest stays in view
        summaries = await w.driver.repo.summaries("feishu", CHAT_ID)  # type: ignore[union-attr]
        assert len(summaries) == 1
        summary = summaries[0]
        assert summary.text.startswith("summary of m1..")
        assert summary.tokens_after <= SMALL["working_window_est_tokens"]
        assert summary.tokens_before > SMALL["max_context_est_tokens"]
        # The pipeline re-rendered from the new cursor and the driver's copy followed.
        assert w.pipeline.log().cursor == summary.cursor
        chat = await w.synced()
        assert chat.context.cursor == summary.cursor
        assert all(s.event_seq > summary.cursor for s in chat.context.segments)
        assert chat.summary == summary

        # The next primary request starts with the summary and no longer carries what it covers.
        await _mention(w, 62, at + 5000, "second")
        primary = w.llm.by_purpose("primary")[-1]
        assert _text(primary, 0).startswith("<summary>\nsummary of m1..")
        text = _all_text(primary)
        assert '<message id="m1"' not in text
        assert '<message id="m62"' in text
        assert "answer second" in w.platform.sent_in(CHAT_ID)[-1]
        # The probe gets the summary too, and the bot's own earlier answer.
        probe = w.llm.by_purpose("probe")[-1]
        assert "<summary>" in _text(probe)
        assert '<my-action type="send_message"' in _text(probe)
    assert _metric("larkbot_driver_compactions_total", outcome="ok") == before + 1


async def test_a_failed_compaction_backs_off_then_recovers(bus: Bus, nats_url: str, db: str) -> None:
    failed = _metric("larkbot_driver_compactions_total", outcome="failed")
    async with world(bus, nats_url, db, **SMALL) as w:
        w.queue("compaction").append(
            LLMError(request_id="x", category="transient", message="upstream overloaded")
        )
        at = await _chatter(w, 1, 60, start_ms=0)
        await _mention(w, 61, at, "one")
        assert len(w.llm.by_purpose("compaction")) == 1
        assert _metric("larkbot_driver_compactions_total", outcome="failed") == failed + 1
        assert await w.driver.repo.summaries("feishu", CHAT_ID) == ()  # type: ignore[union-attr]
        state = w.chat.compaction
        assert state.retry_at_ms == w.clock.now_ms() + 300_000

        # Within the back-off: wake-ups go on (the bot answers), no compaction is tried.
        at += 10_000
        await _mention(w, 62, at, "two")
        assert "answer two" in w.platform.sent_in(CHAT_ID)[-1]
        assert len(w.llm.by_purpose("compaction")) == 1

        # After it: the next wake-up's poke compacts, and a success resets the back-off.
        at += 300_000
        await _mention(w, 63, at, "three")
        assert len(w.llm.by_purpose("compaction")) == 2
        assert len(await w.driver.repo.summaries("feishu", CHAT_ID)) == 1  # type: ignore[union-attr]
        assert w.chat.compaction.delay_s == 0
        assert w.chat.compaction.retry_at_ms == 0


async def test_a_second_failure_doubles_the_back_off(bus: Bus, nats_url: str, db: str) -> None:
    async with world(bus, nats_url, db, **SMALL) as w:
        for _ in range(2):
            w.queue("compaction").append(LLMError(request_id="x", category="permanent", message="no"))
        at = await _chatter(w, 1, 60, start_ms=0)
        await _mention(w, 61, at, "one")
        at = w.clock.now_ms() - w.t0 + 300_001
        await _mention(w, 62, at, "two")
        assert len(w.llm.by_purpose("compaction")) == 2
        assert w.chat.compaction.delay_s == 600


@pytest.mark.parametrize("compaction_fails", [False, True], ids=["compacts", "trims"])
async def test_a_context_length_error_compacts_or_trims_and_the_bot_still_answers(
    bus: Bus, nats_url: str, db: str, compaction_fails: bool
) -> None:
    # The chat's own trigger is far away: only the provider's refusal makes it compact.
    settings: dict[str, Any] = {**SMALL, "max_context_est_tokens": 50_000, "working_window_est_tokens": 800}
    async with world(bus, nats_url, db, **settings) as w:
        if compaction_fails:
            w.queue("compaction").append(LLMError(request_id="x", category="permanent", message="no"))
        at = await _chatter(w, 1, 60, start_ms=0)
        await w.tick(at)  # the bot reads the chatter and stays quiet: only the mention is left to answer
        w.probe_answers.append(decide("send_message", "asked"))
        w.primary_answers.append(
            LLMError(request_id="x", category="context_length", message="maximum context length exceeded")
        )
        w.primary_answers.append(response(tool_call(tools.SEND, "s", text="still here")))
        await w.say(61, at, mentions_me=True, text="@Lark are you there?")
        await w.tick(at + 1000)
        primaries = w.llm.by_purpose("primary")
        assert len(primaries) == 2
        assert w.platform.sent_in(CHAT_ID) == ["still here"]
        assert len(w.llm.by_purpose("compaction")) == 1
        retried = _all_text(primaries[1])
        assert '<message id="m61"' in retried
        if compaction_fails:
            assert '<omitted messages="' in _text(primaries[1], 0)
            assert request_tokens(
                primaries[1].system, primaries[1].tools, primaries[1].messages
            ) < request_tokens(primaries[0].system, primaries[0].tools, primaries[0].messages)
        else:
            assert _text(primaries[1], 0).startswith("<summary>")
        assert w.chat.schedule.retry is None  # not latched, not retrying: answered


async def test_a_request_over_the_configured_window_is_never_sent(bus: Bus, nats_url: str, db: str) -> None:
    # A 6,000-token model (1,000 of them for output); the chat's own trigger is far above that.
    llm = {
        "endpoints": {
            "primary": {
                "format": "openai-chat",
                "base_url": "http://127.0.0.1:9/v1",
                "model": "small",
                "context_window_tokens": 6000,
                "default_max_output_tokens": 1000,
            }
        }
    }
    settings = {**SMALL, "max_context_est_tokens": 50_000, "working_window_est_tokens": 1600}
    async with world(bus, nats_url, db, llm=llm, **settings) as w:
        at = await _chatter(w, 1, 200, start_ms=0)
        await w.tick(at)  # read and left unanswered: compaction may summarize it, never the mention
        await _mention(w, 201, at, "fit")
        for request in w.llm.by_purpose("primary"):
            assert request_tokens(request.system, request.tools, request.messages) <= 5000
        assert "answer fit" in w.platform.sent_in(CHAT_ID)[-1]
        # The wake-up waited for a compaction before its first request: it would not have fit.
        assert len(w.llm.by_purpose("compaction")) == 1
        first_primary = w.llm.requests.index(w.llm.by_purpose("primary")[0])
        assert w.llm.requests.index(w.llm.by_purpose("compaction")[0]) < first_primary


async def test_the_bot_own_sends_are_summarized_from_its_turn_responses(
    bus: Bus, nats_url: str, db: str
) -> None:
    async with world(bus, nats_url, db, **SMALL) as w:
        await _mention(w, 1, 0, "early")
        at = await _chatter(w, 2, 70, start_ms=5000)
        await _mention(w, 71, at, "late")
        compaction = w.llm.by_purpose("compaction")[0]
        log = _text(compaction)
        assert '<my-action type="send_message"' in log
        assert "answer early" in log
        summary = await w.driver.repo.latest_summary("feishu", CHAT_ID)  # type: ignore[union-attr]
        assert summary is not None
        assert summary.turns >= 1
        # The turn responses it covered are no longer read into prompts.
        turns = await w.driver.repo.turns("feishu", CHAT_ID, since_ms=summary.turns_from_ms)  # type: ignore[union-attr]
        assert all("answer early" not in str(t.entries) for t in turns)
