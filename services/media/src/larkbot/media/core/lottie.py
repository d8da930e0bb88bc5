"""Frames of TGS stickers (gzip-compressed Lottie JSON), rendered with rlottie. Pure.

Decisions:

- ``rlottie-python`` (Samsung's rlottie, the renderer Telegram's own apps use, in the wheel): a frame of a
  512×512 sticker renders in ~13 ms, and only the picked frames are rendered.
- A gzip bomb is a typed failure: the JSON is inflated in one bounded step to at most
  :data:`MAX_JSON_BYTES` (Telegram caps a TGS at 64 KB compressed; real ones inflate to a few hundred
  KB), past that :class:`.TooLarge`, before anything parses it.
- The declared canvas is checked against ``MAX_PIXELS`` and frames are rendered straight at the vision
  size (≤ 512 px), so a sticker declaring a huge canvas never allocates it.
- Frames are RGBA: stickers are transparent around their subject (see :mod:`.motion`).
"""

from __future__ import annotations

import zlib
from typing import Final

from rlottie_python.rlottie_wrapper import LottieAnimation

from .errors import TooLarge, Unreadable
from .images import MAX_PIXELS, VISION_MAX_SIDE, Picked, frame_indices, within_side

MAX_JSON_BYTES: Final = 8 * 1024 * 1024
#: Frames a sticker may declare (Telegram's are ≤ 3 s at ≤ 60 fps: 180).
MAX_LOTTIE_FRAMES: Final = 100_000

__all__ = ["MAX_JSON_BYTES", "MAX_LOTTIE_FRAMES", "inflate", "pick"]


def inflate(data: bytes) -> str:
    """The Lottie JSON of a TGS file; raises :class:`TooLarge` past :data:`MAX_JSON_BYTES`."""
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        raw = inflater.decompress(data, MAX_JSON_BYTES + 1)
    except zlib.error:
        raise Unreadable("not a readable TGS sticker (gzip)") from None
    if len(raw) > MAX_JSON_BYTES:
        raise TooLarge(f"the sticker inflates past {MAX_JSON_BYTES} bytes")
    if not inflater.eof:
        raise Unreadable("not a readable TGS sticker (truncated gzip)")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Unreadable("not a readable TGS sticker (not UTF-8 JSON)") from None


def pick(data: bytes, picks: int) -> tuple[list[Picked], int]:
    """``(picked frames, frames in the sticker)`` of a TGS file."""
    text = inflate(data)
    with LottieAnimation.from_data(text) as animation:
        if not animation.animation_p:
            raise Unreadable("not a readable TGS sticker (Lottie)")
        width, height = animation.lottie_animation_get_size()
        total = int(animation.lottie_animation_get_totalframe())
        rate = float(animation.lottie_animation_get_framerate())
        if width <= 0 or height <= 0 or total <= 0 or rate <= 0:
            raise Unreadable("the TGS sticker declares no canvas or no frames")
        if width * height > MAX_PIXELS:
            raise TooLarge(f"the sticker has {width}×{height} pixels; the limit is {MAX_PIXELS}")
        if total > MAX_LOTTIE_FRAMES:
            raise TooLarge(f"the sticker has {total} frames; the limit is {MAX_LOTTIE_FRAMES}")
        w, h = within_side(width, height, VISION_MAX_SIDE)
        picked = [
            Picked(animation.render_pillow_frame(frame_num=i, width=w, height=h), round(i * 1000 / rate))
            for i in frame_indices(total, picks)
        ]
    return picked, total
