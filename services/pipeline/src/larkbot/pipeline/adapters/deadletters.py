"""The pipeline's dead-letter records: what it could not take as it came, and why (written by the
runtime's one writer, :mod:`larkbot.runtime.deadletter`).

- ``undecodable`` — an ``EVENTS`` message that is not a canonical event (``deadletter.events.pipeline``);
- ``conflict`` — an event whose dedup key is already stored for a different event
  (``core.repeats``; ``deadletter.events.pipeline``): the first copy stays the record, this one is kept
  here with the id of the row that holds the key;
- ``media:<code>`` — an event committed without a transform a media worker refused
  (``deadletter.media.pipeline``).

A record that cannot be written raises :class:`~larkbot.runtime.deadletter.DeadLetterFailed`. Before the
commit (``undecodable``, a conflict with a waiting copy) that restarts the partition from its resume
point, so the message is read and recorded again. After the commit (a conflict the database found, a
media rejection) the event itself is stored and the record is only its trace: the failure is logged.
"""

from __future__ import annotations

import logging

from larkbot.canonical.errors import ContractError
from larkbot.canonical.events import CanonicalEvent
from larkbot.canonical.media import MediaError
from larkbot.canonical.names import CONSUMER_PIPELINE, STREAM_EVENTS, STREAM_MEDIA, events_subject
from larkbot.runtime.deadletter import DeadLetter, DeadLetters, describe

log = logging.getLogger(__name__)


async def undecodable(
    writer: DeadLetters,
    data: bytes,
    headers: dict[str, str] | None,
    subject: str,
    stream_seq: int,
    exc: ContractError,
) -> None:
    await writer.write(
        DeadLetter(
            source=STREAM_EVENTS,
            consumer=CONSUMER_PIPELINE,
            reason="undecodable",
            error=describe(exc),
            data=data,
            subject=subject,
            sequence=stream_seq,
            headers=headers,
        )
    )


async def conflict(
    writer: DeadLetters,
    data: bytes,
    headers: dict[str, str] | None,
    stream_seq: int,
    event: CanonicalEvent,
    holder_id: int | None,
) -> None:
    """``event`` (delivered as ``data``) has the key of a different event: stored as row ``holder_id``, or
    still waiting in admission (``None``)."""
    where = f"event {holder_id}" if holder_id is not None else "an earlier copy still waiting to commit"
    error = (
        f"{event.kind} with dedup key {event.dedup_key!r} in chat {event.platform.value}:{event.chat_id}: "
        f"the key is held by {where} with different content; the first copy stays the record"
    )
    log.warning("dedup key conflict (stream sequence %d): %s", stream_seq, error.replace("\n", " "))
    await writer.write(
        DeadLetter(
            source=STREAM_EVENTS,
            consumer=CONSUMER_PIPELINE,
            reason="conflict",
            error=error,
            data=data,
            subject=events_subject(event.platform.value, event.chat_id),
            sequence=stream_seq,
            headers=headers,
            key=f"conflict:{stream_seq}",
        )
    )


async def media_rejection(writer: DeadLetters, data: bytes, job_id: str, error: MediaError) -> None:
    """A non-retryable media failure (job ``job_id``) let the event commit without that transform."""
    await writer.write(
        DeadLetter(
            source=STREAM_MEDIA,
            consumer=CONSUMER_PIPELINE,
            reason=f"media:{error.code}",
            error=error.message[:500],
            data=data,
            key=job_id,
        )
    )
