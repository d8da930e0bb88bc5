"""Pure decisions around a ``transcript`` job: limits, the cache key, the request, reading the answer.

Decisions:

- Transcripts are cached by the **file's** hash (the source bytes, like an animation's description): a
  forwarded voice note is not transcribed twice, and a hit skips decoding too. The cache keeps the
  audio's duration beside the text, so a hit answers exactly what a miss would. Keys ``tr.<hex>`` live
  in the alt-text bucket beside ``alt.<hex>``; the language hint is not part of the key (the first
  transcript of a file serves every chat, as the first description of a picture does).
- The declared size and duration (what the platform said) are checked before anything is downloaded;
  the real ones are checked again on the bytes (``core.audio``).
- An endpoint error is retried by the pipeline only when retrying can help (``transient``,
  ``deadline``).
"""

from __future__ import annotations

import re
from typing import Final

from larkbot.canonical.llm import LLMError, LLMErrorCategory
from larkbot.canonical.media import MediaJob
from larkbot.canonical.transcription import TranscriptionReply, TranscriptionRequest

from .audio import WAV_MIME, WAV_NAME
from .errors import TooLarge, TooLong, TranscriptionFailed, TranscriptionRefused, TranscriptionUnavailable
from .images import MAX_SOURCE_BYTES
from .jobs import cache_key, model_failure

#: The longest audio a job may ask for (``chats.<key>.media.transcription.max_duration_s`` ≤ this).
MAX_DURATION_S: Final = 1800
#: A job that names no limit (a pipeline that predates per-chat limits) gets the chats' default.
DEFAULT_DURATION_S: Final = 300
TRANSCRIPT_MAX_CHARS: Final = 4000
_SPACES = re.compile(r"\s+")


def transcript_cache_key(content_key: str) -> str:
    """``sha256:<hex>`` → ``tr.<hex>``."""
    return cache_key("tr", content_key)


def max_bytes(job: MediaJob) -> int:
    return min(job.max_bytes or MAX_SOURCE_BYTES, MAX_SOURCE_BYTES)


def max_duration_s(job: MediaJob) -> int:
    return min(job.max_duration_s or DEFAULT_DURATION_S, MAX_DURATION_S)


def check_declared(job: MediaJob) -> None:
    """Refuse what the platform already said is too large or too long, before downloading it."""
    limit = max_bytes(job)
    if job.size_bytes is not None and job.size_bytes > limit:
        raise TooLarge(f"the file has {job.size_bytes} bytes; the limit is {limit}")
    if job.transform == "transcript" and job.duration_s is not None and job.duration_s > max_duration_s(job):
        raise TooLong(f"the audio lasts {job.duration_s:g} s; the limit is {max_duration_s(job)} s")


def transcription_request(
    *, request_id: str, endpoint: str, blob_key: str, language: str | None, deadline_ms: int, chat_key: str
) -> TranscriptionRequest:
    return TranscriptionRequest(
        request_id=request_id,
        endpoint=endpoint,
        blob_key=blob_key,
        mime=WAV_MIME,
        filename=WAV_NAME,
        language=language,
        deadline_ms=deadline_ms,
        chat_key=chat_key,
    )


def clean_transcript(text: str) -> str:
    """One line of at most :data:`TRANSCRIPT_MAX_CHARS` (a longer one is cut and marked)."""
    flat = _SPACES.sub(" ", text).strip()
    return flat if len(flat) <= TRANSCRIPT_MAX_CHARS else flat[: TRANSCRIPT_MAX_CHARS - 1] + "…"


def transcript_from(reply: TranscriptionReply) -> tuple[str, str]:
    """``(transcript, model identity)``; the transcript is empty for silence. Raises
    :class:`TranscriptionFailed`."""
    if isinstance(reply, LLMError):
        failure = transcription_failure(reply.category)
        raise failure(f"transcription failed ({reply.category}): {reply.message}")
    return clean_transcript(reply.text), reply.model_identity


def transcription_failure(category: LLMErrorCategory) -> type[TranscriptionFailed]:
    return model_failure(category, TranscriptionUnavailable, TranscriptionRefused)
