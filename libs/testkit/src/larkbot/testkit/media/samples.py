"""Synthetic media for tests, the benchmark and the playground: photos, animations, stickers, containers,
voice notes and audio files.

Every generator is deterministic in its arguments. Photos are gradients with shapes and sensor-like noise,
encoded as real camera JPEGs are (quality ~88, optional EXIF orientation), so the decoder does the work a
real photo costs rather than the work a flat colour costs.
"""

from __future__ import annotations

import array
import gzip
import io
import json
import math
import random
import struct
import zlib
from collections.abc import Sequence
from typing import Any

import av
import av.audio
import av.video
from PIL import Image, ImageDraw

RGB = tuple[int, int, int]

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
    """A (minimal) Telegram animated sticker: gzip-compressed Lottie JSON with nothing drawn."""
    return gzip.compress(b'{"v":"5.5.2","fr":60,"ip":0,"op":60,"w":512,"h":512,"layers":[]}', mtime=0)


def lottie_square(
    frames: int = 30, size: int = 64, rate: int = 30, colour: RGB = (255, 0, 0)
) -> dict[str, Any]:
    """Lottie JSON: a square of ``size // 4`` sliding from the left edge to the right one, on transparency.
    At frame ``i`` its centre is at ``x = size / 4 + i * (size / 2) / (frames - 1)``."""
    side, span = size / 4, size / 2
    r, g, b = (c / 255 for c in colour)
    moves = [
        {"t": 0, "s": [side, size / 2, 0], "i": {"x": [1], "y": [1]}, "o": {"x": [0], "y": [0]}},
        {"t": frames - 1, "s": [side + span, size / 2, 0]},
    ]
    layer = {
        "ddd": 0, "ind": 1, "ty": 4, "nm": "square", "ip": 0, "op": frames, "st": 0, "sr": 1,
        "ks": {
            "o": {"a": 0, "k": 100}, "r": {"a": 0, "k": 0}, "p": {"a": 1, "k": moves},
            "a": {"a": 0, "k": [0, 0, 0]}, "s": {"a": 0, "k": [100, 100, 100]},
        },
        "shapes": [
            {"ty": "rc", "d": 1, "s": {"a": 0, "k": [side, side]}, "p": {"a": 0, "k": [0, 0]},
             "r": {"a": 0, "k": 0}},
            {"ty": "fl", "c": {"a": 0, "k": [r, g, b, 1]}, "o": {"a": 0, "k": 100}},
        ],
    }  # fmt: skip
    return {"v": "5.5.2", "fr": rate, "ip": 0, "op": frames - 1, "w": size, "h": size, "layers": [layer]}


def tgs_of(lottie: dict[str, Any]) -> bytes:
    """A TGS sticker: the Lottie JSON, gzip-compressed as Telegram ships it."""
    return gzip.compress(json.dumps(lottie, separators=(",", ":")).encode(), mtime=0)


def gzip_bomb(inflated: int) -> bytes:
    """A gzip stream of ``inflated`` bytes of JSON-ish padding (compresses ~1000:1)."""
    return gzip.compress(b'{"v":"5.5.2","nm":"' + b" " * inflated + b'"}', mtime=0)


def _video_frame(image: Image.Image) -> av.VideoFrame:
    """An ``rgba`` or ``rgb24`` frame holding ``image`` (``VideoFrame.from_image`` drops alpha)."""
    mode, fmt, depth = ("RGBA", "rgba", 4) if image.mode == "RGBA" else ("RGB", "rgb24", 3)
    frame = av.VideoFrame(image.width, image.height, fmt)
    plane = frame.planes[0]
    rows = image.convert(mode).tobytes()
    row = image.width * depth
    padding = b"\x00" * (plane.line_size - row)
    plane.update(b"".join(rows[y * row : (y + 1) * row] + padding for y in range(image.height)))
    return frame


