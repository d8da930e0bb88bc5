"""Loading partitions at start-up with many configured chats, most of them quiet: a few partitions load at
a time (their reads hold database connections), and only chats with events after their cursor are read
event by event; every configured chat is resident and continues its update sequence."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncGenerator, Mapping, Sequence
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine

from larkbot.canonical.names import Platform, partition_of
from larkbot.pipeline.adapters.chats import COLD_STARTS, SEQ_STRIDE, ResidentChats
from larkbot.pipeline.adapters.repository import EventRepository
from larkbot.pipeline.app import MIGRATIONS
from larkbot.pipeline.core import RenderParams
from larkbot.runtime.backoff import Backoff, forever
from larkbot.runtime.bus import Bus
from larkbot.runtime.db import create_engine, migrate
from larkbot.testkit.bench.pipeline import bench_config, chat_params, persist

PARTITIONS = 16
QUIET, BUSY = 400, 5

ChatKey = tuple[str, str]


class Counting(EventRepository):
    """The real repository, counting the cold-start reads running at once and the chats they read."""

    def __init__(self, engine: AsyncEngine) -> None:
        super().__init__(engine)
        self.running = 0
        self.most = 0
        self.read: Counter[ChatKey] = Counter()
        #: Set once as many reads run at once as may: each read waits for it, so that they overlap.
        self.gathered = asyncio.Event()

    async def chats_events(
        self, keys: Sequence[ChatKey], cursors: Mapping[ChatKey, int], *, chunk: int = 5000
    ) -> AsyncGenerator[tuple[ChatKey, list[tuple[int, str]]], None]:
        self.running += 1
        self.most = max(self.most, self.running)
        if self.running >= COLD_STARTS:
            self.gathered.set()
        try:
            await asyncio.wait_for(self.gathered.wait(), 30)
            async for key, rows in super().chats_events(keys, cursors, chunk=chunk):
                self.read[key] += 1
                yield key, rows
        finally:
            self.running -= 1


async def test_partitions_load_a_few_at_a_time_and_quiet_chats_are_not_read_one_by_one(
    bus: Bus, tmp_path: Path
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'pipeline.db'}"
    busy = [f"oc_busy_{i}" for i in range(BUSY)]
    quiet = [f"oc_quiet_{i}" for i in range(QUIET)]
    stored = await persist(url, busy, 200)
    config = bench_config(busy + quiet, url)
    params = chat_params(config)

    def params_for(platform: Platform, chat_id: str) -> RenderParams | None:
        return params(platform, chat_id)

    engine = create_engine(url)
    try:
        await migrate(engine, MIGRATIONS)
        repo = Counting(engine)
        chats = ResidentChats(bus, repo, params_for, {}, forever(Backoff(0.1, 1.0, 2.0, 0.1)))
        keys = [("feishu", chat) for chat in busy + quiet]
        loaded = await asyncio.gather(*(chats.load_partition(p, keys) for p in range(PARTITIONS)))
        last_ids = await repo.last_event_ids(keys)
    finally:
        await engine.dispose()
    assert sum(loaded) == stored
    assert repo.most == COLD_STARTS
    # Every configured chat is resident; only the busy ones were read event by event.
    assert set(chats.chats) == set(keys)
    assert set(repo.read) == {("feishu", chat) for chat in busy}
    assert all(n == 1 for n in repo.read.values())
    for chat in busy:
        resident = chats.chats[("feishu", chat)]
        assert resident.projection.segments
        assert resident.seq == last_ids[("feishu", chat)] * SEQ_STRIDE
    assert all(not chats.chats[("feishu", chat)].projection.segments for chat in quiet)
    assert {partition_of("feishu", chat) for chat in quiet} == set(range(PARTITIONS))
