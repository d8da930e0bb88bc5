"""The retry policies (``retry``): one :class:`BackoffSettings` per kind of work that retries."""

from __future__ import annotations

from pydantic import Field, model_validator

from ._base import _Section


class BackoffSettings(_Section):
    """One retry policy (:class:`larkbot.runtime.retry.RetryPolicy`): ``initial_s`` doubling by ``factor``
    to ``max_s``, each wait spread by ±``jitter`` of itself; at most ``max_attempts`` attempts (``null``:
    until the caller's deadline or stop) and no single wait over ``max_wait_s``."""

    initial_s: float = Field(default=0.5, gt=0)
    max_s: float = Field(default=8.0, gt=0)
    factor: float = Field(default=2.0, ge=1)
    jitter: float = Field(default=0.25, ge=0, lt=1)
    max_attempts: int | None = Field(default=8, ge=1)
    max_wait_s: float = Field(default=60.0, gt=0)

    @model_validator(mode="after")
    def _ordered(self) -> BackoffSettings:
        if self.initial_s > self.max_s:
            raise ValueError(f"initial_s ({self.initial_s}) exceeds max_s ({self.max_s})")
        return self


class RetrySettings(_Section):
    """The retry policies (``retry.*``), each a :class:`BackoffSettings`."""

    #: A platform send of an ingress (same uuid / ledger record), bounded by the action's deadline.
    platform_send: BackoffSettings = BackoffSettings()
    #: The driver asking an ingress again about an action whose outcome is open; the count is the
    #: chat's ``action_attempts``.
    action_reask: BackoffSettings = BackoffSettings(max_s=4.0, max_attempts=None)
    #: Background work that must not give up (connect, restart a partition, retry a commit, take a
    #: partition over again after a failed take-over, a driver's wake-up or marks the database refused).
    background: BackoffSettings = BackoffSettings(max_s=30.0, max_attempts=None)
    #: The LLM gateway's attempts of one provider call, bounded by the request's ``deadline_ms``; a
    #: provider's ``retry-after`` is a rate limit's wait, taken as it is.
    llm_call: BackoffSettings = BackoffSettings(initial_s=0.25, max_attempts=4)
    #: An ingress storing an inbound update on the bus (its event, a migration, a dead-letter record):
    #: tried until stored — the update stays unconfirmed meanwhile — at most ``max_s`` apart, so that it
    #: is stored within seconds of the bus coming back.
    inbound_store: BackoffSettings = BackoffSettings(
        initial_s=0.25, max_s=10.0, max_attempts=None, max_wait_s=12.5
    )
    #: A driver asking the pipeline again for a chat's snapshot as it takes the chat over: it never gives
    #: up (a chat without a snapshot has no loop), and a short cap, because the chat waits meanwhile.
    takeover_snapshot: BackoffSettings = BackoffSettings(max_s=10.0, max_attempts=None)
