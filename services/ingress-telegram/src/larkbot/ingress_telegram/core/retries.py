"""What a Bot API failure means for a send (pure): try again, give up, or never know.

Telegram answers every call it handled with JSON ``{"ok": false, "error_code": N, "description": …}`` when
it did not execute it; that answer is a definite failure, whatever ``N``. Which of those are worth another
attempt of the same send (under the same ledger record, ``core.ledger``):

- ``429`` — rate limited: wait ``parameters.retry_after`` (the pacer holds the chat meanwhile);
- ``5xx`` — Telegram's own fault (``{"ok":false,"error_code":500,"description":"Internal Server Error"}``,
  502 "Bad Gateway"): back off and try again;
- the connection never opened (the request never left) — the same;
- any other code (400, 403, …) — final: repeating the request cannot change the answer.

Not a failure this module retries: a lost answer (a timeout, a connection closed after the request was
written, an HTTP 5xx without a Bot API body, i.e. from something in front of Telegram). The message may
exist, and the Bot API has no idempotency key, so that send is never repeated (ledger ``unknown``).

:data:`SEND_RETRY` is the one retry layer of a send: the pacing/429 loop and the backoff are the same
loop (``adapters.actions``), bounded by the action's deadline (the turn's). Without a deadline a send
gives up after :data:`NO_DEADLINE_BUDGET_S`.
"""

from __future__ import annotations

from typing import Final

from larkbot.runtime.backoff import Backoff, Failure, RetryPolicy

SEND_RETRY: Final = RetryPolicy(Backoff(initial_s=0.5, max_s=8.0, factor=2.0, jitter=0.25), max_attempts=8)
NO_DEADLINE_BUDGET_S: Final = 60.0
#: A sent-ledger that does not answer (a NATS election, a reconnect): 0.25 s doubling to 4 s, ±25 %, while
#: the deadline allows — before a send, a failure then sends nothing; after it, recording what happened
#: is tried :data:`RECORD_GRACE_S` past the deadline (the caller waits longer than that).
LEDGER_RETRY: Final = RetryPolicy(
    Backoff(initial_s=0.25, max_s=4.0, factor=2.0, jitter=0.25), max_attempts=None
)
RECORD_GRACE_S: Final = 5.0


def send_failure(error_code: int) -> Failure | None:
    """The kind of a Bot API error answer with ``error_code``; ``None``: final, do not repeat."""
    if error_code == 429:
        return Failure.RATE_LIMITED
    if error_code >= 500:
        return Failure.TRANSIENT
    return None
