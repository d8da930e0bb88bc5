"""Pure image transforms: bytes in, deterministic bytes out (Pillow only, no I/O).

Decisions:

- Same input bytes → same output bytes. Every output is re-encoded from pixels with fixed encoder
  settings, and metadata (ICC, EXIF, XMP, text chunks) is dropped, so nothing from the source leaks into the
  bytes except pixels. Outputs are keyed ``sha256:<hex>`` of those bytes, the alt-text cache key of a photo
  is its thumbnail's key, so determinism is what makes the cache hit.
- Each output is computed on its own path from the source (JPEG ``draft`` decoding at the scale that output
  needs, then Lanczos). Sharing one decoded intermediate between outputs would be faster but would make the
  thumbnail's bytes depend on which other output was requested with it, and the cache key with them.
- Photos are turned upright from their EXIF orientation; target sizes are computed from the upright
  original size, never from the reduced draft, so the draft scale cannot change the output size.
- Untrusted bytes reach several decoders; any exception while decoding is reported as :class:`Unreadable`
  with the exception's type name (never its text, which may quote input). Pixel limits are checked on the
  header before any pixel is decoded.
- Frames of animations, videos and TGS stickers are :mod:`.motion`'s; this module sniffs their containers
  (Lottie/TGS: gzip; video: MP4/QuickTime ``ftyp``, WebM/Matroska EBML) and refuses them here, for stills,
  as :class:`Unsupported`. HEIF stills are refused the same way (needs a HEIF plugin).
"""

from __future__ import annotations

import hashlib
import io
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Final, Literal, assert_never

from PIL import Image, ImageOps

from .errors import TooLarge, Unreadable, Unsupported

MAX_SOURCE_BYTES: Final = 20 * 1024 * 1024
#: Per frame; 8K × 8K. Pillow's own bomb guard starts warning at ~89 M pixels.
MAX_PIXELS: Final = 64_000_000
#: Pixels decoded to reach the last picked frame of an animation (GIF frames decode sequentially).
MAX_DECODED_PIXELS: Final = 1_000_000_000
THUMBNAIL_MAX_PIXELS: Final = 75_000
VISION_MAX_SIDE: Final = 512
HIGH_MAX_SIDE: Final = 1024
DEFAULT_MAX_FRAMES: Final = 5

THUMBNAIL_MIME: Final = "image/webp"
RENDITION_MIME: Final = "image/png"
_WEBP_QUALITY: Final = 80
_WEBP_METHOD: Final = 4
# Measured on a 1024 px photo: level 6 costs ~1.6× level 1 for ~7 % fewer bytes; these images travel
# once, to a model.
_PNG_COMPRESS_LEVEL: Final = 1
_ORIENTATION_TAG: Final = 0x0112
_SWAPS_SIDES: Final = frozenset({5, 6, 7, 8})

Container = Literal["image", "lottie", "video", "heif"]
Size = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Picked:
    """A frame picked from a moving picture (RGB or RGBA, full size) and its time from the start."""

    image: Image.Image
    time_ms: int


