"""A stand-in for the pipeline, seen from the driver: context updates published on the real, partitioned
``CONTEXT`` stream, and ``pipeline.snapshot``, ``pipeline.history``, ``pipeline.cursor`` and
``pipeline.member`` answered from them, for any number of chats.

Its segments are the synthetic ones of :mod:`.synthetic` (their XML imitates the renderer's vocabulary,
without times), so what it changes in place keeps that vocabulary (:func:`segment_deleted`,
:func:`.synthetic.runtime_segment`). The pipeline's renderer would write what the driver's tests do not
expect: it works on canonical events, not segments, and adds a ``t=`` to every message and runtime event.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from pydantic import BaseModel

from larkbot.canonical.codec import decode_as
from larkbot.canonical.context import (
    AppendOp,
    ContextSnapshot,
    ContextUpdate,
    CursorMove,
    HistoryItem,
    HistoryRequest,
    HistoryResponse,
    MemberMessage,
    MemberRequest,
    MemberResponse,
    ReplaceOp,
    ResetOp,
    Segment,
    SnapshotRequest,
)
from larkbot.canonical.events import EVENT_ADAPTER, RuntimeEvent
from larkbot.canonical.names import (
    QUEUE_PIPELINE,
    SUBJECT_PIPELINE_CURSOR,
    SUBJECT_PIPELINE_HISTORY,
    SUBJECT_PIPELINE_MEMBER,
    SUBJECT_PIPELINE_SNAPSHOT,
    Platform,
    context_subject,
)
from larkbot.runtime.bus import Bus
from larkbot.runtime.serve import Endpoint, model_decoder, service_error_reply

from .synthetic import runtime_segment


@dataclass
class ChatLog:
    """What the fake pipeline holds of one chat."""

    segments: list[Segment] = field(default_factory=list)
    seq: int = 0
    cursor: int = 0
    #: Every ``pipeline.cursor`` request received, in order.
    moves: list[int] = field(default_factory=list)


class FakePipeline:
    """Publishes context updates (on the real, partitioned ``CONTEXT`` stream) and answers the pipeline's
    request services from them, for any number of chats; ``chat_id`` is the default chat."""

    def __init__(self, bus: Bus, platform: Platform, chat_id: str) -> None:
        self.bus = bus
        self.platform = platform
        self.chat_id = chat_id
        self.chats: dict[str, ChatLog] = {}
        self.snapshots = 0
        #: While set, every snapshot request fails with it (answered with the pipeline's error reply).
        self.snapshot_failure: Exception | None = None
        snapshot: Endpoint[SnapshotRequest] = Endpoint(
            bus,
            SUBJECT_PIPELINE_SNAPSHOT,
            QUEUE_PIPELINE,
            model_decoder(SnapshotRequest),
            self._snapshot,
            service_error_reply,
        )
        history: Endpoint[HistoryRequest] = Endpoint(
            bus,
            SUBJECT_PIPELINE_HISTORY,
            QUEUE_PIPELINE,
            model_decoder(HistoryRequest),
            self._history,
            service_error_reply,
        )
        cursor: Endpoint[CursorMove] = Endpoint(
            bus,
            SUBJECT_PIPELINE_CURSOR,
            QUEUE_PIPELINE,
            model_decoder(CursorMove),
            self._cursor,
            service_error_reply,
        )
        member: Endpoint[MemberRequest] = Endpoint(
            bus,
            SUBJECT_PIPELINE_MEMBER,
            QUEUE_PIPELINE,
            model_decoder(MemberRequest),
            self._member,
            service_error_reply,
        )
        self.endpoints: list[Endpoint[Any]] = [snapshot, history, cursor, member]
        #: Runtime events published on ``events.<platform>.>`` (every copy, duplicates included), and
        #: those taken in: one per dedup key, as the pipeline's unique key does.
        self.runtime_published: list[RuntimeEvent] = []
        self.runtime_taken: dict[str, RuntimeEvent] = {}
        self.runtime_changed = asyncio.Condition()
        self._events: Subscription | None = None

    def log(self, chat_id: str | None = None) -> ChatLog:
        return self.chats.setdefault(chat_id or self.chat_id, ChatLog())

    @property
    def seq(self) -> int:
        return self.log().seq

    @property
    def segments(self) -> list[Segment]:
        return self.log().segments

    async def start(self) -> None:
        for endpoint in self.endpoints:
            await endpoint.start()
        self._events = await self.bus.nc.subscribe(f"events.{self.platform.value}.*", cb=self._on_event)

    async def stop(self) -> None:
        if self._events is not None:
            await self._events.unsubscribe()
        for endpoint in self.endpoints:
            await endpoint.stop()

    async def _on_event(self, msg: Msg) -> None:
        """Runtime events (a shell task's completion) enter the chat as runtime segments."""
        event = decode_as(msg.data, EVENT_ADAPTER, dict(msg.headers or {}))
        if not isinstance(event, RuntimeEvent):
            return
        self.runtime_published.append(event)
        if event.dedup_key not in self.runtime_taken:
            self.runtime_taken[event.dedup_key] = event
            await self.append(runtime_segment(event, len(self.runtime_taken)), chat_id=event.chat_id)
        async with self.runtime_changed:
            self.runtime_changed.notify_all()

    async def runtime_event(self, dedup_key: str, timeout_s: float = 30.0) -> RuntimeEvent:
        """Wait until the runtime event of ``dedup_key`` was taken in."""
        async with self.runtime_changed:
            await asyncio.wait_for(
                self.runtime_changed.wait_for(lambda: dedup_key in self.runtime_taken), timeout_s
            )
        return self.runtime_taken[dedup_key]

    async def append(self, *segments: Segment, publish: bool = True, chat_id: str | None = None) -> int:
        """Add segments to a chat; publish them as one update unless ``publish`` is false (a lost update:
        the driver must detect the gap). Returns the chat's new sequence."""
        chat = chat_id or self.chat_id
        log = self.log(chat)
        base = log.seq
        log.seq += 1
        log.segments.extend(segments)
        if publish:
            update = ContextUpdate(
                platform=self.platform,
                chat_id=chat,
                seq=log.seq,
                base_seq=base,
                cursor=log.cursor,
                ops=(AppendOp(segments=segments),),
            )
            await self.bus.publish(context_subject(self.platform.value, chat), update)
        return log.seq

    async def delete(self, *message_ids: str, chat_id: str | None = None) -> int:
        """Mark messages deleted in place and publish the replacements, as the pipeline does for a
        ``delete`` event. Returns the chat's new sequence."""
        chat = chat_id or self.chat_id
        log = self.log(chat)
        ops: list[ReplaceOp] = []
        for index, s in enumerate(log.segments):
            if s.message_id in message_ids and not s.is_deleted:
                gone = segment_deleted(s)
                log.segments[index] = gone
                ops.append(ReplaceOp(segment=gone))
        if not ops:
            return log.seq
        base = log.seq
        log.seq += 1
        update = ContextUpdate(
            platform=self.platform,
            chat_id=chat,
            seq=log.seq,
            base_seq=base,
            cursor=log.cursor,
            ops=tuple(ops),
        )
        await self.bus.publish(context_subject(self.platform.value, chat), update)
        return log.seq

    async def _member(self, request: MemberRequest) -> BaseModel:
        """Every message segment the fake holds counts (deleted ones too), once per message id."""
        mine: dict[str, Segment] = {}
        for s in self.log(request.chat_id).segments:
            if s.node_type == "message" and s.sender_id == request.user_id and s.message_id is not None:
                mine.setdefault(s.message_id, s)
        kept = [s for s in mine.values() if not s.is_deleted]
        shown = kept[-request.max_messages :] if request.max_messages else []
        return MemberResponse(
            user_id=request.user_id,
            message_count=len(mine),
            messages=tuple(
                MemberMessage(
                    message_id=s.message_id, alias=s.xml.split('"')[1], timestamp_sec=s.timestamp_sec
                )
                for s in shown
                if s.message_id is not None
            ),
        )

    async def _snapshot(self, request: SnapshotRequest) -> BaseModel:
        self.snapshots += 1
        if self.snapshot_failure is not None:
            raise self.snapshot_failure
        return self.context(request.chat_id)

    def context(self, chat_id: str) -> ContextSnapshot:
        log = self.log(chat_id)
        return ContextSnapshot(
            platform=self.platform,
            chat_id=chat_id,
            seq=log.seq,
            cursor=log.cursor,
            segments=tuple(log.segments),
        )

    async def _cursor(self, request: CursorMove) -> BaseModel:
        """As the pipeline does: drop what the cursor passed, publish a reset, answer the new context."""
        log = self.log(request.chat_id)
        log.moves.append(request.cursor)
        if request.cursor > log.cursor:
            log.cursor = request.cursor
            log.segments = [s for s in log.segments if s.event_seq > request.cursor]
            base = log.seq
            log.seq += 1
            update = ContextUpdate(
                platform=self.platform,
                chat_id=request.chat_id,
                seq=log.seq,
                base_seq=base,
                cursor=log.cursor,
                ops=(ResetOp(segments=tuple(log.segments)),),
            )
            await self.bus.publish(context_subject(self.platform.value, request.chat_id), update)
        return self.context(request.chat_id)

    async def _history(self, request: HistoryRequest) -> BaseModel:
        found = []
        missing = []
        segments = self.log(request.chat_id).segments
        for wanted in request.message_ids:
            match = next(
                (
                    s
                    for s in segments
                    if s.message_id == wanted or s.xml.startswith(f'<message id="{wanted}"')
                ),
                None,
            )
            if match is None or match.message_id is None:
                missing.append(wanted)
            else:
                alias = match.xml.split('"')[1]
                found.append(
                    HistoryItem(
                        message_id=match.message_id,
                        alias=alias,
                        xml=match.xml,
                        attachments=match.attachments,
                        sender_id=match.sender_id,
                        is_myself=match.is_myself,
                        is_self_sent=match.is_self_sent,
                        is_bot=match.is_bot,
                        is_deleted=match.is_deleted,
                        is_forwarded=match.is_forwarded,
                        reply_to_message_id=match.reply_to_message_id,
                    )
                )
        return HistoryResponse(found=tuple(found), missing=tuple(missing))


def segment_deleted(s: Segment) -> Segment:
    """``s`` as the renderer shows a deleted message: self-closing, flagged."""
    head = s.xml.split(">", 1)[0].rstrip("/")
    return s.model_copy(update={"xml": f'{head} deleted="true"/>', "is_deleted": True, "attachments": ()})
