"""The rate limits in the wake-up flow (``core.wake``) on in-memory ports and an injected clock: a member
who woke the bot too often is held and cools down while a maintainer bypasses the limit; a limited
member's message stays in the context the next wake-up shows; the chat's turns counted at the primary
only; a store that does not answer fails the wake-up for now and its retry counts nobody twice."""

from __future__ import annotations

from dataclasses import replace

from larkbot.canonical.llm import LLMResponse, Message, TextPart, UserMessage
from larkbot.driver.ratelimit.core.rates import RateLimits
from larkbot.driver.ratelimit.core.window import Limit, Window
from larkbot.driver.ratelimit.limiter import MemoryWindows, RateLimiter, RateLimitsUnavailable
from larkbot.driver.shell.core.gate import GateSettings
from larkbot.driver.tools.core import tools
from larkbot.driver.wake.core.commands import Note
from larkbot.driver.wake.core.protocol import ModelCall
from larkbot.driver.wake.core.records import Activation
from larkbot.driver.wake.core.scheduler import Wake
from larkbot.driver.wake.core.wake import ProbeCall, TransientFailure, WakeDone, WakeOutcome, WakeSettings
from larkbot.testkit.driver.scripted import DEFAULT_WAKE_SETTINGS, ScriptedPorts, wake_input
from larkbot.testkit.driver.synthetic import response, segment, tool_call

#: 2027-01-15 08:00:00 UTC: 16:00 at the inputs' +08:00.
T0 = 1_800_000_000_000
MINUTE = 60_000
#: Two wake-ups in ten minutes, then ten minutes of cooldown.
PERSON = Limit(max_hits=2, window_ms=10 * MINUTE, cooldown_ms=10 * MINUTE)
BOSS = "ou_boss"


def _settings(limits: RateLimits) -> WakeSettings:
    return replace(
        DEFAULT_WAKE_SETTINGS, rate_limits=limits, gate=GateSettings(maintainers=frozenset({BOSS}))
    )


def _decide(decision: str = "no_action") -> LLMResponse:
    return response(tool_call("decide", should_act=decision, reason="because"))


def _send() -> LLMResponse:
    return response(tool_call(tools.SEND, "s", text="hello"))


def _late_binding(messages: tuple[Message, ...]) -> str:
    last = messages[-1]
    assert isinstance(last, UserMessage)
    return "".join(p.text for p in last.parts if isinstance(p, TextPart))


class Chat:
    """One group on scripted ports: each :meth:`says` is a message followed by its wake-up."""

    def __init__(self, limits: RateLimits, store: MemoryWindows | None = None) -> None:
        self.answers: list[LLMResponse] = []
        self.ports = ScriptedPorts(script=lambda _call: self.answers.pop(0), now_ms=T0)
        self.ports.rates = RateLimiter(store or MemoryWindows())
        self.settings = _settings(limits)
        self.n = 0

    async def says(
        self, sender: str, at_min: float, *answers: LLMResponse, mentions_me: bool = False
    ) -> WakeOutcome:
        self.n += 1
        at = T0 + round(at_min * MINUTE)
        self.ports.segments.append(
            segment(self.n, sender=sender, name=sender, at_ms=at, mentions_me=mentions_me)
        )
        self.ports.now_ms = at + 1000  # the debounce
        self.answers.extend(answers)
        before = len(self.ports.calls)
        wake = wake_input(
            Wake("debounced", at, 0, None),
            settings=self.settings,
            wake_id=f"w{self.n}",
            new_chain_id=f"c{self.n}",
        )
        outcome = await self.ports.run(wake)
        self.new_calls = self.ports.calls[before:]
        return outcome

    def notes(self, kind: str) -> list[str]:
        return [n.detail for n in self.ports.notes if n.kind == kind]


async def test_a_member_hitting_the_limit_cools_down_while_a_maintainer_bypasses_it() -> None:
    chat = Chat(RateLimits(person=PERSON))
    assert await chat.says("ou_a", 0, _decide()) == WakeDone("suppressed")
    assert await chat.says("ou_a", 1, _decide()) == WakeDone("suppressed")
    # The third wake-up within ten minutes: held before the probe, its input handled.
    assert await chat.says("ou_a", 2) == WakeDone("held")
    assert chat.new_calls == []
    assert chat.ports.processed_until_ms == T0 + 2 * MINUTE
    assert chat.notes("held") == ["rate_limit"]
    assert chat.notes("rate_limited") == ["person:window"]
    # A mention does not lift a cooldown.
    assert await chat.says("ou_a", 5, mentions_me=True) == WakeDone("held")
    assert chat.notes("rate_limited")[-1] == "person:cooldown"
    # A maintainer is never limited (and counted nowhere), as often as they write.
    for minute in (6, 6.5, 7):
        assert await chat.says(BOSS, minute, _decide()) == WakeDone("suppressed")
    # Another member still wakes the bot: the limited one's messages are in what the probe is shown,
    # and the probe is told who is limited until when.
    assert await chat.says("ou_b", 8, _decide()) == WakeDone("suppressed")
    (probe,) = chat.new_calls
    assert isinstance(probe, ProbeCall)
    shown = str(probe.messages[:-1])
    assert "message number 3" in shown
    assert "message number 4" in shown
    assert "the messages of uid ou_a (until 16:12) no longer wake you" in _late_binding(probe.messages)
    assert "Rate limit" not in shown  # never in the cached prefix
    # The cooldown ends twelve minutes in (ten after the refusal at minute 2): a fresh window.
    assert await chat.says("ou_a", 11.9) == WakeDone("held")
    assert await chat.says("ou_a", 12, _decide()) == WakeDone("suppressed")
    assert await chat.says("ou_a", 13, _decide()) == WakeDone("suppressed")
    assert await chat.says("ou_a", 14) == WakeDone("held")
    assert chat.notes("rate_limited") == ["person:window", *["person:cooldown"] * 2, "person:window"]


