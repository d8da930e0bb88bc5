"""The one interpreter of the wake-up flow (``core.wake``): it sends each command the flow yields to a
:class:`WakePorts` implementation and returns the answer to the flow. The service's runner, the
benchmark's pure replay and the tests differ only in their ports.

Every command passes the middleware the caller gives (``wake.middleware``: one signature, composed once,
the first one outermost) before it reaches its port. An exception from a port or a middleware is thrown
back into the flow at its command (the flow decides what it means),
except the ones the ports call *fatal* (a second writer of a step: the wake-up stops at once).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from functools import partial
from typing import Any, Protocol, TypeVar, assert_never

from .core.protocol import Ack, CheckInterrupt, ModelAnswer, ModelCall, Persist, ToolDone, ToolRun
from .core.records import TurnRecord
from .core.wake import (
    AskRates,
    ChatView,
    Compact,
    LoadChain,
    LoadLatest,
    LoadMemories,
    LoadTurns,
    MarkProcessed,
    Note,
    ProbeCall,
    Rated,
    ReadChat,
    Recalled,
    Remember,
    ShowTyping,
    StoreProbe,
    WakeCommand,
    WakeFeedback,
)
from .middleware import Middleware, chain


class WakePorts(Protocol):
    async def read_chat(self) -> ChatView: ...
    async def load_turns(self, since_ms: int) -> tuple[TurnRecord, ...]: ...
    async def load_chain(self, chain_id: str) -> tuple[TurnRecord, ...]: ...
    async def load_latest(self) -> TurnRecord | None: ...
    async def probe(self, call: ProbeCall) -> ModelAnswer: ...
    async def store_probe(self, command: StoreProbe) -> None: ...
    async def compact(self) -> bool: ...
    async def load_memories(self, persons: tuple[str, ...], limit: int) -> Recalled: ...
    async def ask_rates(self, command: AskRates) -> Rated: ...
    def remember(self, command: Remember) -> None: ...
    def show_typing(self, started_ms: int) -> None: ...
    async def mark_processed(self, until_ms: int) -> None: ...
    def note(self, note: Note) -> None: ...
    async def model(self, call: ModelCall) -> ModelAnswer: ...
    async def tool(self, run: ToolRun) -> ToolDone: ...
    async def persist(self, record: TurnRecord) -> Ack: ...
    async def check_interrupt(self, check: CheckInterrupt) -> Ack: ...
    def fatal(self, exc: Exception) -> bool: ...


async def _dispatch(command: WakeCommand, ports: WakePorts) -> WakeFeedback:
    # Ordered by frequency on the turn's path.
    if isinstance(command, ModelCall):
        return await ports.model(command)
    if isinstance(command, Persist):
        return await ports.persist(command.record)
    if isinstance(command, ToolRun):
        return await ports.tool(command)
    if isinstance(command, CheckInterrupt):
        return await ports.check_interrupt(command)
    if isinstance(command, ReadChat):
        return await ports.read_chat()
    if isinstance(command, LoadTurns):
        return await ports.load_turns(command.since_ms)
    if isinstance(command, LoadChain):
        return await ports.load_chain(command.chain_id)
    if isinstance(command, LoadLatest):
        return await ports.load_latest()
    if isinstance(command, ProbeCall):
        return await ports.probe(command)
    if isinstance(command, Compact):
        return await ports.compact()
    if isinstance(command, LoadMemories):
        return await ports.load_memories(command.persons, command.limit)
    if isinstance(command, AskRates):
        return await ports.ask_rates(command)
    if isinstance(command, StoreProbe):
        await ports.store_probe(command)
    elif isinstance(command, Remember):
        ports.remember(command)
    elif isinstance(command, ShowTyping):
        ports.show_typing(command.started_ms)
    elif isinstance(command, MarkProcessed):
        await ports.mark_processed(command.until_ms)
    elif isinstance(command, Note):
        ports.note(command)
    else:
        assert_never(command)
    return None


R = TypeVar("R")


async def interpret(
    flow: Generator[WakeCommand, Any, R], ports: WakePorts, middleware: Sequence[Middleware] = ()
) -> R:
    """Run ``flow`` (a wake-up, or one primary turn alone) to its end and return what it returns."""
    dispatch = chain(partial(_dispatch, ports=ports), middleware)
    try:
        command = next(flow)
        while True:
            try:
                feedback = await dispatch(command)
            except Exception as exc:
                if ports.fatal(exc):
                    raise
                command = flow.throw(exc)
                continue
            command = flow.send(feedback)
    except StopIteration as stop:
        outcome: R = stop.value
        return outcome
    finally:
        flow.close()