def _encode(images: Sequence[Image.Image], fmt: str, codec: str, pix_fmt: str, fps: int) -> bytes:
    out = io.BytesIO()
    with av.open(out, "w", format=fmt) as container:
        stream = container.add_stream(codec, rate=fps)
        assert isinstance(stream, av.video.VideoStream)
        stream.width, stream.height = images[0].size
        stream.pix_fmt = pix_fmt
        for image in images:
            container.mux(stream.encode(_video_frame(image)))
        container.mux(stream.encode(None))
    return out.getvalue()


def mp4(
    colours: Sequence[RGB] = ((255, 0, 0), (0, 255, 0), (0, 0, 255)),
    size: tuple[int, int] = (64, 48),
    fps: int = 10,
) -> bytes:
    """An H.264 MP4 whose frame ``i`` is filled with ``colours[i]``."""
    return _encode([Image.new("RGB", size, c) for c in colours], "mp4", "libx264", "yuv420p", fps)


def webm_sticker(frames: int = 6, size: int = 64, fps: int = 10) -> bytes:
    """A VP9 WebM video sticker with alpha: a red square of ``size // 2`` on transparency, its top
    edge at ``size // 4`` and its left edge moving from 0 to ``size // 2`` over the frames."""
    images = []
    for i in range(frames):
        image = Image.new("RGBA", (size, size), (0, 0, 0, 0))
        x = i * (size // 2) // max(1, frames - 1)
        ImageDraw.Draw(image).rectangle(
            (x, size // 4, x + size // 2 - 1, size * 3 // 4 - 1), (255, 0, 0, 255)
        )
        images.append(image)
    return _encode(images, "webm", "libvpx-vp9", "yuva420p", fps)


def mp4_header() -> bytes:
    """The start of an MP4 file (an ``ftyp`` box) and nothing else: sniffed as video, unreadable."""
    return struct.pack(">I", 24) + b"ftypisom" + b"\x00\x00\x02\x00" + b"isomiso2" + b"\x00" * 64


def webm_header() -> bytes:
    """An EBML magic and zeros: sniffed as WebM, unreadable."""
    return b"\x1a\x45\xdf\xa3" + b"\x00" * 64


def png_header(width: int, height: int) -> bytes:
    """A PNG that declares ``width``×``height`` and holds no pixels (pixel-limit checks)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b"")


def _tone(seconds: float, rate: int, frequency: float) -> list[int]:
    """16-bit samples of a tone that glides up an octave, so no two moments sound the same."""
    count = int(seconds * rate)
    return [
        int(12_000 * math.sin(2 * math.pi * frequency * (1 + i / max(1, count)) * i / rate))
        for i in range(count)
    ]


def _encode_audio(seconds: float, fmt: str, codec: str, rate: int, frequency: float) -> bytes:
    out = io.BytesIO()
    samples = _tone(seconds, rate, frequency)
    with av.open(out, "w", format=fmt) as container:
        stream = container.add_stream(codec, rate=rate)
        assert isinstance(stream, av.audio.AudioStream)
        stream.layout = "mono"
        step = 960  # 20 ms at 48 kHz: one Opus frame
        for start in range(0, len(samples), step):
            chunk = samples[start : start + step]
            frame = av.AudioFrame(format="s16", layout="mono", samples=len(chunk))
            frame.planes[0].update(array.array("h", chunk).tobytes())
            frame.sample_rate = rate
            frame.pts = start
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return out.getvalue()


def voice_note(seconds: float = 2.0, frequency: float = 440.0) -> bytes:
    """A Telegram-style voice note: Opus in OGG, mono, 48 kHz, ``seconds`` long."""
    return _encode_audio(seconds, "ogg", "libopus", 48_000, frequency)


def audio_file(seconds: float = 2.0, frequency: float = 330.0) -> bytes:
    """An audio file as a music or recorder app sends it: AAC in MP4 (M4A), mono, 44.1 kHz."""
    return _encode_audio(seconds, "mp4", "aac", 44_100, frequency)