async def test_a_limited_members_message_reaches_the_primarys_history_when_another_wakes_it() -> None:
    chat = Chat(RateLimits(person=replace(PERSON, max_hits=1)))
    assert await chat.says("ou_a", 0, _decide()) == WakeDone("suppressed")
    assert await chat.says("ou_a", 1, mentions_me=True) == WakeDone("held")
    assert await chat.says("ou_b", 2, _decide("send_message"), _send()) == WakeDone("probe")
    primary = next(c for c in chat.new_calls if isinstance(c, ModelCall))
    assert "message number 2" in str(primary.messages[:-1])  # the held mention, in the history
    assert "uid ou_a" in _late_binding(primary.messages)
    assert [t.sent for t in chat.ports.turns] == [True]


async def test_the_chats_turns_are_counted_at_the_primary_and_a_full_window_holds_everyone() -> None:
    max_turns = 2
    chat = Chat(RateLimits(chat=Limit(max_turns, 30 * MINUTE, 5 * MINUTE)))
    # A probe that stays silent costs the chat nothing.
    for minute in range(3):
        assert await chat.says(f"ou_{minute}", minute, _decide()) == WakeDone("suppressed")
    for minute in range(3, 3 + max_turns):
        assert await chat.says(f"ou_{minute}", minute, _decide("send_message"), _send()) == WakeDone("probe")
    # The next would be a third turn: held for everyone, a mention too, for the cooldown.
    assert await chat.says("ou_x", 6, mentions_me=True) == WakeDone("held")
    assert await chat.says("ou_y", 9) == WakeDone("held")
    assert chat.notes("rate_limited") == ["chat:window", "chat:cooldown"]
    # A maintainer bypasses the chat's limit too.
    assert await chat.says(BOSS, 10, _decide("send_message"), _send()) == WakeDone("probe")
    # After the cooldown a fresh window, where the maintainer's turn counted.
    assert await chat.says("ou_z", 11.1, _decide("send_message"), _send()) == WakeDone("probe")
    assert await chat.says("ou_w", 12) == WakeDone("held")
    assert len(chat.ports.turns) == max_turns + 2


class Flaky(MemoryWindows):
    """A store whose first write does not answer."""

    failed = False

    async def put(self, key: str, window: Window, revision: int) -> bool:
        if not self.failed:
            self.failed = True
            raise RateLimitsUnavailable("rate-limits write: TimeoutError")
        return await super().put(key, window, revision)


async def test_a_store_that_does_not_answer_fails_the_wake_up_for_now_and_its_retry_counts_once() -> None:
    store = Flaky()
    chat = Chat(RateLimits(person=PERSON, chat=Limit(5, 10 * MINUTE)), store)
    outcome = await chat.says("ou_a", 0)
    assert isinstance(outcome, TransientFailure)
    assert chat.new_calls == []
    assert chat.ports.processed_until_ms == 0
    # The retry (same input) counts the member once, then once more for a second attempt after that.
    retry = wake_input(Wake("retry", T0, 1, None), settings=chat.settings)
    for _attempt in range(2):
        chat.answers.append(_decide())
        chat.ports.processed_until_ms = 0  # as if the attempt had failed after counting
        assert await chat.ports.run(retry) == WakeDone("suppressed")
    (person,) = [w for k, (w, _rev) in store.records.items() if k.startswith("person.")]
    assert person.hits == (T0,)


async def test_a_retry_carrying_its_activation_is_not_limited_and_its_turn_is_counted_once() -> None:
    store = MemoryWindows()
    chat = Chat(RateLimits(person=replace(PERSON, max_hits=1), chat=Limit(1, 10 * MINUTE)), store)
    assert await chat.says("ou_a", 0, _decide("send_message"), _send()) == WakeDone("probe")
    chat.answers.append(_send())
    retry = wake_input(Wake("retry", T0, 1, Activation("send_message", "asked")), settings=chat.settings)
    assert await chat.ports.run(retry) == WakeDone("activation")
    (turns,) = [w for k, (w, _rev) in store.records.items() if k.startswith("chat.")]
    assert turns.hits == (T0,)
    assert Note("rate_limited", "chat:window") not in chat.ports.notes


async def test_off_unless_configured_nothing_is_asked() -> None:
    chat = Chat(RateLimits())
    for minute in range(5):
        assert await chat.says("ou_a", minute, _decide()) == WakeDone("suppressed")
    assert chat.ports.rate_asks == []
