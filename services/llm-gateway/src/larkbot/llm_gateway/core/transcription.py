"""The ``openai-transcription`` wire format (pure): ``POST {base_url}/audio/transcriptions``, multipart.

Served by OpenAI (``whisper-1``, ``gpt-4o-transcribe``), whisper.cpp's server, vLLM, faster-whisper
servers (speaches) and others. Decisions:

- The form is written here, not by the HTTP client: its bytes are then a pure function of the request
  (the boundary is a digest of the audio, so it never occurs inside it by chance more than a hash
  collision would), dumps and tests see exactly what is sent, and the transport stays one ``post``.
- ``response_format`` is the endpoint's: ``json`` (the default; every server and model takes it,
  ``gpt-4o-transcribe`` takes nothing richer) or ``verbose_json`` (adds ``language`` and ``duration``).
  The reply is read leniently: ``text`` is required, ``language`` and ``duration`` are used when present.
- ``temperature`` 0: the transcript should depend on the audio only.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any, Final

from ..errors import WireError

PATH: Final = "/audio/transcriptions"
FORMAT: Final = "openai-transcription"
MAX_TEXT_CHARS: Final = 20_000


@dataclass(frozen=True, slots=True)
class Transcribed:
    text: str
    language: str | None
    duration_s: float | None


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\r", " ").replace("\n", " ")


def encode_form(
    *,
    model: str,
    audio: bytes,
    mime: str,
    filename: str,
    language: str | None,
    response_format: str,
) -> tuple[bytes, str]:
    """``(body, content type)`` of the multipart form."""
    boundary = "larkbot-" + hashlib.sha256(audio).hexdigest()[:32]
    fields: list[tuple[str, str]] = [("model", model), ("response_format", response_format)]
    if language is not None:
        fields.append(("language", language))
    fields.append(("temperature", "0"))
    out: list[bytes] = []
    for name, value in fields:
        out.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        )
    out.append(
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
            f'filename="{_quoted(filename)}"\r\nContent-Type: {_quoted(mime)}\r\n\r\n'
        ).encode()
    )
    out.append(audio)
    out.append(f"\r\n--{boundary}--\r\n".encode())
    return b"".join(out), f"multipart/form-data; boundary={boundary}"


def decode_reply(body: dict[str, Any]) -> Transcribed:
    """The transcript of a ``json`` or ``verbose_json`` reply; raises :class:`WireError`."""
    text = body.get("text")
    if not isinstance(text, str):
        raise WireError("a transcription reply has a text")
    language = body.get("language")
    duration = body.get("duration")
    seconds = (
        float(duration)
        if isinstance(duration, int | float) and not isinstance(duration, bool) and math.isfinite(duration)
        else None
    )
    return Transcribed(
        text=" ".join(text.split())[:MAX_TEXT_CHARS],
        language=language if isinstance(language, str) and language else None,
        duration_s=seconds if seconds is not None and seconds >= 0 else None,
    )


def encode_reply(transcribed: Transcribed, response_format: str) -> dict[str, Any]:
    """What a server answers (the fake provider's side)."""
    if response_format != "verbose_json":
        return {"text": transcribed.text}
    return {
        "task": "transcribe",
        "language": transcribed.language or "english",
        "duration": transcribed.duration_s or 0.0,
        "text": transcribed.text,
        "segments": [],
    }
