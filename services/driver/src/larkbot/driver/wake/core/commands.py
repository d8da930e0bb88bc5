"""What one wake-up's flow (:mod:`.wake`) takes, yields, receives and returns: its inputs, its commands and
their feedback, its outcomes. Pure values only.

Commands and what they answer:

================  =================================================================================
``ReadChat``      :class:`ChatView`: the chat's current context copy, summary, marks and sticky state
``LoadTurns``     the turn responses requested at or after ``since_ms``, storage order
``LoadChain``     every step of a chain
``LoadLatest``    the newest turn response (or ``None``)
``ProbeCall``     ``ModelAnswer`` of the probe request
``StoreProbe``    ``None`` (the interpreter may store it beside the primary's first call)
``Compact``       whether a compaction moved the cursor (it waits for one in progress, or runs one now
                  unless the chat's compaction is backing off)
``LoadMemories``  :class:`Recalled`: the high-importance memories of the given people usable in this
                  chat, relevance order
``Remember``      ``None``: keeps sticky per-chat state (probe window start, trim start, recovery count)
``ShowTyping``    ``None``: the best-effort typing indicator
``MarkProcessed`` ``None``: input up to ``until_ms`` is handled
``AskRates``      :class:`Rated`: the rate limits' verdict on each ask, in order (``ratelimit.core``)
``Note``          ``None``: an event to count and log
================  =================================================================================
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Literal, Protocol

from larkbot.canonical.context import Segment
from larkbot.canonical.llm import Message
from larkbot.driver.compaction.core.compaction import Summary
from larkbot.driver.manners.core.manners import Manners
from larkbot.driver.memory.core.memory import Memory
from larkbot.driver.memory.core.recall import RecallLimits
from larkbot.driver.ratelimit.core.rates import RateAsk, RateLimits
from larkbot.driver.ratelimit.core.window import Verdict
from larkbot.driver.reminders.core.reminders import Reminder
from larkbot.driver.shell.core.gate import GateSettings
from larkbot.runtime.budgets.core import SpeakingBudget

from . import prompt
from .budget import TurnBudget
from .limits import Limits
from .protocol import Command as TurnCommand
from .protocol import Feedback as TurnFeedback
from .records import Activation, ProbeRecord, TurnRecord
from .scheduler import Wake

Path = Literal["continuation", "activation", "probe", "braked", "held", "suppressed", "recovery"]


# -- inputs -------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class WakeSettings:
    """The chat's settings as the wake-up uses them (its size limits come with the chat: ``ChatView``)."""

    probe_enabled: bool
    bot_exchange_cap: int
    budget: TurnBudget
    probe_timeout_ms: int
    reasoning_replay: int
    recover_max_age_ms: int = 10 * 60 * 1000
    recover_attempts: int = 3
    #: The shell tools' maintainer gate (``core.gate``).
    gate: GateSettings = field(default_factory=GateSettings)
    #: Senders whose messages never wake the bot (the chat's ``blocked_users``).
    blocked_users: frozenset[str] = frozenset()
    #: The chat's manners: share of voice, quiet hours, talk level (``manners.core``).
    manners: Manners = field(default_factory=Manners)
    #: The chat's rate limits per person and for the chat (``ratelimit.core``); off unless configured.
    rate_limits: RateLimits = field(default_factory=RateLimits)


@dataclass(frozen=True, slots=True)
class WakeInput:
    platform: str
    chat_id: str
    wake_id: str
    wake: Wake
    input_until_ms: int
    persona_name: str
    persona_texts: tuple[str, ...]
    utc_offset_min: int
    settings: WakeSettings
    #: The chain id of a new chain (the interpreter draws it; the core has no randomness).
    new_chain_id: str
    #: Memory on for this chat: the memory tools, their rules in the system prompt and the late-binding
    #: ``<memory>`` block within these bounds. ``None``: off.
    memory: RecallLimits | None = None
    #: ``ban_spammer`` offered in this chat (``ban_spammer_enabled``).
    ban_spammer: bool = False
    #: The reminder tools offered in this chat (``reminders.enabled``).
    reminders: bool = False


