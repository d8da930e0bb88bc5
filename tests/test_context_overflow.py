"""A context-length refusal, in each wire format's own words, leads to compaction and a reply.

The driver (in process, with its fake pipeline and platform) talks to the real LLM gateway, which calls
the fake provider over HTTP in the format under test. The provider's window is small and the driver is
not told about it: the first primary request is refused the way that provider refuses it, the gateway
classifies the refusal as ``context_length``, and the driver compacts and asks again.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from larkbot.canonical.llm import AssistantMessage, ToolCallPart
from larkbot.canonical.names import Service
from larkbot.llm_gateway.app import GatewayService
from larkbot.llm_gateway.fake import Action, FakeCall, FakeProvider, Reply, estimate_tokens
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import LarkbotConfig
from larkbot.runtime.service import built
from larkbot.testkit.bench.prefix import SENDERS
from larkbot.testkit.bench.replay import (
    PLATFORM,
    WAIT_S,
    Replay,
    bench_config,
    member_event,
    publish_event,
    replay_world,
)
from larkbot.testkit.driver.harness import CHAT_ID, World, world

WINDOW = 2_000
SETTINGS = {
    "max_context_est_tokens": 50_000,  # never reached: only the provider's refusal compacts
    "working_window_est_tokens": 800,
    "max_segment_est_tokens": 200,
    "probe_context_est_tokens": 1000,
    "summary_max_est_tokens": 200,
    # The window is tiny on purpose; the memory tools and rules alone would take a fifth of it.
    "memory_enabled": False,
}


def script(call: FakeCall) -> Action:
    names = {tool.name for tool in call.request.tools}
    if not names:
        return Reply.text("Members 0-2 talked about message numbers; nobody asked the bot anything.")
    if "decide" in names:
        asked = b"are you still with us" in call.raw
        decision = "send_message" if asked else "no_action"
        return Reply.tool_call("decide", {"should_act": decision, "reason": "asked directly"})
    sent = any(
        isinstance(m, AssistantMessage)
        and any(isinstance(p, ToolCallPart) and p.name == "send_message" for p in m.parts)
        for m in call.request.messages
    )
    if sent or b"are you still with us" not in call.raw:
        return Reply.tool_call("end_turn", {}, call_id="call_end")
    return Reply.tool_call("send_message", {"text": "still with us"}, call_id="call_send")


@asynccontextmanager
async def gateway(nats_url: str, fmt: str, url: str) -> AsyncIterator[None]:
    endpoint = {"format": fmt, "base_url": url, "model": "small-window", "fake": True}
    config = LarkbotConfig.model_validate(
        {
            "llm": {"endpoints": {"primary": endpoint, "probe": endpoint}},
            "services": {"llm_gateway": {"http_host": "127.0.0.1", "http_port": 0}},
        }
    )
    async with built(Service.LLM_GATEWAY, GatewayService(config), config, nats_url=nats_url):
        yield


@pytest.mark.parametrize("fmt", ["openai-chat", "anthropic-messages", "responses"])
async def test_a_refusal_for_length_compacts_and_the_bot_answers(
    bus: Bus, nats_url: str, tmp_path: Path, fmt: str
) -> None:
    provider = FakeProvider(script, context_window=WINDOW)
    async with provider:
        db = f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}"
        async with (
            gateway(nats_url, fmt, provider.url),
            world(bus, nats_url, db, fake_llm=False, **SETTINGS) as w,
        ):
            await chatter(w, 80)
            await w.tick(79_500)  # the bot reads the chatter and stays quiet: only the mention waits
            await w.say(81, 80_000, mentions_me=True, text="@Lark are you still with us?")
            await w.tick(81_000)
            # Answered once, by a primary that saw the mention (the script answers nothing else).
            assert w.platform.sent_in(CHAT_ID) == ["still with us"]
            refused = [c for c in provider.calls if estimate_tokens(c.raw) > WINDOW]
            assert primary(refused[0])  # the first primary request, refused as too long
            if fmt != "responses":
                # The refusal states the window (the Responses API's does not): learnt at once.
                assert len(refused) == 1
            summaries = await w.driver.repo.summaries("feishu", CHAT_ID)  # type: ignore[union-attr]
            if summaries:
                assert summaries[0].cursor < 81  # the chatter before the mention, never the mention
            answered = [c for c in provider.calls if estimate_tokens(c.raw) <= WINDOW and primary(c)]
            assert answered
            assert b"<summary>" in answered[0].raw or b"<omitted messages=" in answered[0].raw
            assert w.chat.schedule.retry is None


def primary(call: FakeCall) -> bool:
    return "send_message" in {tool.name for tool in call.request.tools}


async def chatter(w: World, count: int) -> None:
    for n in range(1, count + 1):
        await w.say(n, (n - 1) * 1000, sender=f"ou_{n % 3}", name=f"Member{n % 3}")


# --- Issue 23: through the real pipeline and driver, a model whose window is smaller than configured ------

#: The model's real window, in the fake provider's tokens (request bytes / 4); the configuration says 64k.
REAL_WINDOW = 7_000
CONFIGURED_WINDOW = 64_000
TOKEN = "zebra-4417"
MENTION = f"@Lark {TOKEN}: what do you think of the plan?"


def member_script(call: FakeCall) -> Action:
    """A model that answers a mention only when it can see it: the probe acts on it, the primary replies
    to it once, a compaction writes a summary that never repeats it."""
    names = {tool.name for tool in call.request.tools}
    seen = TOKEN.encode() in call.raw
    if not names:
        return Reply.text("Members talked about numbers for a long while.")
    if "decide" in names:
        decision = "send_message" if seen else "no_action"
        return Reply.tool_call("decide", {"should_act": decision, "reason": "an unanswered address"})
    if f"re {TOKEN}".encode() in call.raw:  # already replied in this chain
        return Reply.tool_call("end_turn", {}, call_id="call_end")
    if seen:
        return Reply.tool_call("send_message", {"text": f"re {TOKEN}"}, call_id="call_send")
    return Reply.tool_call("end_turn", {}, call_id="call_end")


@asynccontextmanager
async def real_stack(
    bus: Bus, nats_url: str, root: Path, provider: FakeProvider, chat: dict[str, object]
) -> AsyncIterator[Replay]:
    """The real pipeline, driver (manual clock) and gateway in this process, the fake provider behind the
    gateway over HTTP, and a platform that publishes each send back as the ingress does."""
    chat_id = f"oc_overflow_{secrets.token_hex(4)}"
    endpoint = {
        "format": "openai-chat",
        "base_url": provider.url,
        "model": "small-window",
        "fake": True,
        "context_window_tokens": CONFIGURED_WINDOW,
        "default_max_output_tokens": 1_000,
    }
    llm = {"endpoints": {"primary": endpoint, "probe": endpoint}}
    config = bench_config(chat_id, root, chat=chat, llm=llm)
    async with replay_world(bus, nats_url, chat_id, root, config, gateway=True) as replay:
        yield replay


async def _post(replay: Replay, first: int, last: int, *, mention_at: int | None = None) -> None:
    """Members' messages ``first``..``last`` a second apart (``mention_at`` is the mention), then the
    clock moves past the debounce and the driver settles (its compactions included)."""
    ids = []
    start = replay.clock.now_ms()
    for n in range(first, last + 1):
        sender = replay.members[SENDERS[n % len(SENDERS)][0]]
        text = MENTION if n == mention_at else f"message {n}: " + "some chatter about numbers " * 4
        at = start + (n - first + 1) * 1000  # after the clock: nothing is due before it moves
        event = member_event(replay.chat_id, n, at, sender, text, mention=n == mention_at)
        await publish_event(replay.bus, event)
        ids.append(event.message_id)
    await replay.holds(ids)
    replay.clock.advance(start + (last - first + 60) * 1000 - replay.clock.now_ms())
    await replay.settled()
    while (task := replay.chat.compaction.task) is not None and not task.done():
        await asyncio.wait_for(asyncio.shield(task), WAIT_S)
        await replay.settled()


def _refused(provider: FakeProvider) -> list[FakeCall]:
    return [c for c in provider.calls if estimate_tokens(c.raw) > REAL_WINDOW]


@pytest.mark.parametrize("path", ["primary", "probe"])
async def test_a_mention_in_a_long_burst_is_answered_by_a_model_smaller_than_configured(
    bus: Bus, nats_url: str, tmp_path: Path, path: str
) -> None:
    """Issue 23, item 1. The history the bot read and left unanswered fills the real window; then a long
    burst arrives with the mention in its middle. ``primary``: the probe's window is small and fits, the
    primary is refused. ``probe``: the probe's window (everything since the bot's last action) is refused
    too. Either way the driver learns the real window, compacts what was already handled — never the
    burst — and the bot answers exactly once."""
    chat: dict[str, object] = {"memory_enabled": False, "max_segment_est_tokens": 400}
    if path == "primary":
        chat["probe_context_est_tokens"] = 1_200
    provider = FakeProvider(member_script, context_window=REAL_WINDOW)
    async with provider, real_stack(bus, nats_url, tmp_path, provider, chat) as replay:
        await _post(replay, 1, 90)  # read and left unanswered; every request still fits
        assert replay.platform.sent == []
        assert _refused(provider) == []
        await _post(replay, 91, 150, mention_at=120)
        # Exactly one reply, from a primary that saw the mention (the model answers nothing else).
        assert len(replay.platform.sent) == 1
        refused = _refused(provider)
        assert refused, "the model never refused: the scenario did not overflow"
        probes_refused = ["decide" in {t.name for t in c.request.tools} for c in refused]
        assert any(probes_refused) == (path == "probe")
        assert not all(probes_refused)  # the primary was refused too, before it learnt the window
        assert await replay.driver.repo.summaries(PLATFORM.value, replay.chat_id)  # type: ignore[union-attr]
        assert replay.chat.schedule.retry is None  # answered: not latched, no retry waiting
