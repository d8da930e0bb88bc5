"""``media.read_file``: a document's text extract for the driver's ``read_file`` tool, end to end.

Decisions:

- Refuse before spending anything: a file the platform says is larger than the request's ``max_bytes``
  is ``too_large`` before any download (the ingress and the object store refuse larger bytes anyway).
- Extracts are cached by the file's content hash in the KV bucket ``media-file-extracts``
  (``file.v1.<hex>``; the version names the extractor, so a better one starts a fresh cache), and so are
  the final refusals of a content (``unsupported``, ``unreadable``, ``too_large`` of an inflated zip): the
  answer is a pure function of the bytes. A platform file seen once is also remembered by its key
  (``src.<hash of platform and file key>`` → content hash), so asking again about the same attachment
  downloads nothing: the first answer is the second's.
- Extraction is CPU work in threads, at most ``slots`` files at once per worker (the pure-Python readers
  hold the GIL, so more would only slow each other and the loop); requests beyond wait their turn.
- Every request gets a typed answer: ``ReadFileResponse(ok=False, error=…)`` carries the failure's code
  and a message written for the model (what the file is, why it was refused).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable
from typing import Any, Final

import nats
from nats.js import JetStreamContext
from nats.js.errors import KeyNotFoundError
from nats.js.kv import KeyValue

from larkbot.canonical.media import FileExtract, MediaError, ReadFileRequest, ReadFileResponse
from larkbot.canonical.names import KV_MEDIA_FILE_EXTRACTS

from .. import metrics
from ..core import files, images
from ..core.errors import MediaFailure, StoreFailed, TooLarge, Unreadable, Unsupported
from .remote import SourceRef, Sources
from .worker import request_error, request_id_of

EXTRACTOR_VERSION: Final = "v1"
_REFUSALS: Final[dict[str, type[MediaFailure]]] = {
    "too_large": TooLarge,
    "unsupported": Unsupported,
    "unreadable": Unreadable,
}


def _now_ms() -> int:
    return int(time.time() * 1000)


class ExtractCache:
    """Extracts (or final refusals) by content key, and the content key of platform files."""

    def __init__(self, kv: KeyValue) -> None:
        self.kv = kv

    @classmethod
    async def open(cls, js: JetStreamContext, bucket: str = KV_MEDIA_FILE_EXTRACTS) -> ExtractCache:
        # Declared by the bootstrap (larkbot.canonical.names.KEY_VALUES), which every service runs at start.
        return cls(await js.key_value(bucket))

    async def get(self, content: str) -> dict[str, Any] | None:
        found = await self._get(_extract_key(content))
        metrics.EXTRACT_CACHE.labels("miss" if found is None else "hit").inc()
        return found

    async def put(self, content: str, value: dict[str, Any]) -> None:
        await self._put(_extract_key(content), value)

    async def source(self, platform: str, file_id: str) -> str | None:
        found = await self._get(_source_key(platform, file_id))
        content = found.get("content") if found is not None else None
        return content if isinstance(content, str) else None

    async def remember(self, platform: str, file_id: str, content: str) -> None:
        await self._put(_source_key(platform, file_id), {"content": content})

    async def status(self) -> str:
        status = await self.kv.status()
        return f"{status.bucket}: {status.values} entries"

    async def _get(self, key: str) -> dict[str, Any] | None:
        try:
            entry = await self.kv.get(key)
        except KeyNotFoundError:
            return None
        except (nats.errors.Error, TimeoutError) as exc:
            raise StoreFailed(f"file extract cache unavailable: {type(exc).__name__}") from None
        value = json.loads(entry.value or b"{}")
        return value if isinstance(value, dict) else None

    async def _put(self, key: str, value: dict[str, Any]) -> None:
        try:
            await self.kv.put(key, json.dumps(value, ensure_ascii=False).encode())
        except (nats.errors.Error, TimeoutError) as exc:
            raise StoreFailed(f"file extract cache unavailable: {type(exc).__name__}") from None


def _extract_key(content: str) -> str:
    algo, _, digest = content.partition(":")
    if algo != "sha256" or len(digest) != 64:
        raise ValueError("extract cache keys are made from sha256:<hex> content keys")
    return f"file.{EXTRACTOR_VERSION}.{digest}"


def _source_key(platform: str, file_id: str) -> str:
    return "src." + hashlib.sha256(f"{platform}\x00{file_id}".encode()).hexdigest()[:40]


class FileReader:
    def __init__(self, sources: Sources, cache: ExtractCache, *, slots: int = 1) -> None:
        self.sources = sources
        self.cache = cache
        self._slots = asyncio.Semaphore(slots)

    async def read(self, request: ReadFileRequest) -> FileExtract:
        """The extract the request asks for; raises :class:`MediaFailure`."""
        if request.size_bytes is not None and request.size_bytes > request.max_bytes:
            raise TooLarge(_too_large(request.size_bytes, request.max_bytes))
        platform = request.platform.value
        content = request.blob_key or await self.cache.source(platform, request.file_id)
        found = await self.cache.get(content) if content is not None else None
        if found is None:
            data = await self.sources.fetch(SourceRef.of(request), max_bytes=request.max_bytes)
            content = await asyncio.to_thread(images.content_key, data)
            await self.cache.remember(platform, request.file_id, content)
            found = await self.cache.get(content) or await self._extract(content, data)
        return _answer(request, found)

    async def _extract(self, content: str, data: bytes) -> dict[str, Any]:
        async with self._slots:
            try:
                made = await asyncio.to_thread(files.extract, data)
            except (TooLarge, Unsupported, Unreadable) as exc:
                refusal = {"error": exc.code, "message": exc.message, "size_bytes": len(data)}
                await self.cache.put(content, refusal)
                return refusal
        value = {
            "kind": made.kind,
            "text": made.text,
            "truncated": made.truncated,
            "parts": made.parts,
            "parts_read": made.parts_read,
            "size_bytes": len(data),
        }
        await self.cache.put(content, value)
        return value


def _too_large(size: int, limit: int) -> str:
    return f"the file has {size / 1e6:.1f} MB; files up to {limit / 1e6:.1f} MB are read"


def _answer(request: ReadFileRequest, found: dict[str, Any]) -> FileExtract:
    size = int(found.get("size_bytes") or 0)
    if size > request.max_bytes:
        raise TooLarge(_too_large(size, request.max_bytes))
    error = found.get("error")
    if isinstance(error, str):
        raise _REFUSALS.get(error, Unreadable)(str(found.get("message") or error))
    text = str(found["text"])
    return FileExtract(
        name=request.name,
        kind=found["kind"],
        mime=files.MIMES[found["kind"]],
        size_bytes=size,
        text=text[: request.max_chars],
        total_chars=len(text),
        truncated=bool(found["truncated"]) or len(text) > request.max_chars,
        parts=found.get("parts"),
        parts_read=found.get("parts_read"),
    )


class ReadFiles:
    """The ``media.read_file`` handler: every request is answered with a typed response."""

    def __init__(self, reader: FileReader, *, clock_ms: Callable[[], int] = _now_ms) -> None:
        self.reader = reader
        self.clock_ms = clock_ms

    async def handle(self, request: ReadFileRequest) -> ReadFileResponse:
        started = time.perf_counter()
        try:
            if request.deadline_ms is not None and request.deadline_ms <= self.clock_ms():
                return _failed(request, MediaError(code="deadline", message="too late", retryable=False))
            try:
                extract = await self.reader.read(request)
            except MediaFailure as exc:
                return _failed(request, exc.as_error())
            metrics.READ_FILE.labels(extract.kind, "ok").inc()
            return ReadFileResponse(request_id=request.request_id, ok=True, extract=extract)
        finally:
            metrics.READ_FILE_SECONDS.observe(time.perf_counter() - started)


def _failed(request: ReadFileRequest, error: MediaError) -> ReadFileResponse:
    metrics.READ_FILE.labels("unknown", error.code).inc()
    return ReadFileResponse(request_id=request.request_id, ok=False, error=error)


def read_file_error(data: bytes, exc: BaseException) -> ReadFileResponse:
    """The reply to a request that did not decode or crashed the handler (``Endpoint.error_reply``)."""
    error = request_error(exc)
    metrics.READ_FILE.labels("unknown", error.code).inc()
    return ReadFileResponse(request_id=request_id_of(data), ok=False, error=error)
