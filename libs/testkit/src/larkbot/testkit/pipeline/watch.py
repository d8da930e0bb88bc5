"""Conditions over a running pipeline service: its observer's reports (``larkbot.pipeline.observer``) and
"caught up", read from its components."""

from __future__ import annotations

from collections.abc import Callable

from larkbot.pipeline.app import Pipeline

from ..conditions import DEFAULT_TIMEOUT_S, Conditions


class PipelineWatch:
    """Implements :class:`larkbot.pipeline.observer.PipelineObserver`."""

    def __init__(self) -> None:
        self.conditions = Conditions()
        #: ``EVENTS`` messages the intake reported fully handled.
        self.handled = 0

    def events_handled(self, total: int) -> None:
        self.handled = total
        self.conditions.changed()

    async def until(self, predicate: Callable[[], bool], timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        await self.conditions.until(predicate, timeout_s)


def caught_up(service: Pipeline) -> bool:
    """Every partition the service owns is consumed and was read to its end, and nothing waits to commit.

    Read from the ownership's progress (``Ownership.progress()``: the assignment settled, every reader
    consuming), each partition reader's ``drained`` and the intake's admission queue."""
    ownership = service.ownership
    readers = [reader for reader, _task in ownership.readers.values()]
    drained = all(reader.drained for reader in readers) and len(service.intake.admission) == 0
    return ownership.progress().serving and drained
