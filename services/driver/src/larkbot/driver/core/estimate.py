"""Token estimates: ~2 characters per token for text (calibrated on live requests of mixed CJK/Latin chat
logs), a flat cost per image. Estimates only steer window sizes; they never gate correctness."""

from __future__ import annotations

from larkbot.canonical.context import Segment

CHARS_PER_TOKEN = 2
IMAGE_TOKENS = 256


def text_tokens(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def segment_tokens(segment: Segment) -> int:
    return text_tokens(segment.xml) + IMAGE_TOKENS * len(segment.image_parts)


def truncate_to_tokens(text: str, max_tokens: int) -> str:
    """Keep the beginning of ``text`` within ``max_tokens`` (the end is cut)."""
    limit = max_tokens * CHARS_PER_TOKEN
    return text if len(text) <= limit else text[:limit]


def keep_last_tokens(text: str, max_tokens: int) -> str:
    """Keep the end of ``text`` within ``max_tokens`` (the beginning is cut)."""
    limit = max_tokens * CHARS_PER_TOKEN
    return text if len(text) <= limit else text[len(text) - limit :]
