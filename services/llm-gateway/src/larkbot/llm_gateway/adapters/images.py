"""Images for model input: bytes from the JetStream object store by content key, resized per detail.

An image already within the size limit and in a format every provider reads (PNG, JPEG, WebP, GIF) is
sent as stored; anything larger is scaled down (aspect kept) and encoded as PNG with fast compression
(Pillow's PNG writer is deterministic, so the same blob always yields the same request bytes). Results
are cached per ``(key, max_side)``; resizing runs in a worker thread so the event loop keeps serving.
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


class ObjectStoreImages:
    def __init__(
        self, js: JetStreamContext, *, bucket: str = OBJECT_STORE_BLOBS, cache_size: int = 256
    ) -> None:
        self._js = js
        self._bucket = bucket
        self._cache: OrderedDict[tuple[str, int], EncodedImage] = OrderedDict()
        self._cache_size = cache_size

    async def resolve(self, refs: Iterable[tuple[str, int]]) -> dict[tuple[str, int], EncodedImage]:
        out: dict[tuple[str, int], EncodedImage] = {}
        for ref in refs:
            found = self._cache.get(ref)
            if found is None:
                found = await self._load(*ref)
                self._cache[ref] = found
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
            else:
                self._cache.move_to_end(ref)
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
