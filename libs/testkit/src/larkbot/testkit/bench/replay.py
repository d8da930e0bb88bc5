"""``cacheable_prefix_ratio`` for ``larkbot bench`` (DESIGN §8): a synthetic chat replayed through the real
pipeline and the driver service on the bus, every primary request measured as the LLM gateway receives it.

In this process, on the given bus:

- the pipeline service (``larkbot.pipeline``: SQLite in a temporary directory, every partition), fed with
  canonical events published to ``EVENTS`` the way an ingress publishes them (``events.feishu.<chat>``,
  ``Nats-Msg-Id`` ``feishu:<dedup key>``); the bot's identity is in the ``identity`` bucket, so mentions
  and the bot's own messages render as they do in production;
- one driver replica (SQLite of its own, a manual clock: debounce and turns are driven without sleeping);
- a scripted model answering ``llm.generate`` (:class:`larkbot.testkit.driver.fakes.FakeLLM`);
- a platform answering ``actions.feishu`` that, like ingress-feishu after a successful send, publishes the
  sent message to ``EVENTS`` as a synthetic self-sent message event before it answers.

The conversation is :func:`.prefix.conversation`; the ratio and breaks are :func:`.prefix.prefix_report`.
Every wait is a condition over what the driver replica reports to its observer
(:class:`larkbot.testkit.driver.watch.DriverWatch`). Member events carry the manual clock's times
(platform time 150 ms before receipt), so the pipeline's rendering and the driver's history merge see
consistent times.
Use a bus of its own: the replay takes the pipeline's and the driver's partition leases, writes the Feishu
identity and answers ``llm.generate`` and ``actions.feishu``. It purges its chat from ``EVENTS`` and
``CONTEXT`` when done.

One module on purpose: it is one scenario. The member events, the self-sending platform, the scripted
model, the bench config and the world that wires them share its constants (the bot's identity, ``T0``,
the platform's lead over receipt, the wait) and the manual clock, and they are right only together — the
events' times must agree with the clock the driver runs on, the platform's echoes with the identity the
pipeline renders. Split, each part would read as a reusable fake it is not; the other benches and tests
(``bench.longchat``, ``tests/test_context_overflow.py``) take its parts from here.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import re
import secrets
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from larkbot.canonical.actions import ActionRequest, ActionResult, SendMessageAction
from larkbot.canonical.content import Content, Mention, Text
from larkbot.canonical.events import BotIdentity, MessageEvent, Sender
from larkbot.canonical.llm import LLMError, LLMReply, LLMRequest, LLMResponse, TextPart, Usage, UserMessage
from larkbot.canonical.names import (
    PARTITIONS,
    STREAM_CONTEXT,
    STREAM_EVENTS,
    Platform,
    Service,
    context_subject,
    events_subject,
    msg_id,
    partition_of,
)
from larkbot.driver.app import Driver, DriverOptions, DriverService
from larkbot.driver.tools.core import tools
from larkbot.driver.wake.chatstate import ChatState
from larkbot.driver.wake.clock import ManualClock
from larkbot.pipeline.app import PipelineOptions, PipelineService
from larkbot.pipeline.core import alias_for
from larkbot.runtime.bootstrap import bootstrap
from larkbot.runtime.bus import Bus, connect
from larkbot.runtime.config import LarkbotConfig, NatsSettings, parse_config
from larkbot.runtime.ingress import actions_endpoint, publish_identity
from larkbot.runtime.serve import Endpoint
from larkbot.runtime.service import built

from ..driver.fakes import FakeLLM
from ..driver.harness import decide, end_turn
from ..driver.synthetic import response, tool_call
from ..driver.watch import DriverWatch
from .prefix import SENDERS, Burst, PrefixReport, conversation, figures, prefix_report, request_bytes

PLATFORM = Platform.FEISHU
BOT_ID = "ou_lark_bench"
BOT_NAME = "Lark"
T0 = 1_800_000_000_000
OFFSET_MIN = 480
#: Platform time of a member message, this long before it is received.
PLATFORM_LEAD_MS = 150
WAIT_S = 30.0


def member_message_id(chat_id: str, n: int) -> str:
    return f"om_{chat_id}_{n:06d}"


def member_event(chat_id: str, n: int, at_ms: int, sender: Sender, text: str, mention: bool) -> MessageEvent:
    nodes: tuple[Mention | Text, ...] = (Text(text=text),)
    if mention:
        nodes = (Mention(user_id=BOT_ID, text=f"@{BOT_NAME}"), Text(text=" " + text))
    message_id = member_message_id(chat_id, n)
    return MessageEvent(
        platform=PLATFORM,
        chat_id=chat_id,
        dedup_key=message_id,
        chat_type="group",
        received_at_ms=at_ms,
        timestamp_sec=(at_ms - PLATFORM_LEAD_MS) / 1000,
        utc_offset_min=OFFSET_MIN,
        message_id=message_id,
        sender=sender,
        content=Content(nodes=nodes),
    )


async def publish_event(bus: Bus, event: MessageEvent) -> None:
    """As an ingress publishes: on the chat's subject, deduplicated by ``<platform>:<dedup key>``."""
    subject = events_subject(event.platform.value, event.chat_id)
    await bus.publish(subject, event, msg_id=msg_id(event.platform.value, event.dedup_key))


