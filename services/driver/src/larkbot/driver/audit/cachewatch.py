"""The cache-break watch (``core.cachebreak``; docs/driver.md "Cache-break watch"): after every wake-up,
each primary request that reached the model is compared with the chat's previous one, from the blocks the
request log cuts anyway. A break is counted in ``larkbot_driver_prompt_cache_breaks_total{cause,
expected}`` and logged (``prompt cache break``: WARNING when unexpected, INFO when the design accounts for
it) with the chat, the wake-up, the step, the cause and the first block the cache could not serve: chat
ids are never metric labels, so the log line is where a break's chat is named.

The previous request is kept in memory (:class:`~.core.cachebreak.PromptShape`, a few bytes per block) for
the :data:`REMEMBERED_CHATS` chats that asked last; no database read is made. A chat forgotten, or one this
replica just took over, starts afresh: its next request is compared with nothing.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence

from .. import metrics
from .core.cachebreak import CacheBreak, PromptShape, cache_break
from .core.requestlog import Block, LoggedRequest, WakeRequests

log = logging.getLogger(__name__)

#: Chats whose last primary request is remembered (a few KB each); the least recently asking go first.
REMEMBERED_CHATS = 10_000


class CacheWatch:
    def __init__(self, remembered_chats: int = REMEMBERED_CHATS) -> None:
        self._remembered = remembered_chats
        #: ``(platform, chat_id)`` → the chat's last primary request that reached the model.
        self._last: OrderedDict[tuple[str, str], PromptShape] = OrderedDict()

    def observe(self, wake: WakeRequests, blocks: Sequence[tuple[Block, ...]]) -> tuple[CacheBreak, ...]:
        """Compare the wake-up's primary requests (``blocks``: each request's, in order) with the chat's
        previous ones; count and log each break, and return them."""
        key = (wake.platform, wake.chat_id)
        before = self._last.pop(key, None)
        found: list[CacheBreak] = []
        for logged, cut in zip(wake.requests, blocks, strict=True):
            request = logged.request
            # A request never sent cached nothing and broke nothing (refused as too long, a dry run
            # answering itself); the probe has its own, short-lived prefix.
            if request.purpose != "primary" or not logged.called:
                continue
            if before is not None:
                found_break = cache_break(before, cut, request.endpoint, logged.summary_cursor)
                if found_break is not None:
                    _report(wake, logged, found_break)
                    found.append(found_break)
            before = PromptShape.of(cut, request.endpoint, logged.summary_cursor)
        if before is not None:
            self._last[key] = before
            while len(self._last) > self._remembered:
                self._last.popitem(last=False)
        return tuple(found)


def _report(wake: WakeRequests, logged: LoggedRequest, found: CacheBreak) -> None:
    expected = found.expected
    metrics.PROMPT_CACHE_BREAKS.labels(found.cause, str(expected).lower()).inc()
    log.log(
        logging.INFO if expected else logging.WARNING,
        "prompt cache break",
        extra={
            "chat": f"{wake.platform}:{wake.chat_id}",
            "wake": wake.wake_id,
            "step": logged.step,
            "request": logged.request.request_id,
            "cause": found.cause,
            "expected": expected,
            "block": found.label,
            "block_index": found.index,
        },
    )


__all__ = ["REMEMBERED_CHATS", "CacheWatch"]
