"""A chat's media limits (``chats.<key>.media``): what its media jobs may cost (docs/media.md).

The values travel on each media job, so one pool of workers serves chats with different limits. A chat
may only ask for less than the workers allow (the bounds below are theirs), never more. Which model
describes or transcribes a chat's media is not set here but by ``llm.routes`` (purposes ``vision`` and
``transcription``), the one place every per-chat endpoint is chosen, with its fallbacks.
"""

from __future__ import annotations

from pydantic import Field

from ._base import _Section

#: Telegram's Bot API serves downloads up to 20 MB (``getFile``); the workers decode nothing larger.
MEDIA_MAX_BYTES = 20 * 1024 * 1024
#: The longest audio a chat may have transcribed. 16 kHz mono WAV (what the workers send) is 32 kB a
#: second, so 30 min is ~58 MB: past OpenAI's 25 MB upload limit (≈ 13 min), which self-hosted servers
#: (whisper.cpp, faster-whisper, vLLM) do not have.
TRANSCRIPTION_MAX_DURATION_S = 1800


class TranscriptionSettings(_Section):
    """Voice and audio messages (and video notes) transcribed by the chat's ``transcription`` endpoint."""

    enabled: bool = True
    #: The spoken language as an ISO 639-1 code (``de``), a hint that makes short notes more accurate;
    #: unset: the model detects it.
    language: str | None = Field(default=None, pattern=r"^[a-z]{2,3}$")
    #: Longer audio is not transcribed (a typed ``too_long`` result, rendered without a transcript).
    max_duration_s: int = Field(default=300, ge=1, le=TRANSCRIPTION_MAX_DURATION_S)


class ChatMediaSettings(_Section):
    """``media``: frames shown of a moving picture, the largest file fetched, transcription."""

    #: Frames picked from an animation, a video or a sticker (first and last included); at most the
    #: workers' ``services.media.max_frames``.
    max_frames: int = Field(default=5, ge=1, le=5)
    #: Larger files are not downloaded (a typed ``too_large`` result); at most 20 MB, the platform's limit.
    max_bytes: int = Field(default=MEDIA_MAX_BYTES, ge=1, le=MEDIA_MAX_BYTES)
    transcription: TranscriptionSettings = TranscriptionSettings()
