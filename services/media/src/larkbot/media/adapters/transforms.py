"""A job or a ``read_image`` request, end to end: fetch the bytes, transform, store, describe, cache.

CPU work (decoding, resizing, encoding) runs in worker threads: Pillow, FFmpeg (PyAV) and rlottie release
the GIL there, so several jobs use several cores while the event loop keeps serving the bus. The threads
in use are bounded by the jobs in flight (``concurrency`` pull loops, one job each).

Decisions:

- ``alt_text`` without a vision endpoint is refused as ``unsupported`` *before* downloading anything: no
  platform download is spent on a description that cannot be made, and the chat does not block.
- ``frames`` succeed without a vision endpoint (frames and a thumbnail are outputs in their own right);
  with one, the picked frames are described together, each with its time, and cached under the file's
  hash. ``max_frames`` is the worker's (``services.media.max_frames``, ≤ 5); a job may ask for fewer.
- ``transcript`` jobs (voice, audio, video notes): the file's audio becomes 16 kHz mono WAV in the
  object store and ``llm.transcribe`` reads it from there; the transcript and the audio's duration are
  cached under the file's hash, so a second identical job neither decodes nor calls the model. Without
  a transcription endpoint the job is ``unsupported`` before anything is downloaded (the pipeline does
  not ask for transcripts then; see ``llm.transcription``).
- Every job is checked against the chat's limits before downloading: the declared size (``max_bytes``,
  at most the platform's 20 MB) and, for transcripts, the declared duration (``max_duration_s``).
- ``custom_emoji`` jobs carry an emoji id, not a downloadable file, and no ingress action turns one into
  bytes yet: refused as ``unsupported``.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import assert_never

from larkbot.canonical.content import AttachmentType
from larkbot.canonical.llm import ImagePart
from larkbot.canonical.media import MediaJob, MediaResult, ReadImageRequest, ReadImageResponse

from .. import metrics
from ..core import audio, images, motion, transcripts
from ..core.errors import Unsupported
from ..core.jobs import source_type, succeeded
from .remote import SourceRef, Sources, Speech, Vision
from .store import AltTextCache, Blobs

#: Attachment types described from frames, whose alt text is cached under the file's hash.
MOVING = frozenset(
    {AttachmentType.STICKER, AttachmentType.ANIMATION, AttachmentType.VIDEO, AttachmentType.VIDEO_NOTE}
)


class Transformer:
    def __init__(
        self,
        sources: Sources,
        blobs: Blobs,
        cache: AltTextCache,
        vision: Vision,
        speech: Speech,
        *,
        max_frames: int = motion.MAX_FRAMES,
    ) -> None:
        self.sources = sources
        self.blobs = blobs
        self.cache = cache
        self.vision = vision
        self.speech = speech
        self.max_frames = max_frames

    async def run(self, job: MediaJob) -> MediaResult:
        """The job's result; raises :class:`MediaFailure` for a typed failure."""
        endpoint = job.vision_endpoint or self.vision.endpoint
        if job.transform != "custom_emoji":
            transcripts.check_declared(job)
        match job.transform:
            case "custom_emoji":
                raise Unsupported("custom emoji have no downloadable image on the supported platforms yet")
            case "transcript":
                speaking = job.transcription_endpoint or self.speech.endpoint
                if speaking is None:
                    raise Unsupported("no transcription endpoint is configured (llm.transcription)")
                data, content = await self._source(job)
                return await self._transcript(job, data, content, speaking)
            case "thumbnail":
                data, content = await self._source(job)
                thumbnail_key = await self._thumbnail(data)
                return succeeded(job, content_hash=content, thumbnail_key=thumbnail_key)
            case "alt_text":
                if endpoint is None:
                    raise Unsupported("no vision endpoint is configured (llm.vision)")
                data, content = await self._source(job)
                return await self._alt_text(job, data, content, endpoint)
            case "frames":
                data, content = await self._source(job)
                return await self._frames(job, data, content, endpoint)
            case _:
                assert_never(job.transform)

    async def _source(self, job: MediaJob) -> tuple[bytes, str]:
        """The job's file and its content key."""
        # The ingress stores downloads under their sha256, which is what ``content_hash`` records.
        stored = job.blob_key or _stored_key(job.content_hash)
        ref = SourceRef(job.platform, job.chat_id, job.message_id, job.file_id, source_type(job), stored)
        data = await self.sources.fetch(ref, max_bytes=transcripts.max_bytes(job))
        metrics.INPUT_BYTES.labels(job.transform).inc(len(data))
        content = await asyncio.to_thread(images.content_key, data)
        return data, content

    async def _thumbnail(self, data: bytes) -> str:
        thumbnail = await asyncio.to_thread(images.thumbnail, data)
        return await self.blobs.put(thumbnail, "thumbnail")

    async def _alt_text(self, job: MediaJob, data: bytes, content: str, endpoint: str) -> MediaResult:
        thumbnail_key = await self._thumbnail(data)
        alt = await self.cache.get(thumbnail_key)
        if alt is None:
            png = await asyncio.to_thread(images.rendition, data, images.VISION_MAX_SIDE)
            png_key = await self.blobs.put(png, "rendition")
            alt, model = await self.vision.describe(
                endpoint, [png_key], job.attachment_type, request_id=uuid.uuid4().hex, chat_key=_chat(job)
            )
            await self.cache.put(thumbnail_key, alt, model)
        return succeeded(job, content_hash=content, thumbnail_key=thumbnail_key, alt_text=alt)

    async def _frames(self, job: MediaJob, data: bytes, content: str, endpoint: str | None) -> MediaResult:
        picks = min(job.max_frames or self.max_frames, self.max_frames)
        found = await asyncio.to_thread(motion.frames, data, picks)
        frame_keys = tuple([await self.blobs.put(frame, "frame") for frame in found.frames])
        thumbnail_key = await self.blobs.put(found.thumbnail, "thumbnail")
        alt = await self.cache.get(content)
        if alt is None and endpoint is not None:
            alt, model = await self.vision.describe(
                endpoint,
                frame_keys,
                job.attachment_type or AttachmentType.ANIMATION,
                request_id=uuid.uuid4().hex,
                chat_key=_chat(job),
                times_ms=found.times_ms,
            )
            await self.cache.put(content, alt, model)
        return succeeded(
            job,
            content_hash=content,
            thumbnail_key=thumbnail_key,
            alt_text=alt,
            frame_keys=frame_keys,
            frame_times_ms=found.times_ms,
        )

    async def _transcript(self, job: MediaJob, data: bytes, content: str, endpoint: str) -> MediaResult:
        cached = await self.cache.get_transcript(content)
        if cached is None:
            started = time.perf_counter()
            found = await asyncio.to_thread(audio.speech, data, transcripts.max_duration_s(job))
            metrics.AUDIO_CONVERT_SECONDS.observe(time.perf_counter() - started)
            wav_key = await self.blobs.put(found.wav, "audio")
            metrics.AUDIO_SECONDS.inc(found.duration_ms / 1000)
            text, model = await self.speech.transcribe(
                endpoint, wav_key, language=job.language, request_id=uuid.uuid4().hex, chat_key=_chat(job)
            )
            await self.cache.put_transcript(content, text, found.duration_ms, model)
            cached = text, found.duration_ms
        text, duration_ms = cached
        return succeeded(job, content_hash=content, alt_text=text or None, duration_ms=duration_ms)

    async def read_image(self, request: ReadImageRequest) -> ReadImageResponse:
        """An image part of at most 512 px (``low``) or 1024 px (``high``); raises :class:`MediaFailure`."""
        ref = SourceRef(
            request.platform,
            request.chat_id,
            request.message_id,
            request.file_id,
            request.attachment_type,
            request.blob_key,
        )
        data = await self.sources.fetch(ref)
        side = images.VISION_MAX_SIDE if request.detail == "low" else images.HIGH_MAX_SIDE
        png = await asyncio.to_thread(images.rendition, data, side)
        key = await self.blobs.put(png, "rendition")
        if request.attachment_type in MOVING:
            cache_key = await asyncio.to_thread(images.content_key, data)  # a whole file: off the loop
        else:
            cache_key = images.content_key(await asyncio.to_thread(images.thumbnail, data))
        alt = await self.cache.get(cache_key)
        part = ImagePart(blob_key=key, mime=images.RENDITION_MIME, detail=request.detail)
        return ReadImageResponse(request_id=request.request_id, ok=True, image=part, alt_text=alt)


def _stored_key(content_hash: str | None) -> str | None:
    return content_hash if content_hash is not None and content_hash.startswith("sha256:") else None


def _chat(job: MediaJob) -> str:
    return f"{job.platform.value}:{job.chat_id}"
