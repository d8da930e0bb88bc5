"""Frames of moving pictures, whatever their container: pick, deduplicate, encode. Pure (bytes in, bytes out).

Decisions:

- One rule for every source — GIF, animated WebP and APNG (Pillow), MP4 and WebM (:mod:`.video`), TGS
  (:mod:`.lottie`): at most ``max_frames`` (≤ 5) equidistant frames *including the first and the last*
  (12 frames, 5 picks → 0, 2, 5, 8, 11), so the model sees how the clip starts and how it ends.
- Near-identical consecutive picks are dropped (a still video, a sticker that pauses, a loop whose last
  frame is its first): the later one goes when its 16×16 RGBA miniature differs from the last kept
  frame's by at most :data:`SAME_FRAME_MEAN_DIFF` on average per channel (0–255). Compression noise stays
  under ~1; any visible change moves a miniature by far more. The first frame is always kept.
- Every kept frame carries its time from the start of the clip in milliseconds (GIF/WebP/APNG: the sum
  of the previous frames' durations; video: its presentation time; Lottie: its frame number over the
  frame rate), which the vision request states beside each frame.
- Transparency is kept: frames are RGBA PNGs and the thumbnail an RGBA WebP whenever the source has an
  alpha channel (WebM VP9 stickers, TGS, transparent GIF/WebP). Compositing on a chosen background could
  hide a subject of that colour (a black cat sticker on black); the vision endpoints take RGBA PNGs, and
  the renderer shows the thumbnail as the sticker it is.
- Every source's frames are PNG ≤ 512 px (what the vision model is shown) and the thumbnail is the WebP
  ≤ 75k pixels of the middle kept frame, as for stills (:mod:`.images`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, assert_never

from PIL import Image, ImageChops, ImageOps, ImageStat

from . import images, lottie, video
from .errors import TooLarge, Unsupported
from .images import Picked, frame_indices

MAX_FRAMES: Final = images.DEFAULT_MAX_FRAMES
SAME_FRAME_MEAN_DIFF: Final = 2.0
_MINIATURE: Final = (16, 16)

__all__ = ["MAX_FRAMES", "SAME_FRAME_MEAN_DIFF", "Frames", "distinct", "frame_indices", "frames"]


@dataclass(frozen=True, slots=True)
class Frames:
    """``frames``: PNG ≤ 512 px of each kept frame, in order, ``times_ms`` their times from the start;
    ``thumbnail``: WebP ≤ 75k pixels of the middle kept frame; ``total``: frames in the source."""

    frames: tuple[bytes, ...]
    times_ms: tuple[int, ...]
    thumbnail: bytes
    total: int


def _miniature(image: Image.Image) -> Image.Image:
    return image.convert("RGBA").resize(_MINIATURE, Image.Resampling.BOX)


def distinct(picked: Sequence[Picked]) -> list[Picked]:
    """``picked`` without the frames that look like the last one kept (see the module docstring)."""
    kept: list[Picked] = []
    last: Image.Image | None = None
    for pick in picked:
        mini = _miniature(pick.image)
        if last is not None:
            diff = ImageStat.Stat(ImageChops.difference(mini, last)).mean
            if sum(diff) / len(diff) <= SAME_FRAME_MEAN_DIFF:
                continue
        kept.append(pick)
        last = mini
    return kept


def _pillow(data: bytes, picks: int) -> tuple[list[Picked], int]:
    image = images.open_image(data)
    with images.decoding():
        total = int(getattr(image, "n_frames", 1))
        width, height = image.size
        # The last frame is always picked, and GIF frames decode sequentially: every frame is decoded.
        if width * height * total > images.MAX_DECODED_PIXELS:
            raise TooLarge(f"the animation's {total} frames of {width}×{height} decode too many pixels")
        wanted = set(frame_indices(total, picks))
        picked: list[Picked] = []
        at_ms = 0
        for index in range(total):
            image.seek(index)
            image.load()  # WebP sets a frame's duration only once it is loaded
            if index in wanted:
                frame = ImageOps.exif_transpose(image) or image
                picked.append(Picked(images.normalized(frame).copy(), at_ms))
            at_ms += int(image.info.get("duration", 0) or 0)
    return picked, total


def frames(data: bytes, max_frames: int = MAX_FRAMES) -> Frames:
    """The kept frames of an animation, a video or a sticker (a still gives one frame)."""
    images.check_size(len(data))
    picks = max(1, min(max_frames, MAX_FRAMES))
    kind = images.container(data)
    match kind:
        case "image":
            picked, total = _pillow(data, picks)
        case "video":
            picked, total = video.pick(data, picks)
        case "lottie":
            picked, total = lottie.pick(data, picks)
        case "heif":
            raise Unsupported(images.refusal(kind) or "HEIF")
        case _:
            assert_never(kind)
    kept = distinct(picked)
    with images.decoding():
        upright = kept[0].image.size
        side = images.within_side(*upright, images.VISION_MAX_SIDE)
        pngs = tuple(images.encode_png(images.resized(p.image, side)) for p in kept)
        middle = kept[len(kept) // 2].image
        thumb = images.encode_webp(images.resized(middle, images.within_pixels(*upright)))
    return Frames(frames=pngs, times_ms=tuple(p.time_ms for p in kept), thumbnail=thumb, total=total)
