"""Where each partition resumes: the lowest stream sequence not yet committed (DESIGN §3). Pure.

A partition is consumed in stream order from the position the database records, never from server-side
acknowledgement state. Every message handed to the pipeline is in one of three states: *done* (committed,
a duplicate, dropped by residency, or dead-lettered), *waiting* (queued in media admission, possibly behind
a chat's failing head), or not yet read. With admission some chats wait while others commit, so the resume
point is the minimum over the waiting ones, not the last committed: resuming there redelivers what was
committed after it, which the ``events`` unique key skips, and never applies a chat's newer event before
an older one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Ticket:
    """The shell's handle of one queued event: where it came from, and its bytes as delivered (stored
    verbatim when no media output changed the event; re-published in a media dead-letter record)."""

    partition: int
    stream_seq: int
    data: bytes
    #: The ``traceparent`` it came with, and when it was read (``time_ns``; 0 while tracing is off).
    trace: str | None = None
    read_ns: int = 0


def resume_points(read: Mapping[int, int], waiting: Iterable[Ticket]) -> dict[int, int]:
    """``resume_seq`` per partition: the lowest sequence still waiting, else one past the last one read.

    ``read[p]`` is the highest stream sequence of partition ``p`` handed to the pipeline (or the resume
    point minus one when nothing was read yet).
    """
    out = {partition: last + 1 for partition, last in read.items()}
    for ticket in waiting:
        current = out.get(ticket.partition)
        if current is None or ticket.stream_seq < current:
            out[ticket.partition] = ticket.stream_seq
    return out