class SelfEventsPlatform:
    """``actions.feishu`` answered the way ingress-feishu answers it: each idempotency key executes once
    (a repeat answers ``duplicate``); a send gets a new message id, and its synthetic self-sent
    ``MessageEvent`` (sender: the bot, ``is_self_sent``) is published to ``EVENTS`` before the result is
    returned. Other actions (typing, reactions) succeed and change nothing."""

    def __init__(self, bus: Bus, clock: ManualClock) -> None:
        self.bus = bus
        self.clock = clock
        self.sent: list[str] = []
        self.executed: dict[str, ActionResult] = {}
        self._ids = itertools.count(1)
        self.endpoint = actions_endpoint(bus, PLATFORM.value, self._handle)

    async def _handle(self, action: ActionRequest) -> ActionResult:
        done = self.executed.get(action.idempotency_key)
        if done is not None:
            return done.model_copy(update={"outcome": "duplicate"})
        ids: tuple[str, ...] = ()
        if isinstance(action, SendMessageAction):
            message_id = f"om_{action.chat_id}_bot_{next(self._ids):06d}"
            now = self.clock.now_ms()
            event = MessageEvent(
                platform=PLATFORM,
                chat_id=action.chat_id,
                dedup_key=message_id,
                chat_type="group",
                received_at_ms=now,
                timestamp_sec=now / 1000,
                utc_offset_min=OFFSET_MIN,
                message_id=message_id,
                sender=Sender(id=BOT_ID, display_name=BOT_NAME, is_bot=True),
                content=Content.from_text(action.text),
                reply_to_message_id=action.reply_to_message_id,
                is_self_sent=True,
            )
            await publish_event(self.bus, event)
            self.sent.append(message_id)
            ids = (message_id,)
        result = ActionResult(
            idempotency_key=action.idempotency_key, ok=True, outcome="done", message_ids=ids
        )
        self.executed[action.idempotency_key] = result
        return result


