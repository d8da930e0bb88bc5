"""Progress lines of ``larkbot bench`` on stderr: which part runs, how far it is, how long it took.

stdout carries the report alone. :func:`running` frames one part (``[bench 3/8] turn …`` then
``[bench 3/8] turn done in 41 s``); inside it, a part that runs long says how far it is with :func:`note`,
which says nothing outside a bench run (a test calling the part directly).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["note", "running"]

#: The running part's prefix, e.g. ``[bench 3/8] turn``; a context variable, so that tasks a part starts
#: inherit it.
_CURRENT: ContextVar[str | None] = ContextVar("larkbot_bench_part", default=None)


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@contextmanager
def running(index: int, total: int, name: str) -> Iterator[None]:
    """Frame part ``name``, the ``index``-th of ``total`` (from 1). The closing line is written whether
    the part succeeded or failed (its error is the report's)."""
    prefix = f"[bench {index}/{total}] {name}"
    token = _CURRENT.set(prefix)
    _say(f"{prefix} …")
    started = time.perf_counter()
    try:
        yield
    finally:
        _CURRENT.reset(token)
        _say(f"{prefix} done in {time.perf_counter() - started:.0f} s")


def note(text: str) -> None:
    """An intermediate progress line of the running part, e.g. ``4000/20000 messages``."""
    prefix = _CURRENT.get()
    if prefix is not None:
        _say(f"{prefix}: {text}")
