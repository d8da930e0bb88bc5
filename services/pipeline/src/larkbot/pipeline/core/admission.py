"""Media admission (SPEC §6): events whose attachments need transforms wait for the media workers. Pure.

Per chat, events queue in arrival order. Every event's jobs are submitted as soon as it arrives (later events
are prepared speculatively), but only the contiguous ready prefix of a chat leaves the queue to be
committed. A failed head is retried with exponential backoff and holds its chat only; a job with no result
after ``job_timeout_s`` is submitted again (results travel on core NATS and can be missed). A
non-retryable failure (``too_large``, ``unsupported``) makes the attachment ready *without* the transform:
the event commits with the attachment rendered from its metadata alone, and the shell writes a
dead-letter record of the failure. A half-transformed event never leaves the queue.

Telegram custom emoji in the text wait the same way: one ``custom_emoji`` job per distinct id
(:mod:`.emoji`), whose description is written into the event's emoji nodes when it succeeds.

Time is passed in (``now`` in seconds, any monotonic origin); nothing here reads a clock.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from larkbot.canonical.content import Attachment, AttachmentType
from larkbot.canonical.events import CanonicalEvent, EditEvent, MessageEvent
from larkbot.canonical.media import MediaJob, MediaResult, Transform
from larkbot.canonical.names import Platform

from .emoji import described, emoji_key, resolvable_ids
from .render import attachment_key, transcript_key

T = TypeVar("T")
ChatKey = tuple[str, str]

#: Which transforms an attachment type needs before its event may commit; absent types need none. A
#: video note is seen (frames) and heard (transcript).
TRANSFORMS: dict[AttachmentType, tuple[Transform, ...]] = {
    AttachmentType.PHOTO: ("alt_text",),
    AttachmentType.STICKER: ("frames",),
    AttachmentType.ANIMATION: ("frames",),
    AttachmentType.VIDEO: ("frames",),
    AttachmentType.VIDEO_NOTE: ("frames", "transcript"),
    AttachmentType.VOICE: ("transcript",),
    AttachmentType.AUDIO: ("transcript",),
}


def fetchable(event: CanonicalEvent, attachment: Attachment) -> bool:
    """Whether a media worker can have the attachment's bytes at all. Feishu serves no sticker to a bot
    (its message resource API refuses them: "暂不支持获取表情包资源"), so a Feishu sticker is rendered
    from its message alone; a job for it would fail for good every time and dead-letter each one."""
    return not (event.platform is Platform.FEISHU and attachment.type is AttachmentType.STICKER)


@dataclass(frozen=True, slots=True)
class MediaPolicy:
    """A chat's media settings as its jobs carry them (``chats.<key>.media`` and its ``llm.routes``).
    ``transcription_endpoint`` ``None``: the chat gets no transcripts (disabled, or no endpoint at all);
    every other ``None`` leaves the workers' default."""

    vision_endpoint: str | None = None
    transcription_endpoint: str | None = None
    max_frames: int | None = None
    max_bytes: int | None = None
    language: str | None = None
    max_duration_s: int | None = None


NO_POLICY = MediaPolicy()


