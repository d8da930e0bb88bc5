"""Media transform jobs and results (SPEC §6) and the ``media.read_image`` request/reply.

Decisions:

- Jobs go to the ``MEDIA`` work-queue stream (``media.jobs.<transform>``), results back on
  ``media.results.<p>.<chat>``. A job names its event by ``(platform, chat_id, dedup_key)`` and its source by
  ``attachment_index`` within that event; ``job_id`` is deterministic (from those and the transform), so a
  re-submitted job is the same job and a result can be matched without worker state.
- ``custom_emoji`` jobs have no attachment: their source is the emoji id, carried in ``file_id``, and
  ``attachment_index`` is ``None`` (and only for them).
- Bytes never travel inline. The source is ``blob_key`` when the bytes are already in the object store,
  else the worker fetches ``file_id`` through a ``download`` action. Outputs are object-store keys, named
  by content hash so that identical inputs share them.
- A ``custom_emoji`` result carries the emoji's sticker set in ``pack``; its ``alt_text`` is cached under
  ``emoji:<id>``, and the pipeline writes ``pack`` and that key into the event's emoji node.
- ``media.read_file`` answers the driver's ``read_file`` tool with a bounded text extract of a document
  (:class:`FileExtract`), made on request rather than for every file posted: files can be large, and most
  are never asked about.
- A chat's media settings travel on its jobs (``max_frames``, ``max_bytes``, the endpoints its routes name,
  the transcription language and duration limit); ``None`` leaves the worker's default. A job may only
  ask for less than the worker allows, never more.
- ``transcript`` jobs answer the transcript in ``alt_text`` (the text that stands for the attachment)
  and the audio's duration in ``duration_ms``.
- A result with ``ok=False`` is a failure of the head of the chat's queue: the pipeline retries it with
  backoff and holds the chat (consistency above availability); ``error.retryable=False`` is reported and
  dead-lettered, never silently skipped.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from ._base import EpochMs, Id, NonEmptyStr, NonNegativeInt, WireModel
from .content import AttachmentType
from .llm import ImagePart
from .names import Platform
from .transcription import LanguageCode

__all__ = [
    "FileExtract",
    "FileKind",
    "MediaError",
    "MediaJob",
    "MediaResult",
    "ReadFileRequest",
    "ReadFileResponse",
    "ReadImageRequest",
    "ReadImageResponse",
    "Transform",
]

Transform = Literal["thumbnail", "alt_text", "frames", "transcript", "custom_emoji"]


class MediaJob(WireModel):
    """One transform of one attachment (or custom emoji) of one event. ``size_bytes`` and
    ``duration_s`` are what the platform declared (checked against the limits before downloading);
    ``max_frames``, ``max_bytes``, ``vision_endpoint``, ``transcription_endpoint``, ``language`` and
    ``max_duration_s`` carry the chat's settings; ``None`` uses the worker's defaults."""

    job_id: Id
    platform: Platform
    chat_id: Id
    message_id: Id
    dedup_key: Id
    attachment_index: NonNegativeInt | None
    transform: Transform
    attachment_type: AttachmentType | None = None
    file_id: Id
    blob_key: Id | None = None
    mime: NonEmptyStr | None = None
    content_hash: str | None = None
    size_bytes: NonNegativeInt | None = None
    duration_s: Annotated[float, Field(ge=0)] | None = None
    max_frames: Annotated[int, Field(ge=1)] | None = None
    max_bytes: Annotated[int, Field(ge=1)] | None = None
    vision_endpoint: Id | None = None
    transcription_endpoint: Id | None = None
    language: LanguageCode | None = None
    max_duration_s: Annotated[int, Field(ge=1)] | None = None

    @model_validator(mode="after")
    def _source_matches_transform(self) -> MediaJob:
        if (self.transform == "custom_emoji") != (self.attachment_index is None):
            raise ValueError("attachment_index is absent exactly for custom_emoji jobs")
        return self


class MediaError(WireModel):
    """``code`` is a short stable token (``too_large``, ``unsupported``, ``download``, ``vision``)."""

    code: Id
    message: str
    retryable: bool


class MediaResult(WireModel):
    """The outcome of a :class:`MediaJob`, echoing its coordinates. ``thumbnail_key`` is a WebP of at most
    75k pixels; ``frame_keys`` are up to ``max_frames`` equidistant frames (first and last included,
    near-identical ones dropped) and ``frame_times_ms`` their times from the start of the clip (empty from
    workers that predate them); ``alt_text`` goes to the content-addressed cache (never into the event):
    a description, or for ``transcript`` the transcript, whose audio lasted ``duration_ms``; ``pack`` is
    the sticker set of a described custom emoji. ``error`` is present exactly when ``ok`` is false."""

    job_id: Id
    platform: Platform
    chat_id: Id
    message_id: Id
    dedup_key: Id
    attachment_index: NonNegativeInt | None
    transform: Transform
    ok: bool
    content_hash: str | None = None
    thumbnail_key: Id | None = None
    alt_text: str | None = None
    frame_keys: tuple[Id, ...] = ()
    frame_times_ms: tuple[NonNegativeInt, ...] = ()
    pack: str | None = None
    duration_ms: NonNegativeInt | None = None
    error: MediaError | None = None

    @model_validator(mode="after")
    def _error_iff_failed(self) -> MediaResult:
        if self.ok == (self.error is not None):
            raise ValueError("error must be present exactly when ok is false")
        return self


class ReadImageRequest(WireModel):
    """``media.read_image``: the driver's ``read_image`` tool. ``detail="low"`` answers with a PNG of at most
    512 px, ``"high"`` with one of at most 1024 px, both made from the original bytes (``blob_key`` when
    known, else downloaded through the ingress by ``file_id``)."""

    request_id: Id
    platform: Platform
    chat_id: Id
    message_id: Id | None = None
    file_id: Id
    attachment_type: AttachmentType
    blob_key: Id | None = None
    detail: Literal["low", "high"]
    deadline_ms: EpochMs | None = None


class ReadImageResponse(WireModel):
    """``image`` is ready to be a tool-result part; ``alt_text`` is included when cached."""

    request_id: Id
    ok: bool
    image: ImagePart | None = None
    alt_text: str | None = None
    error: MediaError | None = None

    @model_validator(mode="after")
    def _image_iff_ok(self) -> ReadImageResponse:
        if self.ok != (self.image is not None) or self.ok == (self.error is not None):
            raise ValueError("ok carries an image and no error; a failure carries an error and no image")
        return self


FileKind = Literal["pdf", "text", "docx", "xlsx", "pptx"]


class ReadFileRequest(WireModel):
    """``media.read_file``: the driver's ``read_file`` tool. The worker reads the original (``blob_key``
    when still stored, else ``file_id`` downloaded through the ingress), refuses it above ``max_bytes``
    (before downloading when ``size_bytes``, the platform's figure, already says so) and answers at most
    ``max_chars`` of its text. ``name`` and ``mime`` are what the platform said of the file."""

    request_id: Id
    platform: Platform
    chat_id: Id
    message_id: Id | None = None
    file_id: Id
    attachment_type: AttachmentType
    blob_key: Id | None = None
    name: str | None = None
    mime: str | None = None
    size_bytes: NonNegativeInt | None = None
    max_chars: Annotated[int, Field(ge=100)]
    max_bytes: Annotated[int, Field(ge=1)]
    deadline_ms: EpochMs | None = None


class FileExtract(WireModel):
    """The text of a document as the model is given it. ``kind`` is the format it was read as (from the
    bytes, not the name); ``size_bytes`` the file's size; ``text`` at most the request's ``max_chars``,
    ``total_chars`` the length of the whole extract (which is itself bounded, so ``truncated`` may hold
    when they are equal); ``parts`` counts pages (PDF), sheets (xlsx) or slides (pptx), ``parts_read``
    how many of them the extract covers."""

    name: str | None = None
    kind: FileKind
    mime: NonEmptyStr
    size_bytes: NonNegativeInt
    text: str
    total_chars: NonNegativeInt
    truncated: bool
    parts: NonNegativeInt | None = None
    parts_read: NonNegativeInt | None = None


class ReadFileResponse(WireModel):
    """``extract`` exactly when ``ok``; otherwise ``error`` says why, by a code the model can act on
    (``too_large``, ``unsupported``, ``unreadable``, ``download``, ``store``, ``deadline``)."""

    request_id: Id
    ok: bool
    extract: FileExtract | None = None
    error: MediaError | None = None

    @model_validator(mode="after")
    def _extract_iff_ok(self) -> ReadFileResponse:
        if self.ok != (self.extract is not None) or self.ok == (self.error is not None):
            raise ValueError("ok carries an extract and no error; a failure carries an error and no extract")
        return self
