"""The pipeline's dead-letter records: what it could not take as it came, and why.

- ``undecodable`` — an ``EVENTS`` message that is not a canonical event (``deadletter.events.pipeline``);
- ``conflict`` — an event whose dedup key is already stored for a different event
  (``core.repeats``; ``deadletter.events.pipeline``): the first copy stays the record, this one is kept
  here with the id of the row that holds the key;
- ``media:<code>`` — an event committed without a transform a media worker refused
  (``deadletter.media.pipeline``).

Each record carries the message's bytes as delivered and the reason in the ``Larkbot-Dead-Letter-*``
headers; its ``Nats-Msg-Id`` makes a repeated record (a partition re-reading the message) a duplicate.
"""

from __future__ import annotations

import logging

import nats

from larkbot.canonical.errors import ContractError
from larkbot.canonical.events import CanonicalEvent
from larkbot.canonical.media import MediaResult
from larkbot.canonical.names import (
    CONSUMER_PIPELINE,
    HEADER_DL_CONSUMER,
    HEADER_DL_ERROR,
    HEADER_DL_REASON,
    HEADER_DL_SEQUENCE,
    HEADER_DL_STREAM,
    HEADER_DL_SUBJECT,
    HEADER_MSG_ID,
    STREAM_EVENTS,
    STREAM_MEDIA,
    dead_letter_subject,
    events_subject,
)
from larkbot.runtime.bus import Bus
from larkbot.runtime.logs import mask

log = logging.getLogger(__name__)


class DeadLetterFailed(Exception):
    """A dead-letter record could not be written: the partition restarts from its resume point rather
    than skip the message."""


def _line(text: str, limit: int = 2000) -> str:
    return mask(text)[:limit].replace("\r", " ").replace("\n", " ")


async def _publish(bus: Bus, subject: str, data: bytes, headers: dict[str, str]) -> None:
    try:
        await bus.js.publish(subject, data, headers=headers)
    except (nats.errors.Error, TimeoutError) as exc:
        raise DeadLetterFailed(f"dead-letter record not written: {type(exc).__name__}") from None


def _events_headers(
    reason: str, error: str, msg_id: str, subject: str, stream_seq: int, original: dict[str, str] | None
) -> dict[str, str]:
    headers = {
        HEADER_MSG_ID: msg_id,
        HEADER_DL_REASON: reason,
        HEADER_DL_ERROR: _line(error),
        HEADER_DL_STREAM: STREAM_EVENTS,
        HEADER_DL_CONSUMER: CONSUMER_PIPELINE,
        HEADER_DL_SUBJECT: subject,
        HEADER_DL_SEQUENCE: str(stream_seq),
    }
    for key, value in (original or {}).items():
        headers.setdefault(f"Original-{key}", value)
    return headers


async def undecodable(
    bus: Bus, data: bytes, headers: dict[str, str] | None, subject: str, stream_seq: int, exc: ContractError
) -> None:
    error = f"{type(exc).__name__}: {exc}"
    msg_id = f"dl:{STREAM_EVENTS}:{CONSUMER_PIPELINE}:{stream_seq}"
    record = _events_headers("undecodable", error, msg_id, subject, stream_seq, headers)
    await _publish(bus, dead_letter_subject(STREAM_EVENTS, CONSUMER_PIPELINE), data, record)
    log.error("dead-lettered stream sequence %d: %s", stream_seq, record[HEADER_DL_ERROR])


async def conflict(
    bus: Bus,
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
    log.warning("dedup key conflict (stream sequence %d): %s", stream_seq, _line(error))
    msg_id = f"dl:{STREAM_EVENTS}:{CONSUMER_PIPELINE}:conflict:{stream_seq}"
    subject = events_subject(event.platform.value, event.chat_id)
    record = _events_headers("conflict", error, msg_id, subject, stream_seq, headers)
    await _publish(bus, dead_letter_subject(STREAM_EVENTS, CONSUMER_PIPELINE), data, record)


async def media_rejection(bus: Bus, data: bytes, result: MediaResult) -> None:
    """A non-retryable media failure let the event commit without that transform."""
    assert result.error is not None
    headers = {
        HEADER_MSG_ID: f"dl:media:{result.job_id}",
        HEADER_DL_REASON: f"media:{result.error.code}",
        HEADER_DL_ERROR: result.error.message[:500].replace("\n", " "),
    }
    await _publish(bus, dead_letter_subject(STREAM_MEDIA, CONSUMER_PIPELINE), data, headers)
