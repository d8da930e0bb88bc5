"""Conditions over a running pipeline service: its observer's reports (``larkbot.pipeline.observer``) and
the partition reader's own predicate."""

from __future__ import annotations

from collections.abc import Callable

from larkbot.pipeline.app import PipelineService

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


def caught_up(service: PipelineService) -> bool:
    """Every partition the service owns is consumed and was read to its end, and nothing waits to commit.

    Read from the ownership's progress (``Ownership.progress()``: the partition readers' states)."""
    return service.ownership is not None and service.ownership.progress().caught_up
