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
- ``custom_emoji`` jobs carry an emoji id (``file_id``). Its description is cached under the id
  (``emoji.<id>``): a hit answers without asking the platform anything. A miss asks the ingress for the
  emoji's sticker (``custom_emoji``), downloads it (``download``), describes its frames as one custom emoji
  and caches the description under the id and under the file's hash (so the same sticker posted as a
  sticker is not described again). Without a vision endpoint it is refused as ``unsupported`` before
  anything is asked: there is nothing to say of an emoji but its fallback, which the event already has.
- ``transcript`` jobs (voice, audio, video notes): the file's audio becomes 16 kHz mono WAV in the
  object store and ``llm.transcribe`` reads it from there; the transcript and the audio's duration are
  cached under the file's hash, so a second identical job neither decodes nor calls the model. Without
  a transcription endpoint the job is ``unsupported`` before anything is downloaded (the pipeline does
  not ask for transcripts then; see ``llm.transcription``).
- Every job is checked against the chat's limits before downloading: the declared size (``max_bytes``,
  at most the platform's 20 MB) and, for transcripts, the declared duration (``max_duration_s``).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from typing import assert_never

from larkbot.canonical.content import AttachmentType
from larkbot.canonical.llm import ImagePart
from larkbot.canonical.media import MediaJob, MediaResult, ReadImageRequest, ReadImageResponse

from .. import metrics
from ..core import audio, images, motion, transcripts
from ..core.errors import Unsupported
from ..core.jobs import emoji_key, source_type, succeeded
from .remote import SourceRef, Sources, Speech, Vision
from .store import AltTextCache, Blobs

#: Attachment types described from frames, whose alt text is cached under the file's hash.
MOVING = frozenset(
    {AttachmentType.STICKER, AttachmentType.ANIMATION, AttachmentType.VIDEO, AttachmentType.VIDEO_NOTE}
)


@dataclass(frozen=True, slots=True)
class _Seen:
    """A moving picture's stored frames and thumbnail, and its description when one was made or cached
    (``model``: the model that made it now, ``None`` when it came from the cache)."""

    frame_keys: tuple[str, ...]
    times_ms: tuple[int, ...]
    thumbnail_key: str
    alt_text: str | None
    model: str | None

    def result(self, job: MediaJob, content: str, pack: str | None = None) -> MediaResult:
        return succeeded(
            job,
            content_hash=content,
            thumbnail_key=self.thumbnail_key,
            alt_text=self.alt_text,
            frame_keys=self.frame_keys,
            frame_times_ms=self.times_ms,
            pack=pack,
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
                if endpoint is None:
                    raise Unsupported("no vision endpoint is configured (llm.vision)")
                return await self._custom_emoji(job, endpoint)
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
        kind = job.attachment_type or AttachmentType.ANIMATION
        seen = await self._described(data, content, picks, endpoint, _chat(job), kind, None)
        return seen.result(job, content)

    async def _custom_emoji(self, job: MediaJob, endpoint: str) -> MediaResult:
        emoji_id = job.file_id
        try:
            emoji_key(emoji_id)
        except ValueError:
            raise Unsupported("the custom emoji id cannot name a cache entry") from None
        cached = await self.cache.get_emoji(emoji_id)
        if cached is not None:
            alt, pack = cached
            return succeeded(job, content_hash=None, alt_text=alt, pack=pack)
        sticker = await self.sources.custom_emoji(job.platform, job.chat_id, emoji_id)
        ref = SourceRef(job.platform, job.chat_id, job.message_id, sticker.file_id, AttachmentType.STICKER)
        data = await self.sources.fetch(ref)
        metrics.INPUT_BYTES.labels(job.transform).inc(len(data))
        content = await asyncio.to_thread(images.content_key, data)
        picks = min(job.max_frames or self.max_frames, self.max_frames)
        seen = await self._described(
            data, content, picks, endpoint, _chat(job), AttachmentType.STICKER, "custom emoji"
        )
        if seen.alt_text is None:
            raise AssertionError("with an endpoint, a description is cached, made or raised")
        # A description found under the file's hash was made by an earlier job's model: "cache" says so.
        await self.cache.put_emoji(emoji_id, seen.alt_text, seen.model or "cache", sticker.set_name)
        return seen.result(job, content, pack=sticker.set_name)

    async def _described(
        self,
        data: bytes,
        content: str,
        picks: int,
        endpoint: str | None,
        chat_key: str,
        kind: AttachmentType,
        what: str | None,
    ) -> _Seen:
        """Frames and thumbnail stored; the description cached under the file's hash (or made now, when
        an endpoint is given, and cached)."""
        found = await asyncio.to_thread(motion.frames, data, picks)
        frame_keys = tuple([await self.blobs.put(frame, "frame") for frame in found.frames])
        thumbnail_key = await self.blobs.put(found.thumbnail, "thumbnail")
        alt = await self.cache.get(content)
        model: str | None = None
        if alt is None and endpoint is not None:
            alt, model = await self.vision.describe(
                endpoint,
                frame_keys,
                kind,
                request_id=uuid.uuid4().hex,
                chat_key=chat_key,
                times_ms=found.times_ms,
                what=what,
            )
            await self.cache.put(content, alt, model)
        return _Seen(frame_keys, found.times_ms, thumbnail_key, alt, model)

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
        data = await self.sources.fetch(SourceRef.of(request))
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