def job_id(event: CanonicalEvent, index: int | str, transform: str) -> str:
    """Deterministic: a re-submitted job is the same job (and the MEDIA stream dedups it). ``index``:
    the attachment's, or a custom emoji's key."""
    raw = f"{event.platform.value}\x00{event.chat_id}\x00{event.dedup_key}\x00{index}\x00{transform}"
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def jobs_for(event: CanonicalEvent, policy: MediaPolicy = NO_POLICY) -> list[MediaJob]:
    """The media jobs of ``event``'s attachments under the chat's ``policy``. An attachment that already
    has a thumbnail was seen (an edit repeating it); a transcript is asked for only when the chat has a
    transcription endpoint."""
    if not isinstance(event, MessageEvent | EditEvent):
        return []
    jobs = []
    for index, attachment in enumerate(event.attachments):
        if not fetchable(event, attachment):
            continue
        for transform in TRANSFORMS.get(attachment.type, ()):
            heard = transform == "transcript"
            if heard and policy.transcription_endpoint is None:
                continue
            if not heard and attachment.thumbnail_key is not None:
                continue
            jobs.append(
                MediaJob(
                    job_id=job_id(event, index, transform),
                    platform=event.platform,
                    chat_id=event.chat_id,
                    message_id=event.message_id,
                    dedup_key=event.dedup_key,
                    attachment_index=index,
                    transform=transform,
                    attachment_type=attachment.type,
                    file_id=attachment.file_id,
                    mime=attachment.mime or None,
                    content_hash=attachment.content_hash,
                    size_bytes=attachment.size_bytes,
                    duration_s=attachment.duration_s if heard else None,
                    max_frames=policy.max_frames if transform == "frames" else None,
                    max_bytes=policy.max_bytes,
                    vision_endpoint=None if heard else policy.vision_endpoint,
                    transcription_endpoint=policy.transcription_endpoint if heard else None,
                    language=policy.language if heard else None,
                    max_duration_s=policy.max_duration_s if heard else None,
                )
            )
    for emoji_id in resolvable_ids(event.platform, event.content.nodes):
        jobs.append(
            MediaJob(
                job_id=job_id(event, emoji_key(emoji_id), "custom_emoji"),
                platform=event.platform,
                chat_id=event.chat_id,
                message_id=event.message_id,
                dedup_key=event.dedup_key,
                attachment_index=None,
                transform="custom_emoji",
                file_id=emoji_id,
                vision_endpoint=policy.vision_endpoint,
            )
        )
    return jobs


@dataclass(slots=True)
class Pending(Generic[T]):
    """One event waiting in its chat's queue; ``token`` is the shell's handle (the delivery)."""

    event: CanonicalEvent
    token: T
    jobs: dict[str, MediaJob]
    results: dict[str, MediaResult] = field(default_factory=dict)
    submitted_at: dict[str, float] = field(default_factory=dict)
    retry_at: dict[str, float] = field(default_factory=dict)
    failures: int = 0

    @property
    def ready(self) -> bool:
        return len(self.results) == len(self.jobs)

    def completed(self) -> tuple[CanonicalEvent, list[tuple[str, str]]]:
        """The event with transform outputs filled in, and the ``(cache key, text)`` pairs to cache: alt
        texts under :func:`.render.attachment_key`, transcripts under :func:`.render.transcript_key`."""
        event = self.event
        if not self.jobs or not isinstance(event, MessageEvent | EditEvent):
            return event, []
        attachments: list[Attachment] = list(event.attachments)
        content = event.content.nodes
        alts: list[tuple[str, str]] = []
        for jid, result in self.results.items():
            if not result.ok:
                continue
            if result.attachment_index is None:
                emoji_id = self.jobs[jid].file_id
                if result.alt_text:
                    content = described(content, emoji_id, result.pack)
                    alts.append((emoji_key(emoji_id), result.alt_text))
                continue
            index = result.attachment_index
            updated = attachments[index].model_copy(
                update={
                    "thumbnail_key": result.thumbnail_key or attachments[index].thumbnail_key,
                    "content_hash": result.content_hash or attachments[index].content_hash,
                }
            )
            attachments[index] = updated
            key = transcript_key(updated) if result.transform == "transcript" else attachment_key(updated)
            if result.alt_text and key is not None:
                alts.append((key, result.alt_text))
        body = event.content.model_copy(update={"nodes": content})
        return event.model_copy(update={"attachments": tuple(attachments), "content": body}), alts


