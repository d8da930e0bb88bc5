"""Custom emoji through the media workers: resolved by the ingress (``custom_emoji``), the sticker
downloaded and described once, cached under ``emoji.<id>`` so that a second job asks nothing."""

from __future__ import annotations

from typing import Any

from larkbot.canonical.llm import TextPart, UserMessage
from larkbot.canonical.media import MediaJob
from larkbot.media.core import images
from larkbot.runtime.bus import Bus
from larkbot.testkit.media import samples

from .test_media_service import counter, job, media

EMOJI = "5368324170671202286"


def emoji_job(job_id: str, emoji_id: str = EMOJI, **fields: Any) -> MediaJob:
    return job(job_id, transform="custom_emoji", file_id=emoji_id, attachment_type=None, **fields)


async def test_a_custom_emoji_is_resolved_described_once_and_then_answered_from_its_cache(
    bus: Bus, nats_url: str
) -> None:
    sticker = samples.solid((0, 200, 0), (100, 100), fmt="WEBP")
    hits = counter("larkbot_media_alt_text_cache_lookups_total", result="hit")
    async with media(bus, nats_url) as stack:
        stack.ingress.add_emoji(EMOJI, sticker, pack="DuckEmoji")
        first = await stack.run(emoji_job("emoji-1"))
        assert first.ok, first.error
        assert first.attachment_index is None
        assert first.pack == "DuckEmoji"
        assert first.alt_text == "1 image(s): 100x100 green"
        assert first.content_hash == images.content_key(sticker)
        (lookup,) = stack.ingress.emoji_lookups
        assert lookup.emoji_ids == (EMOJI,)
        (download,) = stack.ingress.downloads
        assert (download.file_id, download.attachment_type) == (f"emoji_{EMOJI}", "sticker")
        (request,) = stack.vision.requests
        (message,) = request.messages
        assert isinstance(message, UserMessage)
        asked = [p.text for p in message.parts if isinstance(p, TextPart)]
        assert asked == ["This is a custom emoji. Describe it."]

        # The same emoji in another chat: the id alone answers it, nothing is asked of anyone.
        again = await stack.run(emoji_job("emoji-2", chat_id="oc_b"))
        assert again.ok
        assert (again.alt_text, again.pack) == (first.alt_text, "DuckEmoji")
        assert len(stack.ingress.emoji_lookups) == 1
        assert len(stack.ingress.downloads) == 1
        assert len(stack.vision.requests) == 1
    assert counter("larkbot_media_alt_text_cache_lookups_total", result="hit") == hits + 1


async def test_an_unknown_custom_emoji_is_a_final_failure_and_none_is_asked_without_a_vision_model(
    bus: Bus, nats_url: str
) -> None:
    async with media(bus, nats_url) as stack:
        unknown = await stack.run(emoji_job("emoji-x", "42"))
        assert unknown.ok is False
        assert unknown.error is not None
        assert (unknown.error.code, unknown.error.retryable) == ("download", False)
        assert stack.vision.requests == []
        corrupt_id = "4242"
        stack.ingress.add_emoji(corrupt_id, b"RIFF\x00\x00not a webp")
        corrupt = await stack.run(emoji_job("emoji-c", corrupt_id))
        assert corrupt.error is not None
        assert (corrupt.error.code, corrupt.error.retryable) == ("unreadable", False)
    async with media(bus, nats_url, vision=False) as stack:
        stack.ingress.add_emoji(EMOJI, samples.solid((0, 0, 200), (100, 100), fmt="WEBP"))
        refused = await stack.run(emoji_job("emoji-n"))
        assert refused.error is not None
        assert (refused.error.code, refused.error.retryable) == ("unsupported", False)
        assert stack.ingress.emoji_lookups == []
        assert stack.ingress.downloads == []
