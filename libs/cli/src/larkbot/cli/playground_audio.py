"""Voice notes and audio files posted in the playground, as the Bot API describes them to the bot.

A Telegram client sends a recording as ``voice`` (Opus in OGG) and a music or recorder file as ``audio``;
both carry their duration, MIME type and size. The playground reads the container with PyAV (already in
the media worker's dependencies) and never decodes the sound: what the bot hears is the media worker's
business.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any, Final

import av

#: The Bot API downloads files of at most 20 MB (``getFile``): a bot never sees a larger one.
MAX_AUDIO_BYTES: Final = 20 * 1024 * 1024
#: Container (as FFmpeg names it) → MIME type and extension, for what a client sends as ``audio``.
_AUDIO: Final = {
    "mp3": ("audio/mpeg", "mp3"),
    "mov,mp4,m4a,3gp,3g2,mj2": ("audio/mp4", "m4a"),
    "ogg": ("audio/ogg", "ogg"),
    "wav": ("audio/wav", "wav"),
    "flac": ("audio/flac", "flac"),
    "matroska,webm": ("audio/webm", "webm"),
}


@dataclass(frozen=True, slots=True)
class AudioInfo:
    """``kind``: ``voice`` (Opus in OGG, what a client records) or ``audio``."""

    kind: str
    content_type: str
    extension: str
    duration_s: int


def audio_info(data: bytes) -> AudioInfo | None:
    """What a client would send ``data`` as; ``None`` when it has no audio stream (or is not media)."""
    try:
        with av.open(io.BytesIO(data), mode="r") as container:
            if not container.streams.audio or container.streams.video:
                return None
            stream = container.streams.audio[0]
            codec = stream.codec_context.name
            fmt = container.format.name
            seconds = container.duration / av.time_base if container.duration is not None else 0.0
    except Exception:  # anything FFmpeg cannot open is simply not audio
        return None
    duration = max(1, round(seconds))
    if fmt == "ogg" and codec == "opus":
        return AudioInfo("voice", "audio/ogg", "oga", duration)
    content_type, extension = _AUDIO.get(fmt, ("audio/mpeg", "mp3"))
    return AudioInfo("audio", content_type, extension, duration)


def audio_object(
    info: AudioInfo, file_id: str, unique_id: str, size: int, name: str | None
) -> dict[str, Any]:
    """The Bot API ``Voice`` or ``Audio`` object."""
    found: dict[str, Any] = {
        "file_id": file_id,
        "file_unique_id": unique_id,
        "duration": info.duration_s,
        "mime_type": info.content_type,
        "file_size": size,
    }
    if info.kind == "audio" and name:
        found["file_name"] = name
    return found