@dataclass(frozen=True, slots=True)
class ChatView:
    #: The context after the summary's cursor (the pipeline's copy may still hold what a new summary
    #: covers until its reset arrives; the reader leaves that out).
    segments: tuple[Segment, ...]
    summary: Summary | None
    last_action_ms: int
    processed_until_ms: int
    latest_external_ms: int
    probe_start: str | None
    trim_from_ms: int | None
    recovery_failures: int
    stopping: bool
    now_ms: int
    #: The chat's size limits in estimate units, as the models' windows are known now (configured or
    #: learnt from a refusal, calibrated): read again with the chat after every refusal.
    limits: Limits
    #: The chat's background shell tasks still running (shown in the late-binding message).
    active_tasks: tuple[prompt.ActiveTask, ...] = ()
    #: What the platform budgets leave the bot to say here (``driver.budgets``); ``None``: unknown.
    speaking_budget: SpeakingBudget | None = None
    #: The chat's pending reminders, soonest first (shown in the late-binding message).
    reminders: tuple[Reminder, ...] = ()

    @property
    def turns_from_ms(self) -> int:
        return self.summary.turns_from_ms if self.summary is not None else 0


# -- commands -----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ReadChat:
    pass


@dataclass(frozen=True, slots=True)
class LoadTurns:
    since_ms: int


@dataclass(frozen=True, slots=True)
class LoadChain:
    chain_id: str


@dataclass(frozen=True, slots=True)
class LoadLatest:
    pass


@dataclass(frozen=True, slots=True)
class ProbeCall:
    system: str
    messages: tuple[Message, ...]
    deadline_ms: int


@dataclass(frozen=True, slots=True)
class StoreProbe:
    record: ProbeRecord
    #: The interpreter may store it beside the primary's first model call instead of before it.
    beside_primary: bool


@dataclass(frozen=True, slots=True)
class Compact:
    pass


@dataclass(frozen=True, slots=True)
class LoadMemories:
    #: Person ids, most relevant first.
    persons: tuple[str, ...]
    limit: int


@dataclass(frozen=True, slots=True)
class Recalled:
    """The answer to :class:`LoadMemories`: memories in relevance order."""

    memories: tuple[Memory, ...]


@dataclass(frozen=True, slots=True)
class AskRates:
    asks: tuple[RateAsk, ...]
    now_ms: int


@dataclass(frozen=True, slots=True)
class Rated:
    """The answer to :class:`AskRates`: one verdict per ask, in order."""

    verdicts: tuple[Verdict, ...]


@dataclass(frozen=True, slots=True)
class Remember:
    probe_start: str | Literal["keep"] | None = "keep"
    trim_from_ms: int | Literal["keep"] | None = "keep"
    recovery_failures: int | None = None


class Sticky(Protocol):
    """What :class:`Remember` updates: the chat's sticky state, wherever it is kept."""

    probe_start: str | None
    trim_from_ms: int | None
    recovery_failures: int


def remember(target: Sticky, command: Remember) -> None:
    if command.probe_start != "keep":
        target.probe_start = command.probe_start
    if command.trim_from_ms != "keep":
        target.trim_from_ms = command.trim_from_ms
    if command.recovery_failures is not None:
        target.recovery_failures = command.recovery_failures


@dataclass(frozen=True, slots=True)
class ShowTyping:
    started_ms: int


@dataclass(frozen=True, slots=True)
class MarkProcessed:
    until_ms: int


NoteKind = Literal[
    "path",
    "probe",
    "suppressed",
    "probe_omitted",
    "braked",
    "held",
    "rate_limited",
    "recovering",
    "recovered",
    "recover_failed",
    "context_length",
    "trimmed",
    "clipped",
    "turn",
    "gate",
    "gate_opened",
]


@dataclass(frozen=True, slots=True)
class Note:
    kind: NoteKind
    detail: str = ""


WakeCommand = (
    ReadChat
    | LoadTurns
    | LoadChain
    | LoadLatest
    | ProbeCall
    | StoreProbe
    | Compact
    | LoadMemories
    | Remember
    | ShowTyping
    | MarkProcessed
    | AskRates
    | Note
    | TurnCommand
)
WakeFeedback = ChatView | tuple[TurnRecord, ...] | Recalled | Rated | TurnRecord | bool | None | TurnFeedback


# -- outcomes -----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class WakeDone:
    path: Path


@dataclass(frozen=True, slots=True)
class TransientFailure:
    """A wake-up that failed for now: retried (carrying ``activation``)."""

    reason: str
    activation: Activation | None


@dataclass(frozen=True, slots=True)
class FinalFailure:
    """A wake-up that failed for good: the context latches until new input."""

    reason: str
    activation: Activation | None


#: How a wake-up fails: transient or final is the type.
WakeFailure = TransientFailure | FinalFailure
WakeOutcome = WakeDone | WakeFailure
Flow = Generator[WakeCommand, WakeFeedback, WakeOutcome]
