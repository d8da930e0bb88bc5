"""The pipeline's exceptions: one tree, rooted in :mod:`larkbot.canonical.errors` (transient versus
permanent is the type)::

    LarkbotError
    ├── RetryableError
    │   ├── DatabaseUnavailable   the database did not answer or refused the transaction
    │   ├── PartitionNotOpen      a batch of a partition that is not open here
    │   ├── NotServedHere         no replica serves the chat's partition right now (a hand-over)
    │   ├── OwnerUnavailable      the holder of the partition's lease does not answer
    │   └── Unpublished           context updates the bus did not acknowledge
    └── PermanentError
        └── BeforeCursor          an event at or before a chat's compaction cursor

Where each becomes an outcome, once:

- a commit that raises :class:`DatabaseUnavailable` is retried in-process as a whole
  (``adapters.intake``, ``retry.background``): a nak would break per-chat order;
- anything a partition's batch raises — :class:`PartitionNotOpen`, :class:`DatabaseUnavailable` while it
  opens, the runtime's ``DeadLetterFailed`` and ``SequenceGap`` — restarts the partition from its resume
  point (the runtime's :class:`~larkbot.runtime.reader.PartitionReader` policy);
- :class:`Unpublished` is published again in-process (``adapters.chats``, ``retry.background``) under
  the projections' lock, so that no later update of a chat overtakes it;
- a request that raises :class:`NotServedHere` / :class:`OwnerUnavailable` is answered with a retryable
  ``ServiceError`` (``not_served`` / ``owner_unavailable``; ``app._error_reply``), any other error with
  the runtime's reply for it;
- :class:`BeforeCursor` is a broken invariant of the caller (core): it propagates and stops the service.

An ``EVENTS`` message that does not decode (:class:`~larkbot.canonical.errors.ContractError`) is
dead-lettered by the intake and read past.
"""

from __future__ import annotations

from larkbot.canonical.errors import PermanentError, RetryableError


class DatabaseUnavailable(RetryableError):
    """The database did not answer or refused the transaction; the batch is retried as a whole."""


class PartitionNotOpen(RetryableError):
    """A partition's batch reached the intake while the partition is not open here."""


class NotServedHere(RetryableError):
    """No replica serves the chat's partition right now (a hand-over is in progress)."""


class OwnerUnavailable(RetryableError):
    """The replica holding the chat's partition lease does not answer; its lease has not expired yet."""


class Unpublished(RetryableError):
    """Context updates the bus did not acknowledge (a server down, an election): published again."""

    def __init__(self, count: int) -> None:
        super().__init__(f"{count} context update(s) not acknowledged")
        self.count = count


class BeforeCursor(PermanentError):
    """An event at or before a chat's compaction cursor cannot enter its context."""
