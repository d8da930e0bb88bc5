"""In-memory ports for the wake-up flow: a chat held in lists, a scripted model and scripted tools, a clock
that moves only when told. The pure prefix benchmark and the flow's unit tests drive ``core.wake`` through
the same interpreter as the service, with these ports in place of the bus and the database."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from larkbot.canonical.context import Segment
from larkbot.canonical.llm import LLMError, LLMResponse, TextPart
from larkbot.driver.compaction.core.compaction import Summary
from larkbot.driver.memory.core.memory import Memory
from larkbot.driver.memory.core.recall import RecallLimits
from larkbot.driver.ratelimit.limiter import MemoryWindows, RateLimiter
from larkbot.driver.wake.core.budget import TurnBudget
from larkbot.driver.wake.core.limits import Limits
from larkbot.driver.wake.core.protocol import Ack, CheckInterrupt, ModelAnswer, ModelCall, ToolDone, ToolRun
from larkbot.driver.wake.core.records import ProbeRecord, TurnRecord
from larkbot.driver.wake.core.scheduler import Wake
from larkbot.driver.wake.core.wake import (
    AskRates,
    ChatView,
    Note,
    ProbeCall,
    Rated,
    Recalled,
    Remember,
    StoreProbe,
    WakeInput,
    WakeOutcome,
    WakeSettings,
    remember,
    wake_up,
)
from larkbot.driver.wake.interpreter import interpret

Answer = LLMResponse | LLMError

#: The chat settings of a wake-up with the service's defaults (the benchmark and the flow tests vary them).
DEFAULT_WAKE_SETTINGS = WakeSettings(
    probe_enabled=True,
    bot_exchange_cap=4,
    budget=TurnBudget(),
    probe_timeout_ms=15_000,
    reasoning_replay=3,
)
#: The chat's size limits with no model window known (the flow tests set one).
DEFAULT_LIMITS = Limits(
    request_limit=None,
    trigger=60_000,
    target=1_000,
    compaction_input_cap=80_000,
    probe_budget=20_000,
    summary_max=3_000,
    probe_summary_max=2_000,
)


def wake_input(
    wake: Wake,
    *,
    settings: WakeSettings = DEFAULT_WAKE_SETTINGS,
    chat_id: str = "oc",
    wake_id: str = "w1",
    new_chain_id: str = "c1",
    persona_texts: tuple[str, ...] = (),
    utc_offset_min: int = 480,
    memory: RecallLimits | None = None,
) -> WakeInput:
    """A wake-up of a Feishu chat by ``Lark`` for the in-memory ports."""
    return WakeInput(
        platform="feishu",
        chat_id=chat_id,
        wake_id=wake_id,
        wake=wake,
        input_until_ms=wake.input_until_ms,
        persona_name="Lark",
        persona_texts=persona_texts,
        utc_offset_min=utc_offset_min,
        settings=settings,
        new_chain_id=new_chain_id,
        memory=memory,
    )


ModelScript = Callable[[ModelCall | ProbeCall], Answer]
ToolScript = Callable[[ToolRun], ToolDone]


def _ok(run: ToolRun) -> ToolDone:
    return ToolDone(True, (TextPart(text=f"{run.name} done"),), 0)


@dataclass
class ScriptedPorts:
    """One chat in memory. ``script`` answers probe and primary calls; ``tool_script`` runs tools (its
    ``now_ms`` is replaced by the clock's); ``compact_with`` stands for the compactor (whether the cursor
    moved)."""

    script: ModelScript
    now_ms: int
    segments: list[Segment] = field(default_factory=list)
    turns: list[TurnRecord] = field(default_factory=list)
    summary: Summary | None = None
    tool_script: ToolScript = _ok
    compact_with: Callable[[ScriptedPorts], bool] = lambda _ports: False
    #: Milliseconds each model call and each tool run take on the clock.
    call_ms: int = 0
    processed_until_ms: int = 0
    last_action_ms: int = 0
    probe_start: str | None = None
    trim_from_ms: int | None = None
    recovery_failures: int = 0
    interrupted: bool = False
    calls: list[ModelCall | ProbeCall] = field(default_factory=list)
    probes: list[ProbeRecord] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    compactions: int = 0
    #: High-importance memories by person (``load_memories`` answers from it, in the order asked).
    memories: dict[str, list[Memory]] = field(default_factory=dict)
    memory_loads: list[tuple[str, ...]] = field(default_factory=list)
    #: What ``read_chat`` answers as the chat's limits (a script may change them, as a refusal would).
    limits: Limits = DEFAULT_LIMITS
    #: The rate limits' records (shared by the ports of several chats when given the same store).
    rates: RateLimiter = field(default_factory=lambda: RateLimiter(MemoryWindows()))
    rate_asks: list[AskRates] = field(default_factory=list)

    async def read_chat(self) -> ChatView:
        externals = [s.received_at_ms for s in self.segments if not s.is_myself and s.node_type != "event"]
        cursor = self.summary.cursor if self.summary is not None else 0
        return ChatView(
            segments=tuple(s for s in self.segments if s.event_seq > cursor),
            summary=self.summary,
            last_action_ms=self.last_action_ms,
            processed_until_ms=self.processed_until_ms,
            latest_external_ms=max(externals, default=0),
            probe_start=self.probe_start,
            trim_from_ms=self.trim_from_ms,
            recovery_failures=self.recovery_failures,
            stopping=False,
            now_ms=self.now_ms,
            limits=self.limits,
        )

    async def load_turns(self, since_ms: int) -> tuple[TurnRecord, ...]:
        return tuple(t for t in self.turns if t.requested_at_ms >= since_ms)

    async def load_chain(self, chain_id: str) -> tuple[TurnRecord, ...]:
        return tuple(sorted((t for t in self.turns if t.chain_id == chain_id), key=lambda t: t.step))

    async def load_latest(self) -> TurnRecord | None:
        return self.turns[-1] if self.turns else None

    async def probe(self, call: ProbeCall) -> ModelAnswer:
        return self._answer(call)

    async def model(self, call: ModelCall) -> ModelAnswer:
        return self._answer(call)

    def _answer(self, call: ModelCall | ProbeCall) -> ModelAnswer:
        self.calls.append(call)
        self.now_ms += self.call_ms
        return ModelAnswer(self.script(call), self.now_ms)

    async def store_probe(self, command: StoreProbe) -> None:
        self.probes.append(command.record)

    async def compact(self) -> bool:
        self.compactions += 1
        return self.compact_with(self)

    async def load_memories(self, persons: tuple[str, ...], limit: int) -> Recalled:
        self.memory_loads.append(persons)
        found = [m for person in persons for m in self.memories.get(person, ())]
        return Recalled(tuple(found[:limit]))

    async def ask_rates(self, command: AskRates) -> Rated:
        self.rate_asks.append(command)
        return Rated(await self.rates.ask_all(command.asks, command.now_ms))

    def remember(self, command: Remember) -> None:
        remember(self, command)

    def show_typing(self, started_ms: int) -> None:
        return None

    async def mark_processed(self, until_ms: int) -> None:
        self.processed_until_ms = max(self.processed_until_ms, until_ms)

    def note(self, note: Note) -> None:
        self.notes.append(note)

    async def tool(self, run: ToolRun) -> ToolDone:
        self.now_ms += self.call_ms
        done = self.tool_script(run)
        return ToolDone(done.ok, done.parts, self.now_ms, final=done.final, message_ids=done.message_ids)

    async def persist(self, record: TurnRecord) -> Ack:
        index = next(
            (i for i, t in enumerate(self.turns) if (t.chain_id, t.step) == (record.chain_id, record.step)),
            None,
        )
        if index is None:
            self.turns.append(record)
        else:
            self.turns[index] = record
        if record.sent or record.reacted:
            self.last_action_ms = max(self.last_action_ms, record.requested_at_ms)
        return Ack(self.now_ms)

    async def check_interrupt(self, check: CheckInterrupt) -> Ack:
        return Ack(self.now_ms, self.interrupted)

    def fatal(self, exc: Exception) -> bool:
        return False

    async def run(self, inputs: WakeInput) -> WakeOutcome:
        return await interpret(wake_up(inputs), self)
