"""The pure transforms: determinism, pixel bounds, orientation, alpha, frame picks, refusals."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from larkbot.media.core import images, motion
from larkbot.media.core.errors import TooLarge, Unreadable, Unsupported
from larkbot.testkit.media import samples


@pytest.fixture(scope="module")
def photo() -> bytes:
    return samples.photo(1600, 1200, seed=1)


def open_bytes(data: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(data))
    image.load()
    return image


def test_thumbnail_is_deterministic_webp_within_75k_pixels(photo: bytes) -> None:
    first, second = images.thumbnail(photo), images.thumbnail(bytes(photo))
    assert first == second
    thumb = open_bytes(first)
    assert thumb.format == "WEBP"
    assert thumb.width * thumb.height <= images.THUMBNAIL_MAX_PIXELS
    assert thumb.width * thumb.height > images.THUMBNAIL_MAX_PIXELS * 0.97  # no needless shrinking
    assert abs(thumb.width / thumb.height - 4 / 3) < 0.01
    assert images.thumbnail(samples.photo(1600, 1200, seed=2)) != first


@pytest.mark.parametrize(
    ("width", "height"),
    [(4000, 3000), (3000, 4000), (10000, 10), (1, 5000), (274, 274), (275, 275), (1, 1), (300, 250)],
)
def test_size_rules_bound_pixels_and_sides_without_upscaling(width: int, height: int) -> None:
    w, h = images.within_pixels(width, height)
    assert 1 <= w <= width
    assert 1 <= h <= height
    assert w * h <= images.THUMBNAIL_MAX_PIXELS
    if width * height <= images.THUMBNAIL_MAX_PIXELS:
        assert (w, h) == (width, height)
    w, h = images.within_side(width, height, 512)
    assert max(w, h) == min(512, max(width, height))
    assert w <= width
    assert h <= height


def test_rendition_is_a_deterministic_png_within_the_side(photo: bytes) -> None:
    low = images.rendition(photo, 512)
    assert low == images.rendition(photo, 512)
    image = open_bytes(low)
    assert (image.format, image.size) == ("PNG", (512, 384))
    assert image.info.get("icc_profile") is None
    assert open_bytes(images.rendition(photo, 1024)).size == (1024, 768)
    small = samples.solid((10, 200, 10), (300, 200))
    assert open_bytes(images.rendition(small, 1024)).size == (300, 200)  # never upscaled


def test_exif_orientation_is_applied(photo: bytes) -> None:
    rotated = samples.photo(1600, 1200, seed=1, orientation=6)  # stored landscape, shown portrait
    assert open_bytes(images.rendition(rotated, 512)).size == (384, 512)
    thumb = open_bytes(images.thumbnail(rotated))
    assert thumb.height > thumb.width


def test_transparency_survives() -> None:
    thumb = open_bytes(images.thumbnail(samples.transparent_png((600, 600))))
    assert thumb.mode == "RGBA"
    assert thumb.getpixel((0, 0))[3] == 0  # type: ignore[index]
    centre = thumb.getpixel((thumb.width // 2, thumb.height // 2))
    assert centre[3] == 255  # type: ignore[index]


@pytest.mark.parametrize(
    ("count", "picks", "expected"),
    [
        (12, 5, [0, 2, 5, 8, 11]),
        (5, 5, [0, 1, 2, 3, 4]),
        (3, 5, [0, 1, 2]),
        (1, 5, [0]),
        (100, 1, [0]),
        (100, 2, [0, 99]),
    ],
)
def test_frame_indices_are_equidistant_with_the_first_and_the_last(
    count: int, picks: int, expected: list[int]
) -> None:
    assert images.frame_indices(count, picks) == expected


@pytest.mark.parametrize("fmt", ["GIF", "WEBP", "PNG"])
def test_frames_of_animations_pick_equidistant_frames(fmt: str) -> None:
    data = samples.animation(12, (320, 240), fmt=fmt)
    found = motion.frames(data, 5)
    assert found.total == 12
    assert len(found.frames) == 5
    assert found.times_ms == (0, 200, 500, 800, 1100)  # 100 ms a frame
    levels = [open_bytes(frame).convert("L").getpixel((5, 5)) for frame in found.frames]
    wanted = [samples.level(i, 12) for i in (0, 2, 5, 8, 11)]
    assert all(abs(int(got) - want) <= 3 for got, want in zip(levels, wanted, strict=True)), levels  # type: ignore[arg-type]
    assert all(open_bytes(frame).size == (320, 240) for frame in found.frames)
    assert motion.frames(data, 5) == found
    thumb = open_bytes(found.thumbnail)
    assert thumb.format == "WEBP"
    assert thumb.width * thumb.height <= images.THUMBNAIL_MAX_PIXELS
    assert len(motion.frames(data, 3).frames) == 3


def test_a_still_sticker_has_one_frame() -> None:
    found = motion.frames(samples.solid((200, 0, 0), (512, 512), fmt="WEBP"), 5)
    assert (found.total, len(found.frames)) == (1, 1)


def test_files_over_20_mb_are_refused_before_decoding() -> None:
    with pytest.raises(TooLarge):
        images.thumbnail(b"\xff\xd8" + b"\x00" * images.MAX_SOURCE_BYTES)
    images.check_size(images.MAX_SOURCE_BYTES)
    with pytest.raises(TooLarge):
        images.check_size(images.MAX_SOURCE_BYTES + 1)


def test_too_many_pixels_are_refused_from_the_header() -> None:
    with pytest.raises(TooLarge, match="pixels"):
        images.thumbnail(samples.png_header(9000, 9000))
    with pytest.raises(TooLarge):
        motion.frames(samples.png_header(9000, 9000))


@pytest.mark.parametrize("data", [samples.tgs(), samples.mp4_header(), samples.webm_header()])
def test_stills_refuse_moving_containers_which_only_frames_read(data: bytes) -> None:
    with pytest.raises(Unsupported, match="frames transform"):
        images.thumbnail(data)
    with pytest.raises(Unsupported, match="frames transform"):
        images.rendition(data)


@pytest.mark.parametrize("data", [b"not an image at all", samples.photo(64, 48)[:400], b""])
def test_garbage_and_truncated_files_are_unreadable(data: bytes) -> None:
    with pytest.raises(Unreadable) as caught:
        images.thumbnail(data)
    assert caught.value.as_error().retryable is False
    assert "not a readable image" in caught.value.message


def test_content_key_names_bytes_like_the_ingress() -> None:
    assert images.content_key(b"abc") == (
        "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )
