"""A chat's ``media`` limits and the ``transcription`` purpose: defaults, merging, and bad values refused
naming their key."""

from __future__ import annotations

from typing import Any

import pytest

from larkbot.canonical.errors import ConfigError
from larkbot.runtime.config import MEDIA_MAX_BYTES, parse_config

CHAT = {"format": "openai-chat", "base_url": "http://127.0.0.1:1/v1", "model": "m"}
WHISPER = {"format": "openai-transcription", "base_url": "http://127.0.0.1:2/v1", "model": "whisper-1"}


def test_media_defaults_and_per_chat_override() -> None:
    config = parse_config(
        {
            "chats": {
                "default": {"media": {"max_frames": 3, "transcription": {"language": "de"}}},
                "telegram:-100": {"media": {"transcription": {"max_duration_s": 60}}},
                "feishu:oc_1": {},
            }
        },
        {},
    )
    tg = config.chats["telegram:-100"].media
    assert (tg.max_frames, tg.max_bytes) == (3, MEDIA_MAX_BYTES)
    assert (tg.transcription.language, tg.transcription.max_duration_s) == ("de", 60)
    fs = config.chats["feishu:oc_1"].media
    assert (fs.transcription.language, fs.transcription.max_duration_s, fs.transcription.enabled) == (
        "de",
        300,
        True,
    )


@pytest.mark.parametrize(
    ("media", "path"),
    [
        ({"max_frames": 0}, "chats.telegram:-100.media.max_frames"),
        ({"max_frames": 6}, "chats.telegram:-100.media.max_frames"),
        ({"max_bytes": MEDIA_MAX_BYTES + 1}, "chats.telegram:-100.media.max_bytes"),
        ({"transcription": {"language": "German"}}, "chats.telegram:-100.media.transcription.language"),
        ({"transcription": {"max_duration_s": 0}}, "chats.telegram:-100.media.transcription.max_duration_s"),
        (
            {"transcription": {"max_duration_s": 7200}},
            "chats.telegram:-100.media.transcription.max_duration_s",
        ),
        ({"vision": "x"}, "chats.telegram:-100.media.vision"),
    ],
)
def test_bad_media_values_name_the_key(media: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"chats": {"default": {}, "telegram:-100": {"media": media}}}, {})
    assert info.value.path == path


def test_transcription_purpose_routes_and_falls_back() -> None:
    config = parse_config(
        {
            "llm": {
                "endpoints": {
                    "main": CHAT,
                    "whisper": WHISPER,
                    "local": {**WHISPER, "response_format": "json"},
                },
                "primary": "main",
                "transcription": "whisper",
                "fallbacks": {"transcription": ["local"]},
                "routes": [
                    {"chats": ["telegram:-1*"], "endpoint": "local"},
                    {"chats": ["telegram:-2*"], "endpoint": "main"},
                ],
            }
        },
        {},
    )
    llm = config.llm
    # A rule without a purpose applies to the purposes its endpoint serves.
    assert llm.route("transcription", "telegram", "-100") == "local"
    assert llm.route("primary", "telegram", "-100") is None
    assert llm.route("primary", "telegram", "-200") == "main"
    assert llm.route("transcription", "telegram", "-200") is None
    assert llm.fallbacks["transcription"] == ("local",)


@pytest.mark.parametrize(
    ("llm", "path"),
    [
        ({"transcription": "main"}, "llm.transcription"),
        ({"primary": "whisper"}, "llm.primary"),
        ({"routes": [{"purpose": "transcription", "endpoint": "main"}]}, "llm.routes.0.endpoint"),
        (
            {"routes": [{"purpose": ["vision", "transcription"], "endpoint": "whisper"}]},
            "llm.routes.0.endpoint",
        ),
        ({"fallbacks": {"transcription": ["main"]}}, "llm.fallbacks.transcription.0"),
        ({"fallbacks": {"vision": ["whisper"]}}, "llm.fallbacks.vision.0"),
    ],
)
def test_transcription_endpoints_serve_transcription_only(llm: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"llm": {"endpoints": {"main": CHAT, "whisper": WHISPER}, **llm}}, {})
    assert info.value.path == path


def test_response_format_is_for_transcription_endpoints() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"llm": {"endpoints": {"main": {**CHAT, "response_format": "json"}}}}, {})
    assert info.value.path == "llm.endpoints.main"
