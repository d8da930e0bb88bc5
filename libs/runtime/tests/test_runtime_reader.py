"""The offset-in-database partition reader over a real stream: it reads from the offset store's resume
point, in order; a failing handler restarts the partition from the committed offset, never skipping;
the observer learns when the partition is drained. And the one-off reader of a subject."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable, Sequence

import pytest
from nats.js.api import StreamConfig

from larkbot.runtime.backoff import Backoff
from larkbot.runtime.bus import Bus
from larkbot.runtime.reader import PartitionReader, ReaderState, Record, read_subject

WAIT = 30.0


async def _eventually(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


class Ledger:
    """A handler that commits each batch with its offset, like the pipeline's intake and database."""

    def __init__(self, resume: int = 1, fail_on: bytes | None = None) -> None:
        self.resume = resume
        self.fail_on = fail_on
        self.committed: list[bytes] = []
        self.prepared = 0
        self.abandoned = 0

    async def prepare(self, partition: int) -> None:
        self.prepared += 1

    async def room(self) -> None:
        return None

    async def open(self, partition: int) -> int:
        return self.resume

    async def abandon(self, partition: int) -> None:
        self.abandoned += 1

    async def feed(self, partition: int, records: Sequence[Record]) -> None:
        for record in records:
            if record.data == self.fail_on:
                self.fail_on = None  # fails once: the database was away
                raise ConnectionError("database unavailable")
            self.committed.append(record.data)
            self.resume = record.stream_seq + 1


async def _stream(bus: Bus, n: int) -> tuple[str, str]:
    tag = secrets.token_hex(3)
    stream, subject = f"R{tag}", f"r{tag}.0.x"
    await bus.js.add_stream(StreamConfig(name=stream, subjects=[f"r{tag}.>"]))
    for i in range(1, n + 1):
        await bus.js.publish(subject, f"m{i}".encode())
    return stream, f"r{tag}.0.>"


def _reader(bus: Bus, stream: str, subject: str, ledger: Ledger, seen: list[ReaderState]) -> PartitionReader:
    def observe(reader: PartitionReader) -> None:
        seen.append(reader.state)

    return PartitionReader(
        bus.js,
        stream,
        0,
        subject,
        f"reader-{secrets.token_hex(3)}",
        ledger,
        ledger,
        name="test-reader",
        observer=observe,
        batch=3,
        fetch_timeout_s=0.2,
        restart=Backoff(initial_s=0.05, max_s=0.05, factor=1.0, jitter=0.0),
    )


async def test_reads_from_the_resume_point_in_order_until_drained(bus: Bus) -> None:
    stream, subject = await _stream(bus, 10)
    ledger = Ledger(resume=4)
    seen: list[ReaderState] = []
    reader = _reader(bus, stream, subject, ledger, seen)
    task = asyncio.create_task(reader.run())
    try:
        await _eventually(lambda: reader.drained)
        assert ledger.committed == [f"m{i}".encode() for i in range(4, 11)]
        assert reader.state is ReaderState.CONSUMING
        assert ledger.prepared == 1
        await bus.js.publish(subject.replace(">", "x"), b"m11")
        await _eventually(lambda: ledger.committed[-1:] == [b"m11"])
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert seen[0] is ReaderState.CONSUMING
    assert (await bus.js.consumers_info(stream)) == []  # its consumer is removed with it


async def test_a_failing_batch_restarts_the_partition_from_what_was_committed(bus: Bus) -> None:
    stream, subject = await _stream(bus, 9)
    ledger = Ledger(fail_on=b"m5")
    seen: list[ReaderState] = []
    reader = _reader(bus, stream, subject, ledger, seen)
    task = asyncio.create_task(reader.run())
    try:
        await _eventually(lambda: len(ledger.committed) == 9 and reader.drained)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    # m4 was committed before m5 failed in the same batch; reading again from the resume point (m5)
    # neither skips nor repeats anything the ledger holds.
    assert ledger.committed == [f"m{i}".encode() for i in range(1, 10)]
    assert reader.restarts == 1
    assert ledger.abandoned == 1
    assert ledger.prepared == 1  # prepared once, not at every restart
    assert ReaderState.RESTARTING in seen


async def test_a_subject_is_read_whole_in_order_and_a_short_one_times_out(bus: Bus) -> None:
    stream, subject = await _stream(bus, 7)
    stored = subject.replace(">", "x")
    assert await read_subject(bus.js, stream, stored, 7) == [f"m{i}".encode() for i in range(1, 8)]
    with pytest.raises(TimeoutError, match="7 of 8"):
        await read_subject(bus.js, stream, stored, 8, timeout_s=0.3)
    assert (await bus.js.consumers_info(stream)) == []
