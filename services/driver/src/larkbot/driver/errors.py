"""The driver's exceptions: one tree, rooted in :mod:`larkbot.canonical.errors`. Transient versus
permanent is the type, never a flag::

    LarkbotError
    ├── WakeFailed                 a wake-up failed; raised as one of its kinds, never itself
    │   ├── WakeRetryable          (also RetryableError) failed for now: the chat's loop retries it after
    │   │   │                      its ``transient_retry_delays_s``, reusing the probe's ``activation``
    │   │   └── WakeDeferred       the database was unavailable (``runtime.db.DatabaseUnavailable``):
    │   │                          retried after ``retry.background``'s backoff however often, never
    │   │                          latched, reusing the probe's ``activation``
    │   └── WakeFinal              (also PermanentError) failed for good: the context is latched until
    │                              new input
    ├── RetryableError
    │   ├── ActionUnanswered       no ingress answered a send or reaction after every attempt: the step
    │   │                          stays pending and the wake-up's retry redoes it
    │   ├── Gap                    a context update does not follow the copy held: a snapshot replaces it
    │   ├── NotHeld                (wake.ownership) an update of a chat this replica does not hold:
    │   │                          nak'ed, so JetStream redelivers it to the owner
    │   ├── _StillOpen             (wake.clients) an action's outcome is open: asked again
    │   ├── DriverNotReady         (read) the driver's database does not answer or is not migrated yet
    │   └── DatabaseUnavailable    (runtime.db) a transaction a retry may fix: locked, pool exhausted,
    │                              connection lost
    └── PermanentError
        ├── StepConflict           the step is written already: another replica drives the chat
        ├── MemoryNotFound         a memory id that does not exist (or belongs to another person)
        ├── InvalidAnswer          a consolidation answer that cannot be applied
        └── ConsolidationRefused   the model answered a consolidation with an error

Where each is mapped: the chat's loop (``wake.chatstate``) retries a :class:`WakeRetryable` (a
:class:`WakeDeferred` on its own schedule) and latches on a :class:`WakeFinal` — the one place a wake-up's
failure becomes a schedule; a ``DatabaseUnavailable`` stops the wake-up's flow at once (the interpreter's
ports call it fatal) and leaves the runner as a :class:`WakeDeferred`, and one met while saving the chat's
marks keeps them to be saved again (the loop never dies of it); the context consumer
(``runtime.consume``) naks a ``RetryableError`` that escapes a handler; the consolidator records any
failure of a group's merge and backs that group off; the memory tools answer :class:`MemoryNotFound` to
the model as a refusal.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from larkbot.canonical.errors import LarkbotError, PermanentError, RetryableError

if TYPE_CHECKING:
    from .wake.core.records import Activation

__all__ = [
    "ActionUnanswered",
    "ConsolidationRefused",
    "Gap",
    "InvalidAnswer",
    "MemoryNotFound",
    "StepConflict",
    "WakeDeferred",
    "WakeFailed",
    "WakeFinal",
    "WakeRetryable",
]


class WakeFailed(LarkbotError):
    """A wake-up failed (the reason is the message); ``activation`` is the probe's decision it ran on."""

    def __init__(self, reason: str, *, activation: Activation | None) -> None:
        super().__init__(reason)
        self.activation = activation


class WakeRetryable(WakeFailed, RetryableError):
    """A wake-up that failed for now (a provider's transient error, an unanswered request before the
    deadline, a step left pending): retried."""


class WakeDeferred(WakeRetryable):
    """A wake-up the database could not serve now (locked, out of connections, unreachable): retried after
    a backoff for as long as it takes, never latched. A step it wrote ahead stays pending: the retry
    redoes it under the same idempotency keys."""


class WakeFinal(WakeFailed, PermanentError):
    """A wake-up that failed for good (a refusal, a request that never fits, a crash): latched."""


class ActionUnanswered(RetryableError):
    """A send or reaction that no ingress answered after every attempt."""


class Gap(RetryableError):
    """The update does not apply to what we hold; fetch a snapshot."""


class StepConflict(PermanentError):
    """A turn response for the step exists already (not as the pending version this write replaces):
    another replica drives the chat."""


class MemoryNotFound(PermanentError):
    """A memory id that does not exist (or, as a reference, belongs to another person)."""

    def __init__(self, message: str, ids: Sequence[int] = ()) -> None:
        super().__init__(message)
        self.ids = tuple(ids)


class InvalidAnswer(PermanentError):
    """The model's answer cannot be applied; the message says why (for the log)."""


class ConsolidationRefused(PermanentError):
    """The model answered a consolidation request with an error."""
