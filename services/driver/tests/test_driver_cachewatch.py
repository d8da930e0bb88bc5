"""The cache-break watch in real wake-ups (the real bus, a scripted model, a fake platform, a manual clock):
a normal next turn breaks nothing; a changed system prompt or model counts an unexpected break and logs its
chat; a compaction counts an expected one. And the watch on its own: what it compares, what it forgets."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from larkbot.canonical.llm import LLMRequest, TextPart, UserMessage
from larkbot.driver.audit.cachewatch import CacheWatch
from larkbot.driver.audit.core.cachebreak import CAUSES, EXPECTED, CacheBreak
from larkbot.driver.audit.core.requestlog import LoggedRequest, WakeRequests, blocks_of
from larkbot.driver.tools.core import tools
from larkbot.runtime.bus import Bus
from larkbot.testkit.driver.harness import CHAT_ID, World, decide, world
from larkbot.testkit.driver.synthetic import response, tool_call

#: Small windows so a few dozen synthetic messages overflow them (as in test_driver_compaction).
SMALL: dict[str, Any] = {
    "max_context_est_tokens": 1600,
    "working_window_est_tokens": 800,
    "max_segment_est_tokens": 200,
    "probe_context_est_tokens": 1000,
    "summary_max_est_tokens": 200,
}
BREAKS = "larkbot_driver_prompt_cache_breaks_total"


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}"


def _breaks() -> dict[str, float]:
    return {
        cause: REGISTRY.get_sample_value(BREAKS, {"cause": cause, "expected": str(cause in EXPECTED).lower()})
        or 0.0
        for cause in CAUSES
    }


def _delta(before: dict[str, float]) -> dict[str, float]:
    after = _breaks()
    return {cause: after[cause] - before[cause] for cause in CAUSES if after[cause] != before[cause]}


async def _mention(w: World, n: int, at: int, token: str, *, steps: int = 1) -> None:
    """A mention the probe lets through; the primary sends ``steps`` times (staying open but the last)."""
    w.probe_answers.append(decide("send_message", "asked directly"))
    for i in range(steps):
        still = i < steps - 1
        w.primary_answers.append(
            response(tool_call(tools.SEND, f"s{n}-{i}", text=f"answer {token} {i}", still_working=still))
        )
    await w.say(n, at, mentions_me=True, text=f"@Lark {token}?")
    await w.tick(at + 1000)


async def test_a_normal_next_turn_breaks_nothing(bus: Bus, nats_url: str, db: str) -> None:
    before = _breaks()
    async with world(bus, nats_url, db) as w:
        await _mention(w, 1, 0, "one", steps=2)
        await w.say(2, 3000, text="thanks")
        await _mention(w, 3, 5000, "two", steps=2)
        primary = w.requests("primary")
    # Two wake-ups of two steps each: three requests that each had a predecessor, none broken.
    assert len(primary) == 4
    assert _delta(before) == {}


async def test_a_changed_system_prompt_counts_an_unexpected_break_and_names_the_chat(
    bus: Bus, nats_url: str, db: str, caplog: pytest.LogCaptureFixture
) -> None:
    before = _breaks()
    async with world(bus, nats_url, db) as w:
        await _mention(w, 1, 0, "one")
        # What a persona edit does to the system prompt.
        w.chat.persona = replace(w.chat.persona, texts=("You are terse.",))
        with caplog.at_level(logging.INFO, logger="larkbot.driver.audit.cachewatch"):
            await _mention(w, 2, 3000, "two")
        system = w.requests("primary")[-1].system
    assert "You are terse." in system
    assert _delta(before) == {"system": 1.0}
    (line,) = [r for r in caplog.records if r.getMessage() == "prompt cache break"]
    assert line.levelno == logging.WARNING
    fields = vars(line)
    assert fields["chat"] == f"feishu:{CHAT_ID}"
    assert (fields["cause"], fields["expected"], fields["block"], fields["block_index"]) == (
        "system",
        False,
        "system",
        1,
    )
    assert fields["step"] == 0


async def test_a_model_switch_counts_an_unexpected_break(bus: Bus, nats_url: str, db: str) -> None:
    before = _breaks()
    async with world(bus, nats_url, db) as w:
        await _mention(w, 1, 0, "one")
        # What a configuration naming another primary endpoint does to the next request.
        w.driver.runner.sizing.primary_endpoint = "other"
        await _mention(w, 2, 3000, "two")
        endpoints = [r.endpoint for r in w.requests("primary")]
    assert endpoints == ["primary", "other"]
    assert _delta(before) == {"model": 1.0}


async def test_a_compaction_counts_an_expected_break(
    bus: Bus, nats_url: str, db: str, caplog: pytest.LogCaptureFixture
) -> None:
    before = _breaks()
    async with world(bus, nats_url, db, **SMALL) as w:
        at = 0
        for n in range(1, 61):
            await w.say(n, at, sender=f"ou_{n % 3}", name=f"Member{n % 3}")
            at += 1000
        await _mention(w, 61, at, "first")
        assert len(w.llm.by_purpose("compaction")) == 1
        await w.synced()
        with caplog.at_level(logging.INFO, logger="larkbot.driver.audit.cachewatch"):
            await _mention(w, 62, at + 5000, "second")
        head = w.requests("primary")[-1].messages[0]
        assert isinstance(head, UserMessage)
        assert isinstance(head.parts[0], TextPart)
        assert head.parts[0].text.startswith("<summary>")
    assert _delta(before) == {"compaction": 1.0}
    (line,) = [r for r in caplog.records if r.getMessage() == "prompt cache break"]
    assert line.levelno == logging.INFO
    assert vars(line)["block"] == "user #1 part 1"


# -- the watch on its own: what it compares and what it remembers ------------------------------------------


def _logged(
    request_id: str, texts: tuple[str, ...], *, purpose: str = "primary", called: bool = True
) -> LoggedRequest:
    request = LLMRequest(
        request_id=request_id,
        purpose=purpose,
        endpoint="primary",
        system="rules",
        messages=(UserMessage(parts=tuple(TextPart(text=t) for t in texts)), _LATE),
        deadline_ms=1,
    )
    return LoggedRequest(request, 0 if purpose == "primary" else None, 1, 10, called, None)


_LATE = UserMessage(parts=(TextPart(text="<late-binding/>"),))


def _observe(watch: CacheWatch, chat_id: str, *logged: LoggedRequest) -> tuple[CacheBreak, ...]:
    wake = WakeRequests("feishu", chat_id, "w", tuple(logged), ())
    return watch.observe(wake, [blocks_of(r.request) for r in wake.requests])


def test_the_watch_compares_with_the_last_primary_request_that_reached_the_model() -> None:
    watch = CacheWatch()
    assert _observe(watch, "c", _logged("r1", ("a", "b"))) == ()
    found = _observe(
        watch,
        "c",
        _logged("p", ("x",), purpose="probe"),  # the probe is not watched
        _logged("r2", ("z",), called=False),  # never sent: it neither breaks nor counts as the previous
        _logged("r3", ("a", "b", "c")),
        _logged("r4", ("a", "B")),
    )
    assert found == (CacheBreak("history", 3, "user #1 part 2", "text"),)


def test_the_watch_forgets_the_chats_that_asked_least_recently() -> None:
    watch = CacheWatch(remembered_chats=2)
    for chat in ("c1", "c2", "c3"):
        _observe(watch, chat, _logged("r", ("a",)))
    # c1 was forgotten: its rewritten history is compared with nothing; c3 is still remembered.
    assert _observe(watch, "c1", _logged("r", ("b",))) == ()
    assert _observe(watch, "c3", _logged("r", ("b",))) == (
        CacheBreak("history", 2, "user #1 part 1", "text"),
    )
