"""Dead-letter records of the inbound path: the raw payload and why it was refused.

Records go to ``deadletter.feishu.ingress-feishu`` (stream ``DEADLETTER``). A record must be writable
whatever arrived, because the event is acknowledged to Feishu only once it is written:

- headers are bounded and single-line (a header over NATS's limit would lose the record and the payload);
- a payload too large for a bus message (the server's ``max_payload``) is stored in the ``blobs`` object
  store under ``sha256:<hex>``; the record then has an empty body and names the blob in
  ``Larkbot-Dead-Letter-Blob``. The blob is written first, so a record never names a missing blob.

The record's ``Nats-Msg-Id`` is a digest of the payload: Feishu's re-push of the same event within the
duplicate window adds no second record.
"""

from __future__ import annotations

import hashlib
import logging

import nats

from larkbot.canonical.names import (
    HEADER_DL_BLOB,
    HEADER_DL_CONSUMER,
    HEADER_DL_ERROR,
    HEADER_DL_REASON,
    HEADER_DL_STREAM,
    HEADER_DL_SUBJECT,
    HEADER_MSG_ID,
    OBJECT_STORE_BLOBS,
    dead_letter_subject,
)
from larkbot.runtime.bus import Bus, BusUnavailable, message_size
from larkbot.runtime.logs import mask

log = logging.getLogger(__name__)

DEAD_LETTER_STREAM = "FEISHU"
DEAD_LETTER_CONSUMER = "ingress-feishu"


def _line(text: str, limit: int) -> str:
    return text[:limit].replace("\r", " ").replace("\n", " ")


async def write_dead_letter(bus: Bus, body: bytes, reason: str, error: str, event_type: str) -> None:
    """Record ``body`` with ``reason``; raises :class:`BusUnavailable` when the record is not written
    (the caller must then leave the event to Feishu's re-push)."""
    digest = hashlib.sha256(body).hexdigest()
    headers = {
        HEADER_MSG_ID: f"dl:feishu:{digest[:40]}",
        HEADER_DL_REASON: reason,
        HEADER_DL_ERROR: _line(mask(error), 2000),
        HEADER_DL_STREAM: DEAD_LETTER_STREAM,
        HEADER_DL_CONSUMER: DEAD_LETTER_CONSUMER,
        HEADER_DL_SUBJECT: _line(event_type, 200),
    }
    record = body
    try:
        if message_size(body, headers) > bus.nc.max_payload:
            blob_key = f"sha256:{digest}"
            await _store_blob(bus, blob_key, body)
            headers[HEADER_DL_BLOB] = blob_key
            record = b""
        await bus.js.publish(
            dead_letter_subject(DEAD_LETTER_STREAM, DEAD_LETTER_CONSUMER),
            record,
            headers=headers,
            timeout=5.0,
        )
    except (nats.errors.Error, TimeoutError) as exc:
        raise BusUnavailable(f"dead-letter record not written: {type(exc).__name__}") from None
    log.error("dead-lettered Feishu event (%s): %s", reason, headers[HEADER_DL_ERROR])


async def _store_blob(bus: Bus, key: str, data: bytes) -> None:
    store = await bus.js.object_store(OBJECT_STORE_BLOBS)
    try:
        await store.get_info(key)
    except nats.js.errors.ObjectNotFoundError:
        await store.put(key, data)