def frame_indices(count: int, picks: int) -> list[int]:
    """``min(count, picks)`` equidistant indices of ``count`` frames, the first and the last included."""
    k = max(1, min(count, picks))
    if k == 1:
        return [0]
    return [(i * (count - 1)) // (k - 1) for i in range(k)]


def content_key(data: bytes) -> str:
    """The object-store key of ``data``: ``sha256:<hex>`` (the ingress names downloads the same way)."""
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


def container(data: bytes) -> Container:
    if data[:2] == b"\x1f\x8b":
        return "lottie"
    if data[:4] == b"\x1a\x45\xdf\xa3":
        return "video"
    if data[4:8] == b"ftyp":
        brand = data[8:12]
        if brand in (b"avif", b"avis"):
            return "image"
        if brand in (b"heic", b"heix", b"heim", b"heis", b"hevc", b"hevx", b"mif1", b"msf1"):
            return "heif"
        return "video"
    return "image"


def refusal(kind: Container) -> str | None:
    """Why this build cannot decode a container; ``None`` for what Pillow decodes."""
    match kind:
        case "image":
            return None
        case "lottie":
            return "animated TGS (Lottie) stickers are read as frames only (the frames transform)"
        case "video":
            return "videos (MP4/WebM) are read as frames only (the frames transform)"
        case "heif":
            return "HEIF/HEIC images need a HEIF decoder, which this build does not include"
        case _:
            assert_never(kind)


def check_size(size_bytes: int) -> None:
    if size_bytes > MAX_SOURCE_BYTES:
        raise TooLarge(f"the file has {size_bytes} bytes; the limit is {MAX_SOURCE_BYTES}")


@contextmanager
def decoding() -> Iterator[None]:
    try:
        yield
    except (TooLarge, Unsupported):
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise TooLarge("the image has more pixels than the decoder accepts") from None
    except Exception as exc:  # untrusted input: see the module docstring
        raise Unreadable(f"not a readable image ({type(exc).__name__})") from None


def open_image(data: bytes) -> Image.Image:
    """Open (header only) after the byte, container and pixel checks."""
    check_size(len(data))
    refused = refusal(container(data))
    if refused is not None:
        raise Unsupported(refused)
    with decoding():
        image = Image.open(io.BytesIO(data))
        width, height = image.size
    if width * height > MAX_PIXELS:
        raise TooLarge(f"the image has {width}×{height} pixels; the limit is {MAX_PIXELS}")
    return image


# -- sizes ---------------------------------------------------------------------------------------------
def within_pixels(width: int, height: int, max_pixels: int = THUMBNAIL_MAX_PIXELS) -> Size:
    """The largest size of the same aspect with at most ``max_pixels`` (never upscaled)."""
    if width * height <= max_pixels:
        return width, height
    scale = math.sqrt(max_pixels / (width * height))
    w, h = max(1, int(width * scale)), max(1, int(height * scale))
    while w * h > max_pixels:  # float rounding; extreme aspects
        if w >= h:
            w -= 1
        else:
            h -= 1
    return w, h


def within_side(width: int, height: int, max_side: int) -> Size:
    """The size of the same aspect whose longer side is at most ``max_side`` (never upscaled)."""
    longest = max(width, height)
    if longest <= max_side:
        return width, height
    return max(1, round(width * max_side / longest)), max(1, round(height * max_side / longest))


# -- pixels --------------------------------------------------------------------------------------------
def _upright_size(image: Image.Image) -> Size:
    width, height = image.size
    if image.getexif().get(_ORIENTATION_TAG, 1) in _SWAPS_SIDES:
        return height, width
    return width, height


def normalized(image: Image.Image) -> Image.Image:
    if image.mode not in ("RGB", "RGBA"):
        image = image.convert("RGBA" if image.has_transparency_data else "RGB")
    return image


def resized(image: Image.Image, size: Size) -> Image.Image:
    out = image.resize(size, Image.Resampling.LANCZOS) if image.size != size else image.copy()
    out.info = {}
    return out


def _still(data: bytes, target: Callable[[int, int], Size]) -> Image.Image:
    """The first frame, upright, RGB(A), at ``target(upright original size)``."""
    image = open_image(data)
    with decoding():
        upright = _upright_size(image)
        size = target(*upright)
        if image.format == "JPEG":
            # DCT-domain downscale: decodes a 4000×3000 photo at 1/4 or 1/8 scale, never below size.
            image.draft(None, size if upright == image.size else (size[1], size[0]))
        image.load()
        turned = ImageOps.exif_transpose(image) or image
        return resized(normalized(turned), size)


def encode_webp(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="WEBP", quality=_WEBP_QUALITY, method=_WEBP_METHOD)
    return out.getvalue()


def encode_png(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG", compress_level=_PNG_COMPRESS_LEVEL)
    return out.getvalue()


# -- transforms ----------------------------------------------------------------------------------------
def thumbnail(data: bytes) -> bytes:
    """WebP of at most 75k pixels of the (first frame of the) image."""
    return encode_webp(_still(data, within_pixels))


def rendition(data: bytes, max_side: int = VISION_MAX_SIDE) -> bytes:
    """PNG whose longer side is at most ``max_side``: what a vision model is shown."""
    return encode_png(_still(data, lambda w, h: within_side(w, h, max_side)))


def dimensions(data: bytes) -> Size:
    """``(width, height)`` of encoded image bytes (tests, benchmarks)."""
    with Image.open(io.BytesIO(data)) as image:
        return image.size
