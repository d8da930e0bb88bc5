"""What the gateway keeps between calls stays within its bounds: the image cache holds at most
``llm.image_cache_mib`` of encoded images, and calls of many distinct chats leave nothing behind.

The sustained-load run (``docs/performance.md``) found the gateway's memory growing by ~140 MiB: its image
cache was bounded by entries (256), and a photo's vision rendition is ~400 KB of base64.
"""

from __future__ import annotations

import gc
import io
import random
import time
import tracemalloc
from pathlib import Path

from PIL import Image

from larkbot.canonical.llm import (
    LLM_REPLY_ADAPTER,
    ImagePart,
    LLMError,
    LLMRequest,
    LLMResponse,
    TextPart,
    UserMessage,
)
from larkbot.canonical.names import OBJECT_STORE_BLOBS, SUBJECT_LLM_GENERATE, Service
from larkbot.llm_gateway.adapters.images import ImageCache, ObjectStoreImages
from larkbot.llm_gateway.app import GatewayService
from larkbot.llm_gateway.core.common import EncodedImage
from larkbot.llm_gateway.fake import FakeProvider, Reply
from larkbot.llm_gateway.gateway import Gateway
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import LarkbotConfig, LlmEndpoint, LlmSettings
from larkbot.runtime.service import built

MIB = 1024 * 1024
#: The gateway's own source files, the fake provider's excepted (it runs in the test's process).
_GATEWAY = str(Path(Gateway.__module__.replace(".", "/")).parent)


def noise_png(seed: int, side: int = 256) -> bytes:
    """A PNG that does not compress: ~200 KB, ~260 KB of base64 — a vision rendition's order."""
    pixels = random.Random(seed).randbytes(side * side * 3)
    out = io.BytesIO()
    Image.frombytes("RGB", (side, side), pixels).save(out, format="PNG", compress_level=1)
    return out.getvalue()


def vision(key: str) -> LLMRequest:
    return LLMRequest(
        request_id=f"describe-{key}",
        purpose="vision",
        endpoint="main",
        system="describe",
        messages=(UserMessage(parts=(ImagePart(blob_key=key, mime="image/png", detail="low"),)),),
        deadline_ms=time.time_ns() // 1_000_000 + 30_000,
    )


def probe(chat: int) -> LLMRequest:
    chat_key = f"telegram:-100300{chat:07d}"
    return LLMRequest(
        request_id=f"probe-{chat}",
        purpose="probe",
        endpoint="main",
        system="Should the bot act? " * 20,
        messages=(UserMessage(parts=(TextPart(text=f"<message>hello from chat {chat}</message>"),)),),
        deadline_ms=time.time_ns() // 1_000_000 + 30_000,
        chat_key=chat_key,
        prompt_cache_key=f"{chat_key}:probe",
    )


def image(size: int) -> EncodedImage:
    return EncodedImage("image/png", "A" * size)


def test_the_image_cache_keeps_the_most_recently_used_within_its_bytes() -> None:
    cache = ImageCache(max_bytes=1000)
    for n in range(10):
        cache.put((f"k{n}", 512), image(300))
        assert cache.held_bytes <= 1000
    assert len(cache) == 3
    assert cache.get(("k7", 512)) is not None
    cache.put(("k10", 512), image(300))
    # k7 was used after k8 was stored, so k8 went first.
    assert cache.get(("k8", 512)) is None
    assert cache.get(("k7", 512)) is not None
    cache.put(("k7", 512), image(100))
    assert cache.held_bytes == 700
    cache.put(("huge", 1024), image(1001))
    assert cache.get(("huge", 1024)) is None
    assert cache.held_bytes == 700


def test_an_empty_budget_caches_nothing() -> None:
    cache = ImageCache(max_bytes=0)
    cache.put(("k", 512), image(10))
    assert len(cache) == 0
    assert cache.held_bytes == 0


