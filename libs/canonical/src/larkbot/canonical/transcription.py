"""Speech to text through the gateway: the ``llm.transcribe`` request/reply (purpose ``transcription``).

Decisions:

- The audio is an object-store key (``blob_key``), never inline bytes: the media worker stores the
  converted audio and the gateway reads it from the ``blobs`` store, as it reads images for
  ``llm.generate``. Credentials, retries, fallbacks and dumps stay in the gateway.
- A failure is an :class:`~.llm.LLMError` with the same categories as ``llm.generate``, an ordinary
  reply: decode a reply with :data:`TRANSCRIPTION_REPLY_ADAPTER`.
- ``language`` is a hint (ISO 639-1, e.g. ``de``); the reply's ``language`` is what the model detected
  or was told, when the endpoint says (``verbose_json``). ``duration_s`` likewise.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, TypeAdapter

from ._base import EpochMs, Id, NonEmptyStr, NonNegativeInt, WireModel
from .llm import LLMError

__all__ = [
    "TRANSCRIPTION_REPLY_ADAPTER",
    "LanguageCode",
    "TranscriptionReply",
    "TranscriptionRequest",
    "TranscriptionResponse",
]

#: ISO 639-1 (or 639-3) language code, lower case, as ``/v1/audio/transcriptions`` takes it.
LanguageCode = Annotated[str, Field(pattern=r"^[a-z]{2,3}$")]


class TranscriptionRequest(WireModel):
    """One transcription. ``endpoint`` names a configured endpoint of format ``openai-transcription``;
    ``blob_key`` the audio in the object store (``mime``/``filename`` are sent with it);
    ``deadline_ms`` is absolute epoch time; ``chat_key`` tags logs."""

    request_id: Id
    purpose: Literal["transcription"] = "transcription"
    endpoint: Id
    blob_key: Id
    mime: NonEmptyStr
    filename: NonEmptyStr
    language: LanguageCode | None = None
    deadline_ms: EpochMs
    chat_key: str | None = None


class TranscriptionResponse(WireModel):
    """``text`` may be empty (silence). ``endpoint`` / ``fallback_from`` as in ``LLMResponse``."""

    kind: Literal["transcription"] = "transcription"
    request_id: Id
    model_identity: Id
    text: str
    language: str | None = None
    duration_s: Annotated[float, Field(ge=0)] | None = None
    provider_latency_ms: NonNegativeInt
    gateway_latency_ms: NonNegativeInt | None = None
    fallback_from: tuple[Id, ...] = ()
    endpoint: Id | None = None


TranscriptionReply = Annotated[TranscriptionResponse | LLMError, Field(discriminator="kind")]
TRANSCRIPTION_REPLY_ADAPTER: TypeAdapter[TranscriptionReply] = TypeAdapter(TranscriptionReply)
