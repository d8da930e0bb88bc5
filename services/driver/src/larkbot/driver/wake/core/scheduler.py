"""Per-chat wake-up scheduling (SPEC §4.1, §4.4) as pure state transitions.

Debounce: fire at the trigger sender's last input + ``initial_delay``, pushed to the last typing signal +
``typing_extend``, capped at the window start + ``max_delay``. The trigger is the sender of the first
unprocessed input; other senders never extend the delay. A wake-up takes every pending input with it
("in flight"); input arriving while it runs starts a new window, seen after the running step is persisted.

Failures: a transient failure schedules a retry of the same context after each of the chat's
``transient_retry_delays_s`` in turn (5 s, then 20 s by default), carrying a probe
activation already obtained; newer external input supersedes a pending retry (the normal debounced wake-up
runs with a fresh count). Anything else, or exhausted retries, drops the context: it is not rerun until
new input arrives (the latch). Typing never postpones a retry.

A wake-up the database could not serve (:func:`deferred`) is retried after a delay the caller draws from
its backoff, as often as it takes: never latched, and not counted against the transient retries (its
``deferrals`` grow the delay instead). Newer input supersedes it like any retry.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from .records import Activation

WakeKind = Literal["debounced", "retry", "resume"]


@dataclass(frozen=True, slots=True)
class Debounce:
    """A chat's timing settings."""

    initial_delay_ms: int = 1000
    typing_extend_ms: int = 5000
    max_delay_ms: int = 30000
    retry_delays_ms: tuple[int, ...] = (5000, 20000)


@dataclass(frozen=True, slots=True)
class Input:
    sender_id: str
    at_ms: int


@dataclass(frozen=True, slots=True)
class Retry:
    attempt: int
    due_ms: int
    input_until_ms: int
    activation: Activation | None
    #: Retries in a row of a wake-up the database could not serve (:func:`deferred`).
    deferrals: int = 0


@dataclass(frozen=True, slots=True)
class Schedule:
    inputs: tuple[Input, ...] = ()
    last_typing_ms: int | None = None
    retry: Retry | None = None
    #: An interrupted chain found at start-up: continue it once without waiting for input.
    resume: bool = False
    running: bool = False


@dataclass(frozen=True, slots=True)
class Wait:
    until_ms: int | None


@dataclass(frozen=True, slots=True)
class Wake:
    kind: WakeKind
    input_until_ms: int
    attempt: int
    activation: Activation | None
    #: Retries in a row of a wake-up the database could not serve (:func:`deferred`).
    deferrals: int = 0


def on_input(state: Schedule, sender_id: str, at_ms: int) -> Schedule:
    retry = state.retry
    if retry is not None and at_ms > retry.input_until_ms:
        retry = None  # superseded: the new input gets the normal debounce and a fresh retry count
    return replace(state, inputs=(*state.inputs, Input(sender_id, at_ms)), retry=retry)


def on_typing(state: Schedule, at_ms: int) -> Schedule:
    if state.last_typing_ms is not None and state.last_typing_ms >= at_ms:
        return state
    return replace(state, last_typing_ms=at_ms)


def due_ms(state: Schedule, cfg: Debounce) -> int | None:
    """When the debounced wake-up of the pending inputs fires (``None``: nothing pending)."""
    if not state.inputs:
        return None
    first = state.inputs[0]
    trigger_last = max(i.at_ms for i in state.inputs if i.sender_id == first.sender_id)
    fire = trigger_last + cfg.initial_delay_ms
    if state.last_typing_ms is not None:
        fire = max(fire, state.last_typing_ms + cfg.typing_extend_ms)
    return min(fire, first.at_ms + cfg.max_delay_ms)


def next_action(state: Schedule, now_ms: int, cfg: Debounce) -> Wait | Wake:
    if state.running:
        return Wait(None)
    retry = state.retry
    if retry is not None and retry.due_ms <= now_ms:
        return Wake("retry", retry.input_until_ms, retry.attempt, retry.activation, retry.deferrals)
    due = due_ms(state, cfg)
    if due is not None and due <= now_ms:
        return Wake("debounced", max(i.at_ms for i in state.inputs), 0, None)
    if state.resume:
        return Wake("resume", 0, 0, None)
    candidates = [t for t in (due, retry.due_ms if retry else None) if t is not None]
    return Wait(min(candidates) if candidates else None)


def begin(state: Schedule, wake: Wake) -> Schedule:
    """The wake-up takes the pending inputs (and the retry it runs) with it."""
    if wake.kind == "retry":
        return replace(state, retry=None, running=True, resume=False)
    inputs = tuple(i for i in state.inputs if i.at_ms > wake.input_until_ms)
    return replace(state, inputs=inputs, running=True, resume=False)


def succeeded(state: Schedule) -> Schedule:
    return replace(state, running=False)


def failed_permanently(state: Schedule) -> Schedule:
    """The latch: the in-flight context is dropped; only new input runs again."""
    return replace(state, running=False)


def failed_transiently(
    state: Schedule, wake: Wake, now_ms: int, activation: Activation | None, delays_ms: tuple[int, ...]
) -> tuple[Schedule, bool]:
    """Schedule the next retry; returns ``(state, retried)`` (``False``: superseded or exhausted)."""
    state = replace(state, running=False)
    if any(i.at_ms > wake.input_until_ms for i in state.inputs):
        return state, False
    attempt = wake.attempt if wake.kind == "retry" else 0
    if attempt >= len(delays_ms):
        return state, False
    retry = Retry(attempt + 1, now_ms + delays_ms[attempt], wake.input_until_ms, activation)
    return replace(state, retry=retry), True


def deferred(
    state: Schedule, wake: Wake, now_ms: int, activation: Activation | None, delay_ms: int
) -> tuple[Schedule, bool]:
    """Retry a wake-up the database could not serve after ``delay_ms``; returns ``(state, retried)``
    (``False``: newer input supersedes it — the wake-up of that input takes this one's input with it)."""
    state = replace(state, running=False)
    if any(i.at_ms > wake.input_until_ms for i in state.inputs):
        return state, False
    attempt = wake.attempt if wake.kind == "retry" else 0
    retry = Retry(attempt, now_ms + delay_ms, wake.input_until_ms, activation, wake.deferrals + 1)
    return replace(state, retry=retry), True
