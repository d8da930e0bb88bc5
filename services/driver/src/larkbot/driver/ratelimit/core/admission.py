"""The rate limits' part of a wake-up's flow (``wake.core.wake``): what it asks of the store before the
probe, whether it is held, the late-binding lines it adds, and the chat's turn counted when the primary
starts (what is counted and why: ``rates``). Sans-I/O like the flow: it yields ``AskRates`` and ``Note``
commands; a store that does not answer (a ``RetryableError`` thrown back at its command) makes the
wake-up fail for now, retried after the chat's delays, its hits counted once."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

from larkbot.canonical.errors import RetryableError
from larkbot.driver.wake.core.commands import (
    AskRates,
    ChatView,
    Note,
    Rated,
    TransientFailure,
    WakeCommand,
    WakeFeedback,
    WakeInput,
)
from larkbot.driver.wake.core.records import Activation

from . import rates
from .window import Verdict

Step = Generator[WakeCommand, WakeFeedback, "Limited | TransientFailure"]


@dataclass(frozen=True, slots=True)
class Limited:
    """What the rate limits say of a wake-up: held, or going on with these late-binding lines."""

    held: bool = False
    lines: tuple[str, ...] = ()


def _ask(
    asks: tuple[rates.RateAsk, ...], now_ms: int, activation: Activation | None = None
) -> Generator[WakeCommand, WakeFeedback, tuple[Verdict, ...] | TransientFailure]:
    try:
        rated = yield AskRates(asks, now_ms)
    except RetryableError as exc:
        return TransientFailure(f"rate limits: {exc}", activation)
    assert isinstance(rated, Rated)
    return rated.verdicts


def admit(w: WakeInput, view: ChatView) -> Step:
    """Before the probe: the chat's window first (a full one holds the wake-up and counts no person),
    then each member whose input the wake-up carries, then a look at the others who wrote since the bot
    last acted (for the probe's late-binding line)."""
    limits = w.settings.rate_limits
    if not limits.on:
        return Limited()
    maintainers, blocked = w.settings.gate.maintainers, w.settings.blocked_users
    found = rates.triggers(view.segments, view.processed_until_ms, maintainers, blocked)
    if found.bypass or not found.persons:
        return Limited()
    if limits.chat is not None:
        ask = rates.chat_ask(w.platform, w.chat_id, limits.chat, w.input_until_ms, "check")
        checked = yield from _ask((ask,), view.now_ms)
        if isinstance(checked, TransientFailure):
            return checked
        (verdict,) = checked
        if verdict.reason is not None:
            yield Note("rate_limited", f"chat:{verdict.reason}")
            return Limited(held=True)
    if limits.person is None:
        return Limited()
    asks = rates.person_asks(w.platform, found, limits.person)
    verdicts = yield from _ask(asks, view.now_ms)
    if isinstance(verdicts, TransientFailure):
        return verdicts
    refused = tuple((a.subject, v) for a, v in zip(asks, verdicts, strict=True) if v.reason is not None)
    for _subject, v in refused:
        yield Note("rate_limited", f"person:{v.reason}")
    if len(refused) == len(asks):
        return Limited(held=True)
    peeks = rates.peek_asks(
        w.platform,
        view.segments,
        found,
        since_ms=view.last_action_ms,
        now_ms=view.now_ms,
        limit=limits.person,
        maintainers=maintainers,
        blocked=blocked,
    )
    looked: tuple[Verdict, ...] | TransientFailure = ()
    if peeks:
        looked = yield from _ask(peeks, view.now_ms)
    if isinstance(looked, TransientFailure):
        return looked
    others = tuple((a.subject, v) for a, v in zip(peeks, looked, strict=True) if v.reason is not None)
    line = rates.limited_line((*refused, *others), w.utc_offset_min)
    return Limited(lines=() if line is None else (line,))


def count_turn(
    w: WakeInput, now_ms: int, activation: Activation | None
) -> Generator[WakeCommand, WakeFeedback, TransientFailure | None]:
    """When a new chain's primary turn starts: one hit of the chat's window (the end of the wake-up's
    input, so a retry counts it once). ``None``: counted, or the chat has no turn limit."""
    limit = w.settings.rate_limits.chat
    if limit is None:
        return None
    ask = rates.chat_ask(w.platform, w.chat_id, limit, w.input_until_ms, "record")
    counted = yield from _ask((ask,), now_ms, activation)
    return counted if isinstance(counted, TransientFailure) else None


__all__ = ["Limited", "admit", "count_turn"]
