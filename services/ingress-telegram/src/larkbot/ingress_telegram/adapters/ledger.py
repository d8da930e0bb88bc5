"""The sent-ledger in a JetStream KV bucket of its own.

Why KV and not a table: the ledger must be shared by every replica of the ``actions.telegram`` queue group
and claimed atomically (``create`` fails when the key exists, ``update`` is compare-and-set on the
revision), which KV gives without a database this otherwise stateless service would have to own and migrate;
its records are short-lived by nature (a retry comes within minutes), so the bucket's TTL is the retention
policy. The bucket is declared with the others (``names.KV_TELEGRAM_SENT_LEDGER``), so its replicas and
limits are the configuration's (``jetstream``). KV keys allow only ``[-/_=.A-Za-z0-9]``, hence the SHA-256
of the caller's key.

A bucket that does not answer — no leader while a cluster elects one, a connection being re-established, a
timeout — raises :class:`LedgerUnavailable` (retryable: the caller tries again while its deadline allows).
A write that timed out may have been stored all the same; the caller recognizes its own record.
"""

from __future__ import annotations

import hashlib

import nats.errors
from nats.js import JetStreamContext
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from larkbot.canonical.errors import RetryableError
from larkbot.canonical.names import KV_TELEGRAM_SENT_LEDGER
from larkbot.runtime.bus import BusUnavailable

from ..core.ledger import Record


class LedgerConflict(RetryableError):
    """Another attempt wrote the record first (compare-and-set lost): read it and decide again."""


class LedgerUnavailable(BusUnavailable):
    """The bucket did not answer now (an election, a reconnect, a timeout): nothing is known of the call."""


def _unavailable(what: str, exc: BaseException) -> LedgerUnavailable:
    return LedgerUnavailable(f"sent-ledger {what}: {type(exc).__name__}")


class SentLedger:
    def __init__(self, kv: KeyValue) -> None:
        self.kv = kv

    @classmethod
    async def open(cls, js: JetStreamContext) -> SentLedger:
        return cls(await js.key_value(KV_TELEGRAM_SENT_LEDGER))

    @staticmethod
    def key(idempotency_key: str) -> str:
        return hashlib.sha256(idempotency_key.encode()).hexdigest()

    async def get(self, idempotency_key: str) -> tuple[Record | None, int]:
        try:
            entry = await self.kv.get(self.key(idempotency_key))
        except KeyNotFoundError:
            return None, 0
        except (nats.errors.Error, TimeoutError) as exc:
            raise _unavailable("read", exc) from None
        if entry.value is None or entry.revision is None:
            return None, 0
        return Record.decode(entry.value), entry.revision

    async def claim(self, idempotency_key: str, record: Record) -> int:
        try:
            return int(await self.kv.create(self.key(idempotency_key), record.encode()))
        except KeyWrongLastSequenceError:
            raise LedgerConflict(idempotency_key) from None
        except (nats.errors.Error, TimeoutError) as exc:
            raise _unavailable("claim", exc) from None

    async def put(self, idempotency_key: str, record: Record, revision: int) -> int:
        try:
            return int(await self.kv.update(self.key(idempotency_key), record.encode(), last=revision))
        except KeyWrongLastSequenceError:
            raise LedgerConflict(idempotency_key) from None
        except (nats.errors.Error, TimeoutError) as exc:
            raise _unavailable("write", exc) from None