@dataclass
class ScriptedModel:
    """Answers of the next probe and primary requests; without one, the probe does not act and a primary
    step ends the turn. A compaction request gets a summary (:func:`summary_of`).

    With ``window_tokens`` the model has a context window, counted with its own tokenizer (one token per
    three bytes of the request's JSON, unlike the driver's estimate, which it must learn): a request
    whose tokens and output limit exceed it is refused as ``context_length`` and counted in
    ``over_window``. Every answer reports the request's tokens as its input usage."""

    probe: collections.deque[LLMReply]
    primary: collections.deque[LLMReply]
    window_tokens: int | None = None
    max_output_tokens: int = 1024
    over_window: int = 0

    @staticmethod
    def tokens(request: LLMRequest) -> int:
        return len(request.model_dump_json()) // 3

    async def __call__(self, request: LLMRequest) -> LLMReply:
        tokens = self.tokens(request)
        limit = self.window_tokens
        if limit is not None and tokens + (request.max_output_tokens or self.max_output_tokens) > limit:
            self.over_window += 1
            return LLMError(
                request_id=request.request_id,
                category="context_length",
                message=f"{tokens} tokens exceed the window of {limit}",
            )
        if request.purpose == "compaction":
            answer: LLMReply = response(text=summary_of(request))
        else:
            queue = self.probe if request.purpose == "probe" else self.primary
            default = decide("no_action", "nothing to add") if request.purpose == "probe" else end_turn()
            answer = queue.popleft() if queue else default
        update: dict[str, Any] = {"request_id": request.request_id}
        if isinstance(answer, LLMResponse) and self.window_tokens is not None:
            written = answer.message.model_dump_json()
            update["usage"] = Usage(input_tokens=tokens, output_tokens=max(1, len(written) // 3))
        return answer.model_copy(update=update)


def summary_of(request: LLMRequest) -> str:
    """A deterministic summary: the previous one's first lines, then one line naming the messages it was
    given (bounded, as a model told to stay under a size would keep it)."""
    text = "\n".join(
        p.text
        for m in request.messages
        if isinstance(m, UserMessage)
        for p in m.parts
        if isinstance(p, TextPart)
    )
    previous = re.search(r"<previous-summary>\n(.*?)\n</previous-summary>", text, re.DOTALL)
    ids = re.findall(r'<message id="([^"]+)"', text)
    lines = previous.group(1).splitlines()[-11:] if previous else []
    lines.append(
        f"- {len(ids)} messages ({ids[0] if ids else '-'} to {ids[-1] if ids else '-'}): members chatted."
    )
    return "\n".join(lines)


def bench_config(
    chat_id: str, root: Path, *, chat: dict[str, Any] | None = None, llm: dict[str, Any] | None = None
) -> LarkbotConfig:
    return parse_config(
        {
            "utc_offset_min": OFFSET_MIN,
            "services": {
                name: {"database_url": f"sqlite+aiosqlite:///{root / f'{name}.db'}", "http_host": "127.0.0.1"}
                for name in ("pipeline", "driver")
            },
            "llm": llm or {},
            "chats": {
                "default": {"display_name": BOT_NAME, **(chat or {})},
                f"{PLATFORM.value}:{chat_id}": {},
            },
        }
    )


class ReplayFakes:
    """The neighbours a replay fakes: the scripted model, the platform; made before the services."""

    def __init__(self, bus: Bus, clock: ManualClock) -> None:
        self.bus = bus
        self.clock = clock
        self.model = ScriptedModel(collections.deque(), collections.deque())
        self.llm = FakeLLM(bus, self.model)
        self.platform = SelfEventsPlatform(bus, clock)


class Replay:
    """The services and fakes of one replay (see the module docstring)."""

    def __init__(self, fakes: ReplayFakes, chat_id: str, driver: Driver, watch: DriverWatch) -> None:
        self.bus = fakes.bus
        self.chat_id = chat_id
        self.key = f"{PLATFORM.value}:{chat_id}"
        self.driver = driver
        #: What the driver replica reports (its observer).
        self.watch = watch
        self.clock = fakes.clock
        self.model = fakes.model
        self.llm = fakes.llm
        self.platform = fakes.platform
        self.members = {sender: Sender(id=sender, display_name=name) for sender, name in SENDERS}

    @property
    def chat(self) -> ChatState:
        return self.driver.chats[self.key]

    async def holds(self, message_ids: list[str]) -> None:
        """Wait until the driver's copy of the context holds these messages (rendered by the pipeline)."""
        wanted = set(message_ids)

        def reached() -> bool:
            state = self.driver.chats.get(self.key)
            if state is None:
                return False
            return wanted <= {s.message_id for s in state.context.segments}

        await self.watch.until(reached, WAIT_S)

    async def settled(self) -> None:
        """Wait until the chat's loop has looked at the current time and found nothing to do."""
        await self.watch.settled(self.chat, WAIT_S)

    async def burst(self, burst: Burst) -> None:
        if burst.activation:
            self.model.probe.append(decide("send_message", "someone asked"))
            if burst.read_old is not None:
                old = alias_for(self.chat_id, member_message_id(self.chat_id, burst.read_old))
                self.model.primary.append(response(tool_call(tools.READ_OLD, "r", message_ids=[old])))
            text = f"answer {burst.activation}"
            self.model.primary.append(response(tool_call(tools.SEND, "s", text=text)))
        sent_before = len(self.platform.sent)
        ids = []
        for line in burst.lines:
            event = member_event(
                self.chat_id, line.n, T0 + line.at_ms, self.members[line.sender], line.text, line.mention
            )
            await publish_event(self.bus, event)
            ids.append(event.message_id)
        await self.holds(ids)
        self.clock.advance(T0 + burst.wake_at_ms - self.clock.now_ms())
        await self.settled()
        # A compaction the wake-up started runs beside it; let it finish, and what its reset wakes.
        while (task := self.chat.compaction.task) is not None and not task.done():
            await asyncio.wait_for(asyncio.shield(task), WAIT_S)
            await self.settled()
        sent = self.platform.sent[sent_before:]
        if len(sent) != (1 if burst.activation else 0) or self.model.probe or self.model.primary:
            raise RuntimeError(
                f"the replay lost its script at message {burst.lines[-1].n}: {len(sent)} sends, "
                f"{len(self.model.probe)} probe and {len(self.model.primary)} primary answers left"
            )
        # The bot's send, back through the pipeline as a self-sent message, before anyone speaks again.
        await self.holds(sent)


@asynccontextmanager
async def replay_world(
    bus: Bus,
    nats_url: str,
    chat_id: str,
    root: Path,
    config: LarkbotConfig | None = None,
    *,
    gateway: bool = False,
) -> AsyncIterator[Replay]:
    """The replay's services. ``gateway``: the real LLM gateway answers ``llm.generate`` (calling the
    endpoints of ``config``) instead of the scripted model."""
    config = config or bench_config(chat_id, root)
    await bootstrap(bus.js)
    identity = BotIdentity(
        platform=PLATFORM, bot_id=BOT_ID, name=BOT_NAME, app_id="cli_bench", updated_at_ms=T0
    )
    await publish_identity(bus, identity)
    clock = ManualClock(T0)
    watch = DriverWatch()
    options = DriverOptions(
        clock=clock, replica="prefix-bench", lease_heartbeat_s=0.2, fetch_timeout_s=0.25, observer=watch
    )
    driver = DriverService(config, options)
    pipeline = PipelineService(config, PipelineOptions(replica="prefix-bench", fetch_timeout_s=0.25))
    fakes = ReplayFakes(bus, clock)
    model: AbstractAsyncContextManager[object]
    if gateway:
        from larkbot.llm_gateway.app import GatewayService

        model = built(Service.LLM_GATEWAY, GatewayService(config), config, nats_url=nats_url)
    else:
        model = _serving(fakes.llm.endpoint)
    await fakes.platform.endpoint.start()
    try:
        async with model, built(Service.PIPELINE, pipeline, config, nats_url=nats_url) as piped:
            await asyncio.wait_for(piped.components.ready.wait(), WAIT_S)
            async with built(Service.DRIVER, driver, config, nats_url=nats_url) as service:
                await watch.until(lambda: watch.holds(PARTITIONS), WAIT_S)
                yield Replay(fakes, chat_id, service.components, watch)
    finally:
        await fakes.platform.endpoint.stop()
        await _purge(bus, chat_id)


@asynccontextmanager
async def _serving(endpoint: Endpoint[Any]) -> AsyncIterator[Endpoint[Any]]:
    await endpoint.start()
    try:
        yield endpoint
    finally:
        await endpoint.stop()


async def _purge(bus: Bus, chat_id: str) -> None:
    partition = partition_of(PLATFORM.value, chat_id)
    for stream, subject in (
        (STREAM_EVENTS, events_subject(PLATFORM.value, chat_id)),
        (STREAM_CONTEXT, context_subject(PLATFORM.value, chat_id)),
    ):
        stored = subject.replace(".", f".{partition}.", 1)
        await bus.js.purge_stream(stream, subject=stored)


async def replay_on_bus(bus: Bus, nats_url: str, root: Path, messages: int) -> PrefixReport:
    chat_id = f"oc_prefix_{secrets.token_hex(4)}"
    async with replay_world(bus, nats_url, chat_id, root) as replay:
        for burst in conversation(messages):
            await replay.burst(burst)
        report = prefix_report(request_bytes(replay.llm.by_purpose("primary")))
    return PrefixReport(messages, report.requests, report.request_bytes, report.shared_bytes, report.breaks)


async def measure(nats_url: str, quick: bool) -> dict[str, Any]:
    """The ratio of a 500-message chat (120 with ``quick``); details under ``driver``."""
    messages = 120 if quick else 500
    started = time.perf_counter()
    bus = await connect(NatsSettings(), "prefix-bench", url=nats_url, give_up_after_s=30)
    try:
        with tempfile.TemporaryDirectory(prefix="larkbot-prefix-bench-") as tmp:
            report = await replay_on_bus(bus, nats_url, Path(tmp), messages)
    finally:
        await bus.close()
    return figures(report, time.perf_counter() - started)