class Admission(Generic[T]):
    def __init__(
        self, *, retry_base_s: float = 2.0, retry_max_s: float = 300.0, job_timeout_s: float = 60.0
    ) -> None:
        self.retry_base_s = retry_base_s
        self.retry_max_s = retry_max_s
        self.job_timeout_s = job_timeout_s
        self.lanes: dict[ChatKey, deque[Pending[T]]] = {}
        self._by_job: dict[str, Pending[T]] = {}
        self._by_key: dict[tuple[str, str, str], Pending[T]] = {}

    def __len__(self) -> int:
        return sum(len(lane) for lane in self.lanes.values())

    def admit(
        self,
        chat: ChatKey,
        event: CanonicalEvent,
        token: T,
        now: float,
        *,
        transforms: bool = True,
        policy: MediaPolicy = NO_POLICY,
    ) -> list[MediaJob]:
        """Queue ``event``; returns the jobs to submit now (none when ``transforms`` is off: archived
        chats and deployments without media workers), carrying the chat's media ``policy``."""
        jobs = jobs_for(event, policy) if transforms else []
        pending: Pending[T] = Pending(event, token, {job.job_id: job for job in jobs})
        self.lanes.setdefault(chat, deque()).append(pending)
        self._by_key[(*chat, event.dedup_key)] = pending
        for job in jobs:
            self._by_job[job.job_id] = pending
            pending.submitted_at[job.job_id] = now
        return jobs

    def find(self, chat: ChatKey, dedup_key: str) -> Pending[T] | None:
        """The queued event with ``dedup_key`` (a redelivery of an event still waiting)."""
        return self._by_key.get((*chat, dedup_key))

    def result(self, result: MediaResult, now: float) -> bool:
        """Record a worker's result; ``True`` when it may have made something ready."""
        pending = self._by_job.get(result.job_id)
        if pending is None or result.job_id in pending.results:
            return False
        if result.ok or (result.error is not None and not result.error.retryable):
            pending.results[result.job_id] = result
            pending.retry_at.pop(result.job_id, None)
            return pending.ready
        pending.failures += 1
        delay = min(self.retry_max_s, self.retry_base_s * 2 ** (pending.failures - 1))
        pending.retry_at[result.job_id] = now + delay
        return False

    def due(self, now: float) -> list[MediaJob]:
        """Jobs to submit again: failed ones whose backoff ran out, and ones with no answer in time."""
        out: list[MediaJob] = []
        for pending in self._all():
            for jid, job in pending.jobs.items():
                if jid in pending.results:
                    continue
                retry_at = pending.retry_at.get(jid)
                timed_out = retry_at is None and now - pending.submitted_at[jid] >= self.job_timeout_s
                if (retry_at is not None and now >= retry_at) or timed_out:
                    pending.retry_at.pop(jid, None)
                    pending.submitted_at[jid] = now
                    out.append(job)
        return out

    def take_ready(self) -> list[Pending[T]]:
        """Pop every chat's contiguous ready prefix (chats in queue order, each prefix in order)."""
        out: list[Pending[T]] = []
        for chat in list(self.lanes):
            lane = self.lanes[chat]
            while lane and lane[0].ready:
                pending = lane.popleft()
                self._by_key.pop((*chat, pending.event.dedup_key), None)
                for jid in pending.jobs:
                    self._by_job.pop(jid, None)
                out.append(pending)
            if not lane:
                del self.lanes[chat]
        return out

    def drop(self, token_matches: Callable[[T], bool]) -> list[Pending[T]]:
        """Abandon every queued event whose token matches (a partition stopped or moved away). Whole
        chats go, since all events of a chat share a partition; results that arrive later are ignored."""
        out: list[Pending[T]] = []
        for chat in list(self.lanes):
            lane = self.lanes[chat]
            if not any(token_matches(pending.token) for pending in lane):
                continue
            for pending in lane:
                self._by_key.pop((*chat, pending.event.dedup_key), None)
                for jid in pending.jobs:
                    self._by_job.pop(jid, None)
                out.append(pending)
            del self.lanes[chat]
        return out

    def blocked(self) -> list[ChatKey]:
        """Chats whose head has failed at least once and is still waiting."""
        return [chat for chat, lane in self.lanes.items() if lane and lane[0].failures > 0]

    def waiting(self) -> Iterator[Pending[T]]:
        return self._all()

    def _all(self) -> Iterator[Pending[T]]:
        for lane in self.lanes.values():
            yield from lane
