"""The one dead-letter writer: what a service could not take as it came, and why.

A record goes to ``deadletter.<source>.<consumer>`` (stream ``DEADLETTER``): its body is the input's bytes
as received, its headers one schema for every writer:

============================  ==========================================================================
header                        value
============================  ==========================================================================
``Larkbot-Dead-Letter-Reason``      the reason class (``undecodable``, ``poison``, ``crashed``,
                                    ``conflict``, ``media:<code>``, ``malformed``, …)
``Larkbot-Dead-Letter-Error``       the error, secrets masked, one line, at most 2,000 characters
``Larkbot-Dead-Letter-Stream``      the source: the stream read (``EVENTS``) or the platform (``feishu``)
``Larkbot-Dead-Letter-Consumer``    the durable consumer, or the service that read the platform
``Larkbot-Dead-Letter-Subject``     the subject (or the platform's event type), when there is one
``Larkbot-Dead-Letter-Sequence``    the stream sequence — absent for a platform payload
``Larkbot-Dead-Letter-Deliveries``  how many times it was delivered, when known
``Larkbot-Dead-Letter-Blob``        set when the input was too large for the record itself: the ``blobs``
                                    object-store key holding it (the record's body is then empty)
``Original-<name>``                 each header the input carried
``Nats-Msg-Id``                     ``dl:<source>:<consumer>:<key>``: a repeated record (the same input
                                    read again) is a duplicate within the stream's window
============================  ==========================================================================

When the write fails (NATS unreachable, no PubAck in time) :meth:`DeadLetters.write` raises
:class:`DeadLetterFailed` and the caller does not acknowledge the input: it comes back (a nak, a partition
read again from its resume point, a platform's re-push) and is recorded then. Nothing is lost; nothing is
retried here. The blob of an oversized input is written before the record, so a record never names a
missing blob.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass

import nats
from nats.js import JetStreamContext

from larkbot.canonical.errors import RetryableError
from larkbot.canonical.names import (
    HEADER_DL_BLOB,
    HEADER_DL_CONSUMER,
    HEADER_DL_DELIVERIES,
    HEADER_DL_ERROR,
    HEADER_DL_REASON,
    HEADER_DL_SEQUENCE,
    HEADER_DL_STREAM,
    HEADER_DL_SUBJECT,
    HEADER_MSG_ID,
    OBJECT_STORE_BLOBS,
    dead_letter_subject,
)

from . import metrics
from .bus import message_size
from .logs import mask

__all__ = [
    "ERROR_LIMIT",
    "SUBJECT_LIMIT",
    "DeadLetter",
    "DeadLetterFailed",
    "DeadLetters",
    "describe",
    "record_headers",
]

log = logging.getLogger(__name__)

ERROR_LIMIT = 2000
SUBJECT_LIMIT = 200


class DeadLetterFailed(RetryableError):
    """The record was not written: leave the input unacknowledged so that it comes back."""


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One record. ``key`` names it among the source's records (default: the stream sequence, else a
    digest of ``data``)."""

    source: str
    consumer: str
    reason: str
    error: str
    data: bytes
    subject: str | None = None
    sequence: int | None = None
    deliveries: int | None = None
    headers: Mapping[str, str] | None = None
    key: str | None = None

    def record_key(self) -> str:
        if self.key is not None:
            return self.key
        if self.sequence is not None:
            return str(self.sequence)
        return hashlib.sha256(self.data).hexdigest()[:40]


def describe(exc: BaseException) -> str:
    """An exception as a record's error: ``Type: message``."""
    return f"{type(exc).__name__}: {exc}"


def _line(text: str, limit: int) -> str:
    return text[:limit].replace("\r", " ").replace("\n", " ")


def record_headers(letter: DeadLetter) -> dict[str, str]:
    """The record's headers (without the blob's), in the schema above."""
    headers = {
        HEADER_MSG_ID: f"dl:{letter.source}:{letter.consumer}:{letter.record_key()}",
        HEADER_DL_REASON: _line(letter.reason, SUBJECT_LIMIT),
        HEADER_DL_ERROR: _line(mask(letter.error), ERROR_LIMIT),
        HEADER_DL_STREAM: letter.source,
        HEADER_DL_CONSUMER: letter.consumer,
    }
    if letter.subject is not None:
        headers[HEADER_DL_SUBJECT] = _line(letter.subject, SUBJECT_LIMIT)
    if letter.sequence is not None:
        headers[HEADER_DL_SEQUENCE] = str(letter.sequence)
    if letter.deliveries is not None:
        headers[HEADER_DL_DELIVERIES] = str(letter.deliveries)
    for key, value in (letter.headers or {}).items():
        headers.setdefault(f"Original-{key}", value)
    return headers


class DeadLetters:
    """Writes records to ``DEADLETTER`` (see the module docstring)."""

    def __init__(self, js: JetStreamContext, *, timeout_s: float = 5.0) -> None:
        self.js = js
        self.timeout_s = timeout_s

    async def write(self, letter: DeadLetter) -> None:
        """Write the record and wait for its PubAck; :class:`DeadLetterFailed` when it is not stored."""
        headers = record_headers(letter)
        body = letter.data
        try:
            # nats-py keeps the server's limit on its client (pinned nats-py 2.x).
            if message_size(body, headers) > self.js._nc.max_payload:
                blob = f"sha256:{hashlib.sha256(body).hexdigest()}"
                await self._store_blob(blob, body)
                headers[HEADER_DL_BLOB] = blob
                body = b""
            await self.js.publish(
                dead_letter_subject(letter.source, letter.consumer),
                body,
                headers=headers,
                timeout=self.timeout_s,
            )
        except (nats.errors.Error, TimeoutError) as exc:
            raise DeadLetterFailed(f"dead-letter record not written: {type(exc).__name__}") from None
        metrics.DEAD_LETTERS.labels(letter.consumer, letter.reason).inc()
        log.error(
            "dead-lettered %s from %s (%s): %s",
            f"sequence {letter.sequence}" if letter.sequence is not None else "a payload",
            letter.source,
            letter.reason,
            headers[HEADER_DL_ERROR],
        )

    async def _store_blob(self, key: str, data: bytes) -> None:
        store = await self.js.object_store(OBJECT_STORE_BLOBS)
        try:
            await store.get_info(key)
        except nats.js.errors.ObjectNotFoundError:
            await store.put(key, data)
