"""The JetStream buckets of the media workers: blobs (object store) and the alt-text cache (KV).

Decisions:

- Blobs are content-addressed (``sha256:<hex>``, as the ingress names downloads): an output that is
  already stored is not uploaded again, and two workers writing the same key write the same bytes.
- The size limit is checked on the object's metadata before any chunk is fetched.
- Objects are read through the runtime's one-off reader on their chunk subject
  (:func:`larkbot.runtime.reader.read_subject`: a reader consumer the bootstrap declares, streamed by
  ``PullStream``, in order and gap-checked), digest-checked like the client library does: nats-py's
  ``ObjectStore.get`` (an ordered push consumer) takes ~270 ms for a 3.8 MB object on this machine, a
  pull consumer ~15–30 ms. Links fall back to ``get``.
- The alt-text cache is a KV bucket, not a table: media workers scale from zero to many replicas (KEDA) and
  an SQLite file per replica would be a cache per pod, lost at every scale-down; the bus is already shared
  and durable, so the bucket needs no database. It is content-addressed and append-mostly (history 1, no
  TTL): an entry is a pure function of the picture and the vision model. It is created here when missing
  (creation is idempotent); the bootstrap should declare it (see docs/media.md).
- Lower-layer failures (NATS timeouts, a missing bucket) become :class:`StoreFailed` here, once.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import time
from typing import Final

import nats
from nats.js import JetStreamContext
from nats.js.api import ObjectInfo
from nats.js.errors import KeyNotFoundError, NotFoundError
from nats.js.kv import KeyValue
from nats.js.object_store import ObjectStore

from larkbot.canonical.names import KV_MEDIA_ALT_TEXTS, OBJECT_STORE_BLOBS
from larkbot.runtime.reader import SequenceGap, read_subject

from .. import metrics
from ..core.errors import StoreFailed, TooLarge
from ..core.images import MAX_SOURCE_BYTES, content_key
from ..core.jobs import alt_cache_key, emoji_cache_key
from ..core.transcripts import transcript_cache_key

ALT_TEXT_BUCKET: Final = KV_MEDIA_ALT_TEXTS


class Blobs:
    def __init__(self, js: JetStreamContext, *, bucket: str = OBJECT_STORE_BLOBS) -> None:
        self.js = js
        self.bucket = bucket
        self._store: ObjectStore | None = None

    async def _open(self) -> ObjectStore:
        if self._store is None:
            try:
                self._store = await self.js.object_store(self.bucket)
            except (nats.errors.Error, TimeoutError) as exc:
                raise StoreFailed(f"object store {self.bucket} unavailable: {type(exc).__name__}") from None
        return self._store

    async def read(self, key: str, *, max_bytes: int = MAX_SOURCE_BYTES) -> bytes | None:
        """The object's bytes, ``None`` when it is not stored; :class:`TooLarge` above ``max_bytes``."""
        store = await self._open()
        try:
            info = await store.get_info(key)
            if (info.size or 0) > max_bytes:
                raise TooLarge(f"the file has {info.size} bytes; the limit is {max_bytes}")
            if info.is_link() or not info.nuid:
                result = await store.get(key)
                return bytes(result.data or b"")
            return await self._chunks(info)
        except NotFoundError:
            return None
        except (nats.errors.Error, TimeoutError) as exc:
            raise StoreFailed(f"reading {key} failed: {type(exc).__name__}") from None

    async def _chunks(self, info: ObjectInfo) -> bytes:
        """The object's chunks through a reader consumer (see the module docstring)."""
        chunks = info.chunks or 0
        if chunks == 0:
            return b""
        subject = f"$O.{self.bucket}.C.{info.nuid}"
        try:
            out = b"".join(await read_subject(self.js, f"OBJ_{self.bucket}", subject, chunks))
        except SequenceGap as exc:
            raise StoreFailed(f"object {info.name}: {exc}") from None
        algo, _, digest = (info.digest or "").partition("=")
        # Hashing megabytes releases the GIL: off the loop.
        found = await asyncio.to_thread(lambda: hashlib.sha256(out).digest())
        if algo.upper() != "SHA-256" or found != base64.urlsafe_b64decode(digest):
            raise StoreFailed(f"object {info.name} does not match its digest")
        return out

    async def put(self, data: bytes, kind: str) -> str:
        """Store ``data`` under its content key (once) and return the key."""
        key = content_key(data)
        store = await self._open()
        try:
            try:
                await store.get_info(key)
                return key
            except NotFoundError:
                pass
            await store.put(key, data)
        except (nats.errors.Error, TimeoutError) as exc:
            raise StoreFailed(f"writing {key} failed: {type(exc).__name__}") from None
        metrics.OUTPUT_BYTES.labels(kind).inc(len(data))
        return key

    async def status(self) -> str:
        store = await self._open()
        status = await store.status()
        return f"{status.bucket}: {status.size} bytes"


