"""The fake provider's speech to text: ``POST <prefix>/audio/transcriptions`` (multipart), deterministic.

A transcription script maps each call to a transcript (``str``), a :class:`~.script.Fail` or a
:class:`~.script.Drop`. The default, :func:`fake_transcript`, cannot hear: it states the audio's length
(from a WAV header; else its size) and a digest of its bytes, so a test knows the exact text to expect
from the audio it sent, and the language hint when one was given.
"""

from __future__ import annotations

import hashlib
import io
import wave
from collections.abc import Callable
from dataclasses import dataclass

from .script import Drop, Fail


@dataclass(frozen=True, slots=True)
class TranscriptionCall:
    """One transcription the fake received: the form's fields and the audio file."""

    index: int
    headers: dict[str, str]
    model: str
    response_format: str
    language: str | None
    filename: str
    mime: str
    audio: bytes


TranscriptionScript = Callable[[TranscriptionCall], str | Fail | Drop]


def wav_seconds(audio: bytes) -> float | None:
    """The length of a WAV file; ``None`` for anything else."""
    try:
        with wave.open(io.BytesIO(audio)) as found:
            rate = found.getframerate()
            return found.getnframes() / rate if rate else None
    except (wave.Error, EOFError):
        return None


def fake_transcript(call: TranscriptionCall) -> str:
    seconds = wav_seconds(call.audio)
    length = f"{seconds:.1f} s" if seconds is not None else f"{len(call.audio)} bytes"
    language = f" ({call.language})" if call.language else ""
    digest = hashlib.sha256(call.audio).hexdigest()[:8]
    return f"Fake transcript{language} of {length} of audio {digest}."
