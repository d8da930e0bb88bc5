"""Synthetic media for tests, the benchmark and the playground: photos, animations, stickers, containers.

Every generator is deterministic in its arguments. Photos are gradients with shapes and sensor-like noise,
encoded as real camera JPEGs are (quality ~88, optional EXIF orientation), so the decoder does the work a
real photo costs rather than the work a flat colour costs.
"""

from __future__ import annotations

import gzip
import io
import random
import struct
import zlib

from PIL import Image, ImageDraw

_ORIENTATION_TAG = 0x0112


def photo(
    width: int = 4000,
    height: int = 3000,
    *,
    seed: int = 0,
    orientation: int | None = None,
    quality: int = 88,
) -> bytes:
    rng = random.Random(seed)
    base = Image.linear_gradient("L").resize((width, height))
    red = base
    green = base.rotate(90).resize((width, height))
    blue = Image.new("L", (width, height), rng.randrange(40, 200))
    image = Image.merge("RGB", (red, green, blue))
    draw = ImageDraw.Draw(image)
    for _ in range(12):
        x, y = rng.randrange(width), rng.randrange(height)
        r = rng.randrange(max(2, min(width, height) // 20), max(3, min(width, height) // 4))
        colour = (rng.randrange(256), rng.randrange(256), rng.randrange(256))
        draw.ellipse((x - r, y - r, x + r, y + r), fill=colour)
    # Sensor-like noise: a 4000×3000 photo encodes to ~3.7 MB, as a 12 MP camera's JPEG does.
    noise = Image.effect_noise((width, height), 30).convert("RGB")
    image = Image.blend(image, noise, 0.3)
    out = io.BytesIO()
    if orientation is None:
        image.save(out, format="JPEG", quality=quality)
    else:
        exif = Image.Exif()
        exif[_ORIENTATION_TAG] = orientation
        image.save(out, format="JPEG", quality=quality, exif=exif.tobytes())
    return out.getvalue()


def solid(colour: tuple[int, int, int], size: tuple[int, int] = (640, 480), fmt: str = "PNG") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, colour).save(out, format=fmt)
    return out.getvalue()


def transparent_png(size: tuple[int, int] = (512, 512)) -> bytes:
    image = Image.new("RGBA", size, (0, 0, 0, 0))
    ImageDraw.Draw(image).ellipse((size[0] // 4, size[1] // 4, size[0] * 3 // 4, size[1] * 3 // 4), "red")
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _frames(count: int, size: tuple[int, int]) -> list[Image.Image]:
    """Frame ``i`` is a grey level that encodes ``i``, so tests can tell which frames were picked."""
    return [Image.new("RGB", size, (level(i, count),) * 3) for i in range(count)]


def level(index: int, count: int) -> int:
    """The grey level of frame ``index`` of ``count`` in :func:`animation`."""
    return round(index * 255 / max(1, count - 1))


def animation(count: int = 12, size: tuple[int, int] = (320, 240), fmt: str = "GIF") -> bytes:
    """An animated GIF, WebP or PNG (APNG) whose frames are distinct grey levels."""
    frames = _frames(count, size)
    out = io.BytesIO()
    extra = {"lossless": True} if fmt == "WEBP" else {}
    frames[0].save(out, format=fmt, save_all=True, append_images=frames[1:], duration=100, loop=0, **extra)
    return out.getvalue()


def tgs() -> bytes:
    """A (minimal) Telegram animated sticker: gzip-compressed Lottie JSON."""
    return gzip.compress(b'{"v":"5.5.2","fr":60,"ip":0,"op":60,"w":512,"h":512,"layers":[]}', mtime=0)


def mp4() -> bytes:
    """The start of an MP4 file (an ``ftyp`` box): enough for container sniffing."""
    return struct.pack(">I", 24) + b"ftypisom" + b"\x00\x00\x02\x00" + b"isomiso2" + b"\x00" * 64


def webm() -> bytes:
    return b"\x1a\x45\xdf\xa3" + b"\x00" * 64


def png_header(width: int, height: int) -> bytes:
    """A PNG that declares ``width``×``height`` and holds no pixels (pixel-limit checks)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b"")