class AltTextCache:
    """``alt.<hex>`` → ``{"alt_text", "model", "at_ms"}`` and ``tr.<hex>`` → ``{"transcript",
    "duration_ms", "model", "at_ms"}`` in :data:`ALT_TEXT_BUCKET`; a custom emoji's ``emoji.<id>`` →
    ``{"alt_text", "model", "at_ms"}`` and its ``pack``."""

    def __init__(self, kv: KeyValue) -> None:
        self.kv = kv

    @classmethod
    async def open(cls, js: JetStreamContext, bucket: str = ALT_TEXT_BUCKET) -> AltTextCache:
        # Declared by the bootstrap (larkbot.canonical.names.KEY_VALUES), which every service runs at start.
        return cls(await js.key_value(bucket))

    async def get(self, content: str) -> str | None:
        found = await self._get(alt_cache_key(content))
        return found[0] if found is not None else None

    async def get_emoji(self, emoji_id: str) -> tuple[str, str | None] | None:
        """A custom emoji's description and sticker set, when cached."""
        return await self._get(emoji_cache_key(emoji_id))

    async def put(self, content: str, alt_text: str, model: str) -> None:
        await self._put(alt_cache_key(content), {"alt_text": alt_text, "model": model})

    async def put_emoji(self, emoji_id: str, alt_text: str, model: str, pack: str | None) -> None:
        await self._put(emoji_cache_key(emoji_id), {"alt_text": alt_text, "model": model, "pack": pack})

    async def _get(self, key: str) -> tuple[str, str | None] | None:
        try:
            entry = await self.kv.get(key)
        except KeyNotFoundError:
            metrics.ALT_TEXT_CACHE.labels("miss").inc()
            return None
        except (nats.errors.Error, TimeoutError) as exc:
            raise StoreFailed(f"alt-text cache unavailable: {type(exc).__name__}") from None
        metrics.ALT_TEXT_CACHE.labels("hit").inc()
        value = json.loads(entry.value or b"{}")
        text, pack = value.get("alt_text"), value.get("pack")
        if not isinstance(text, str) or not text:
            return None
        return text, pack if isinstance(pack, str) and pack else None

    async def _put(self, key: str, value: dict[str, str | None]) -> None:
        stamped = {**value, "at_ms": int(time.time() * 1000)}
        try:
            await self.kv.put(key, json.dumps(stamped, ensure_ascii=False).encode())
        except (nats.errors.Error, TimeoutError) as exc:
            raise StoreFailed(f"alt-text cache unavailable: {type(exc).__name__}") from None

    async def get_transcript(self, content: str) -> tuple[str, int] | None:
        """``(transcript, duration ms)`` of the file ``content`` (``tr.<hex>``), when cached."""
        try:
            entry = await self.kv.get(transcript_cache_key(content))
        except KeyNotFoundError:
            metrics.TRANSCRIPT_CACHE.labels("miss").inc()
            return None
        except (nats.errors.Error, TimeoutError) as exc:
            raise StoreFailed(f"transcript cache unavailable: {type(exc).__name__}") from None
        value = json.loads(entry.value or b"{}")
        text, duration_ms = value.get("transcript"), value.get("duration_ms")
        if not isinstance(text, str) or not isinstance(duration_ms, int):
            metrics.TRANSCRIPT_CACHE.labels("miss").inc()
            return None
        metrics.TRANSCRIPT_CACHE.labels("hit").inc()
        return text, duration_ms

    async def put_transcript(self, content: str, transcript: str, duration_ms: int, model: str) -> None:
        value = {
            "transcript": transcript,
            "duration_ms": duration_ms,
            "model": model,
            "at_ms": int(time.time() * 1000),
        }
        try:
            await self.kv.put(transcript_cache_key(content), json.dumps(value, ensure_ascii=False).encode())
        except (nats.errors.Error, TimeoutError) as exc:
            raise StoreFailed(f"transcript cache unavailable: {type(exc).__name__}") from None

    async def status(self) -> str:
        status = await self.kv.status()
        return f"{status.bucket}: {status.values} entries"
