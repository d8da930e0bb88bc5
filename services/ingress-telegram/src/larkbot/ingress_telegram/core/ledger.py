"""The sent-ledger's records and decisions (pure): what to do with a send, given what was recorded.

The Bot API has no idempotency key, so every send is recorded under the caller's ``idempotency_key``
*before* the request leaves (``pending``) and after the answer (``done`` with the message ids, or
``failed`` when Telegram refused it, so nothing was sent). A long text is sent as several messages; the
record keeps the ids of the parts confirmed so far, so a retry after a refused part resumes after the
last confirmed one instead of repeating it. A refusal worth repeating (a 429, a 5xx answer) is retried by
the attempt that holds the record, which stays ``pending`` meanwhile (``core.retries``).

===================  ====================================================================
record found         decision
===================  ====================================================================
none                 send (after claiming the key: only one attempt may hold it)
``done``             answer ``duplicate`` with the recorded ids, send nothing
``failed``           resume: send the parts not yet confirmed
``pending``          answer ``in_progress`` (unknown, ask again): an attempt holds the key and
                     is sending or waiting to retry; repeating it could post the message twice
``pending``, older   answer ``unknown``: no attempt runs that long, so the one that claimed the
than 10 min          key died, maybe after its request left
``unknown``          answer ``unknown``: Telegram's answer was lost (a timeout, a connection
                     closed after the request was written), the message may exist
===================  ====================================================================

:func:`recorded_answer` and :func:`unknown_answer` spell a decision as the action's answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Literal

from larkbot.canonical.actions import ActionError, ActionResult


class State(StrEnum):
    PENDING = "pending"
    DONE = "done"
    FAILED = "failed"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Record:
    state: State
    message_ids: tuple[str, ...] = ()
    parts: int = 1
    updated_ms: int = 0

    def encode(self) -> bytes:
        return json.dumps(
            {
                "state": self.state.value,
                "message_ids": list(self.message_ids),
                "parts": self.parts,
                "updated_ms": self.updated_ms,
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def decode(cls, data: bytes) -> Record:
        raw = json.loads(data)
        return cls(
            state=State(raw["state"]),
            message_ids=tuple(str(i) for i in raw["message_ids"]),
            parts=int(raw["parts"]),
            updated_ms=int(raw["updated_ms"]),
        )


#: A ``pending`` record this old belongs to an attempt that died: a send gives up at its deadline (the
#: turn's, 15 s by default; a minute without one) plus one request's timeout (30 s).
STALE_PENDING_MS: Final = 10 * 60 * 1000


@dataclass(frozen=True, slots=True)
class Decision:
    action: Literal["send", "duplicate", "in_progress", "unknown"]
    #: Ids of parts already confirmed (resume after them when sending; the answer when duplicate).
    confirmed: tuple[str, ...] = ()


def decide(record: Record | None, now_ms: int) -> Decision:
    if record is None:
        return Decision("send")
    if record.state is State.DONE:
        return Decision("duplicate", record.message_ids)
    if record.state is State.FAILED:
        return Decision("send", record.message_ids)
    if record.state is State.PENDING and now_ms - record.updated_ms < STALE_PENDING_MS:
        return Decision("in_progress", record.message_ids)
    return Decision("unknown", record.message_ids)


def recorded_answer(key: str, decision: Decision) -> ActionResult | None:
    """The answer the ledger gives by itself (``None``: the send may go ahead)."""
    if decision.action == "duplicate":
        return ActionResult(idempotency_key=key, ok=True, outcome="duplicate", message_ids=decision.confirmed)
    if decision.action == "send":
        return None
    return unknown_answer(key, decision.confirmed, in_progress=decision.action == "in_progress")


def unknown_answer(key: str, confirmed: tuple[str, ...], *, in_progress: bool) -> ActionResult:
    if in_progress:
        error = ActionError(
            code="in_progress",
            message="another attempt of this send is still running; ask again for its outcome",
            retryable=True,
        )
    else:
        error = ActionError(
            code="outcome_unknown",
            message="Telegram's answer was lost: the message may have been posted, so it is never repeated",
            retryable=False,
        )
    return ActionResult(idempotency_key=key, ok=False, outcome="unknown", message_ids=confirmed, error=error)
