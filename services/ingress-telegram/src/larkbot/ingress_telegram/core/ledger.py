"""The sent-ledger's records and decisions (pure): what to do with a send, given what was recorded.

The Bot API has no idempotency key, so every send is recorded under the caller's ``idempotency_key``
*before* the request leaves (``pending``) and after the answer (``done`` with the message ids, or
``failed`` when Telegram refused it, so nothing was sent). A long text is sent as several messages; the
record keeps the ids of the parts confirmed so far, so a retry after a refused part resumes after the
last confirmed one instead of repeating it.

===================  ====================================================================
record found         decision
===================  ====================================================================
none                 send (after claiming the key: only one attempt may hold it)
``done``             answer ``duplicate`` with the recorded ids, send nothing
``failed``           resume: send the parts not yet confirmed
``pending``          answer ``unknown``: an attempt is in flight or died after the request
                     left; repeating it could post the message twice
``unknown``          answer ``unknown`` (a timeout or 5xx left the outcome open)
===================  ====================================================================
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal


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


@dataclass(frozen=True, slots=True)
class Decision:
    action: Literal["send", "duplicate", "unknown"]
    #: Ids of parts already confirmed (resume after them when sending; the answer when duplicate).
    confirmed: tuple[str, ...] = ()


def decide(record: Record | None) -> Decision:
    if record is None:
        return Decision("send")
    if record.state is State.DONE:
        return Decision("duplicate", record.message_ids)
    if record.state is State.FAILED:
        return Decision("send", record.message_ids)
    return Decision("unknown", record.message_ids)
