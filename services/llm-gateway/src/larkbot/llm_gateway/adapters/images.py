"""Images for model input: bytes from the JetStream object store by content key, resized per detail.

An image already within the size limit and in a format every provider reads (PNG, JPEG, WebP, GIF) is
sent as stored; anything larger is scaled down (aspect kept) and encoded as PNG with fast compression
(Pillow's PNG writer is deterministic, so the same blob always yields the same request bytes). Resizing
runs in a worker thread so the event loop keeps serving.

Results are cached per ``(key, max_side)``, least recently used out first, within a budget of encoded
bytes (``llm.image_cache_mib``), not a number of entries: a thumbnail is ~8 KB of base64, a 512 px
vision rendition of a photo ~400 KB, a 1024 px one ~1.2 MB. 256 entries, the bound before, held 100 MiB
once 256 photos had been described (the gateway's growth in the sustained-load run,
``docs/performance.md``), and could hold 300 MiB of high-detail images.
"""

from __future__ import annotations

import asyncio
import base64
import io
from collections import OrderedDict
from collections.abc import Iterable

from nats.js import JetStreamContext
from nats.js.errors import NotFoundError, ObjectNotFoundError
from PIL import Image, UnidentifiedImageError

from larkbot.canonical.names import OBJECT_STORE_BLOBS

from ..core.common import EncodedImage
from ..errors import ImageUnavailable

_PASS_THROUGH = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif"}


def fit_image(data: bytes, max_side: int) -> EncodedImage:
    try:
        with Image.open(io.BytesIO(data)) as image:
            fmt = image.format or ""
            if max(image.size) <= max_side and fmt in _PASS_THROUGH:
                return EncodedImage(_PASS_THROUGH[fmt], base64.b64encode(data).decode("ascii"))
            image.seek(0)
            frame = image.convert("RGBA" if "A" in image.getbands() or image.mode == "P" else "RGB")
    except (UnidentifiedImageError, OSError) as exc:
        raise ImageUnavailable(f"not a readable image: {type(exc).__name__}") from None
    frame.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    out = io.BytesIO()
    frame.save(out, format="PNG", compress_level=1)
    return EncodedImage("image/png", base64.b64encode(out.getvalue()).decode("ascii"))


#: ``llm.image_cache_mib`` by default, in bytes.
DEFAULT_CACHE_BYTES = 32 * 1024 * 1024

Ref = tuple[str, int]


class ImageCache:
    """Encoded images by ``(key, max_side)``, least recently used out first, holding at most
    ``max_bytes`` of base64 (an image larger than that is not kept at all)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.held_bytes = 0
        self._entries: OrderedDict[Ref, EncodedImage] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, ref: Ref) -> EncodedImage | None:
        found = self._entries.get(ref)
        if found is not None:
            self._entries.move_to_end(ref)
        return found

    def put(self, ref: Ref, image: EncodedImage) -> None:
        size = len(image.data_b64)
        if size > self.max_bytes:
            return
        old = self._entries.pop(ref, None)
        if old is not None:
            self.held_bytes -= len(old.data_b64)
        self._entries[ref] = image
        self.held_bytes += size
        while self.held_bytes > self.max_bytes:
            _, evicted = self._entries.popitem(last=False)
            self.held_bytes -= len(evicted.data_b64)


class ObjectStoreImages:
    def __init__(
        self,
        js: JetStreamContext,
        *,
        bucket: str = OBJECT_STORE_BLOBS,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        self._js = js
        self._bucket = bucket
        self.cache = ImageCache(cache_bytes)

    async def resolve(self, refs: Iterable[Ref]) -> dict[Ref, EncodedImage]:
        out: dict[Ref, EncodedImage] = {}
        for ref in refs:
            found = self.cache.get(ref)
            if found is None:
                found = await self._load(*ref)
                self.cache.put(ref, found)
            out[ref] = found
        return out

    async def _load(self, key: str, max_side: int) -> EncodedImage:
        store = await self._js.object_store(self._bucket)
        try:
            result = await store.get(key)
        except (ObjectNotFoundError, NotFoundError):
            raise ImageUnavailable(f"image {key} is not in the {self._bucket} store") from None
        data = result.data or b""
        return await asyncio.to_thread(fit_image, data, max_side)
