"""How a send meets Feishu's failures (pure): every send carries a ``uuid`` Feishu deduplicates for an
hour (``core.outbound.feishu_uuid``), so a send whose outcome is open may be repeated as it is.

What is tried again, under the same ``uuid``, until it succeeds or the action's deadline (the turn's):

- a rate limit (HTTP 429 or code 99991400): after ``x-ogw-ratelimit-reset`` seconds, which the pacer
  holds for every send of the app;
- a transient answer (``core.apierrors``: HTTP 5xx such as ``{"code":1500,"msg":"internal error"}``,
  408/425, code 230020) and a request that never reached Feishu: backoff with jitter;
- a lost answer (a timeout, a connection closed after the request was written): backoff with jitter —
  Feishu answers a repeat with the message the first attempt created.

A final refusal (not found, forbidden, any other 4xx) is not repeated. A send that gives up is
``unknown`` if any of its attempts lost its answer (the message may exist), else ``failed``.

This is the send's one retry layer: the REST client itself neither waits out a 429 nor repeats a send.
"""

from __future__ import annotations

from typing import Final

from larkbot.runtime.backoff import Backoff, RetryPolicy

#: A send without a deadline gives up after this long.
NO_DEADLINE_BUDGET_S: Final = 60.0
BACKOFF: Final = Backoff(initial_s=0.5, max_s=8.0, factor=2.0, jitter=0.25)


def send_policy(max_attempts: int, backoff: Backoff = BACKOFF) -> RetryPolicy:
    """The send policy: ``backoff`` from ``retry.platform_send``, the count from ``feishu.send_attempts``."""
    return RetryPolicy(backoff, max_attempts=max_attempts)