async def test_the_service_keeps_images_within_image_cache_mib(bus: Bus, nats_url: str) -> None:
    store = await bus.js.object_store(OBJECT_STORE_BLOBS)
    keys = [f"sha256-noise-{n}" for n in range(12)]
    for n, key in enumerate(keys):
        await store.put(key, noise_png(n))
    async with FakeProvider(lambda _call: Reply.text("noise"), keep_calls=False) as fake:
        endpoint = LlmEndpoint(format="openai-chat", base_url=fake.url, model="fake-vision", fake=True)
        config = LarkbotConfig(llm=LlmSettings(endpoints={"main": endpoint}, image_cache_mib=1))
        async with built(Service.LLM_GATEWAY, GatewayService(config), config, nats_url=nats_url) as running:
            for key in keys:
                reply = await bus.request_as(
                    SUBJECT_LLM_GENERATE, vision(key), LLM_REPLY_ADAPTER, timeout_s=30
                )
                assert isinstance(reply, LLMResponse), reply
            images = running.components.gateway.images
            assert isinstance(images, ObjectStoreImages)
            assert 0 < images.cache.held_bytes <= MIB
            assert len(images.cache) < len(keys)
            # The newest image is answered from the cache, the oldest had to go.
            await store.delete(keys[-1])
            await store.delete(keys[0])
            newest = await bus.request_as(
                SUBJECT_LLM_GENERATE, vision(keys[-1]), LLM_REPLY_ADAPTER, timeout_s=30
            )
            oldest = await bus.request_as(
                SUBJECT_LLM_GENERATE, vision(keys[0]), LLM_REPLY_ADAPTER, timeout_s=30
            )
    assert isinstance(newest, LLMResponse), newest
    assert isinstance(oldest, LLMError)
    assert oldest.category == "invalid_request"


def _retained_by_gateway(snapshot: tracemalloc.Snapshot) -> tracemalloc.Snapshot:
    return snapshot.filter_traces(
        [
            tracemalloc.Filter(True, f"*{_GATEWAY}/*", all_frames=True),
            tracemalloc.Filter(False, f"*{_GATEWAY}/fake/*", all_frames=True),
        ]
    )


async def test_calls_of_many_chats_and_images_leave_no_more_than_the_cache_behind(bus: Bus) -> None:
    store = await bus.js.object_store(OBJECT_STORE_BLOBS)
    keys = [f"sha256-noise-{n}" for n in range(16)]
    for n, key in enumerate(keys):
        await store.put(key, noise_png(n))
    async with FakeProvider(lambda _call: Reply.text("ok"), keep_calls=False) as fake:
        endpoint = LlmEndpoint(
            format="openai-chat", base_url=fake.url, model="fake", fake=True, supports_prompt_cache_key=True
        )
        settings = LlmSettings(endpoints={"main": endpoint}, prompt_cache_key_salt="s" * 32)
        gateway = Gateway(settings, ObjectStoreImages(bus.js, cache_bytes=MIB))
        tracemalloc.start(40)
        try:
            # Warm up: connections, metric label sets, a full cache.
            for n in range(4):
                assert isinstance(await gateway.generate(vision(keys[n])), LLMResponse)
                assert isinstance(await gateway.generate(probe(n)), LLMResponse)
            gc.collect()
            before = _retained_by_gateway(tracemalloc.take_snapshot())
            for n in range(4, len(keys)):
                assert isinstance(await gateway.generate(vision(keys[n])), LLMResponse)
            for chat in range(4, 400):
                assert isinstance(await gateway.generate(probe(chat)), LLMResponse)
            gc.collect()
            after = _retained_by_gateway(tracemalloc.take_snapshot())
        finally:
            tracemalloc.stop()
            await gateway.aclose()
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    # 12 more images (~3 MiB of base64) and 396 more chats: what stays is the 1 MiB cache's turnover.
    assert grown < 256 * 1024, [str(stat) for stat in after.compare_to(before, "traceback")[:5]]
