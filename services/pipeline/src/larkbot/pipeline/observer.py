"""What the pipeline reports as it works, to the observer it was given.

Called synchronously from the intake's own tasks, right after the change. Nothing in production observes
the pipeline (the default is :data:`UNOBSERVED`); the benchmark passes an observer that turns the reports
into a condition to wait on, so the service offers no wait-for-condition API of its own. An observer must
return at once and must not raise.
"""

from __future__ import annotations

from typing import Protocol


class PipelineObserver(Protocol):
    def events_handled(self, total: int) -> None:
        """``total`` ``EVENTS`` messages were fully handled since the start (committed, duplicate,
        archived, dropped or dead-lettered)."""


class Unobserved:
    """The observer of a pipeline nobody watches."""

    def events_handled(self, total: int) -> None:
        return None


UNOBSERVED: PipelineObserver = Unobserved()
