"""The buckets: content-addressed blobs read back exactly (chunked, digest-checked) and the alt-text cache."""

from __future__ import annotations

import random

import pytest

from larkbot.media.adapters.store import AltTextCache, Blobs
from larkbot.media.core.errors import TooLarge
from larkbot.media.core.images import content_key
from larkbot.runtime.bus import Bus


async def test_blobs_round_trip_once_per_content(bus: Bus) -> None:
    blobs = Blobs(bus.js)
    data = random.Random(3).randbytes(1_000_003)  # several chunks, the last one partial
    key = await blobs.put(data, "test")
    assert key == content_key(data)
    assert await blobs.read(key) == data
    stored = (await bus.js.stream_info("OBJ_blobs")).state.messages
    assert await blobs.put(data, "test") == key  # already stored: not written again
    assert (await bus.js.stream_info("OBJ_blobs")).state.messages == stored
    empty = await blobs.put(b"", "test")
    assert await blobs.read(empty) == b""
    assert await blobs.read(content_key(b"never stored")) is None
    with pytest.raises(TooLarge):
        await blobs.read(key, max_bytes=1_000_000)


async def test_the_alt_text_cache_is_shared_through_the_bus(bus: Bus) -> None:
    key = content_key(b"thumbnail bytes")
    first = await AltTextCache.open(bus.js)
    assert await first.get(key) is None
    await first.put(key, "a cat on a mat", "vision-1")
    second = await AltTextCache.open(bus.js)  # another replica: the bucket exists now
    assert await second.get(key) == "a cat on a mat"
    with pytest.raises(ValueError, match="sha256"):
        await second.get("thumb-1")
