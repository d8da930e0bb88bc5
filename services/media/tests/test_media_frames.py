"""Frames of videos (MP4, VP9 WebM with alpha) and TGS stickers, from files made here: the picks (first and
last included), deduplication, timestamps, transparency and the typed failures of bad files."""

from __future__ import annotations

import gzip
import io

import pytest
from PIL import Image

from larkbot.media.core import images, lottie, motion, video
from larkbot.media.core.errors import TooLarge, Unreadable
from larkbot.media.core.images import Picked
from larkbot.testkit.media import samples

RED, GREEN, BLUE = (255, 0, 0), (0, 255, 0), (0, 0, 255)


def opened(data: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(data))
    image.load()
    return image


def colour(image: Image.Image, xy: tuple[int, int]) -> tuple[int, ...]:
    pixel = image.getpixel(xy)
    assert isinstance(pixel, tuple)
    return pixel


def near(got: tuple[int, ...], want: tuple[int, ...], tolerance: int = 8) -> bool:
    return all(abs(g - w) <= tolerance for g, w in zip(got, want, strict=True))


def test_an_mp4_gives_its_first_and_last_frames_with_their_times() -> None:
    data = samples.mp4([RED, GREEN, BLUE, RED, GREEN], size=(64, 48), fps=10)
    found = motion.frames(data, 5)
    assert found.total == 5
    assert found.times_ms == (0, 100, 200, 300, 400)
    shown = [opened(frame) for frame in found.frames]
    assert [image.mode for image in shown] == ["RGB"] * 5
    assert all(image.size == (64, 48) for image in shown)
    for image, want in zip(shown, [RED, GREEN, BLUE, RED, GREEN], strict=True):
        assert near(colour(image, (32, 24)), want), colour(image, (32, 24))
    assert opened(found.thumbnail).format == "WEBP"
    assert motion.frames(data, 5) == found  # deterministic bytes: the outputs are content-addressed


def test_identical_consecutive_picks_are_dropped_and_the_first_of_each_run_kept() -> None:
    # 9 frames → picks 0, 2, 4, 6, 8 = red, red, green, blue, blue.
    data = samples.mp4([RED] * 3 + [GREEN] * 3 + [BLUE] * 3, fps=10)
    found = motion.frames(data, 5)
    assert found.times_ms == (0, 400, 600)
    wanted = [RED, GREEN, BLUE]
    assert all(near(colour(opened(f), (5, 5)), w) for f, w in zip(found.frames, wanted, strict=True))
    # A video that never changes is one frame.
    assert len(motion.frames(samples.mp4([GREEN] * 8), 5).frames) == 1


def test_near_identical_frames_count_as_identical_and_visible_changes_do_not() -> None:
    base = Image.new("RGB", (64, 64), (120, 120, 120))
    noisy = base.copy()
    noisy.putpixel((3, 3), (130, 120, 120))  # compression-noise scale
    moved = base.copy()
    moved.paste((255, 255, 255), (0, 0, 24, 24))  # a visible change
    picks = [Picked(base, 0), Picked(noisy, 100), Picked(moved, 200), Picked(moved.copy(), 300)]
    assert [p.time_ms for p in motion.distinct(picks)] == [0, 200]


def test_fewer_frames_than_picks_and_fewer_picks_asked() -> None:
    data = samples.mp4([RED, GREEN], fps=10)
    assert motion.frames(data, 5).times_ms == (0, 100)
    assert motion.frames(samples.mp4([RED, GREEN, BLUE], fps=10), 2).times_ms == (0, 200)  # first and last
    assert motion.frames(samples.mp4([RED, GREEN, BLUE], fps=10), 1).times_ms == (0,)


def test_a_vp9_webm_sticker_keeps_its_transparency() -> None:
    data = samples.webm_sticker(frames=6, size=64, fps=10)
    found = motion.frames(data, 5)
    assert found.total == 6
    assert found.times_ms == (0, 100, 200, 300, 500)  # picks 0, 1, 2, 3, 5: the last included
    shown = [opened(frame) for frame in found.frames]
    assert all(image.mode == "RGBA" for image in shown)
    first, last = shown[0], shown[-1]
    assert colour(first, (2, 2))[3] == 0  # outside the square: transparent
    assert colour(first, (5, 32))[3] == 255  # the square covers x 0..31 on the first frame
    assert near(colour(first, (5, 32))[:3], RED)
    assert colour(last, (5, 32))[3] == 0  # …which has moved right by the last frame
    assert colour(last, (60, 32))[3] == 255
    assert opened(found.thumbnail).mode == "RGBA"


def test_a_tgs_sticker_is_rendered_at_its_picks_with_alpha() -> None:
    data = samples.tgs_of(samples.lottie_square(frames=30, size=64, rate=30, colour=BLUE))
    found = motion.frames(data, 5)
    assert found.total == 30
    assert found.times_ms == (0, 233, 467, 700, 967)  # frames 0, 7, 14, 21, 29 at 30 fps
    shown = [opened(frame) for frame in found.frames]
    assert all((image.mode, image.size) == ("RGBA", (64, 64)) for image in shown)
    # The square (16 px) is centred at x = 16 on frame 0 and at x = 48 on the last frame.
    assert near(colour(shown[0], (16, 32)), (*BLUE, 255))
    assert colour(shown[0], (48, 32))[3] == 0
    assert near(colour(shown[-1], (48, 32)), (*BLUE, 255))
    assert colour(shown[-1], (16, 32))[3] == 0
    assert colour(shown[2], (2, 2))[3] == 0


def test_a_tgs_is_rendered_straight_at_the_vision_size_and_a_blank_one_is_one_frame() -> None:
    big = samples.tgs_of(samples.lottie_square(frames=10, size=1024))
    assert all(opened(f).size == (512, 512) for f in motion.frames(big, 3).frames)
    blank = motion.frames(samples.tgs(), 5)
    assert (blank.total, len(blank.frames), blank.times_ms) == (61, 1, (0,))


def test_a_gzip_bomb_is_too_large_before_anything_parses_it() -> None:
    bomb = samples.gzip_bomb(lottie.MAX_JSON_BYTES + 1)
    assert len(bomb) < 64 * 1024  # as small as a real sticker
    with pytest.raises(TooLarge, match="inflates past"):
        motion.frames(bomb)
    lottie.inflate(samples.gzip_bomb(1000))  # small ones inflate


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (samples.mp4_header(), "not a readable video"),
        (samples.webm_header(), "not a readable video"),
        (samples.mp4([RED, GREEN, BLUE])[:700], "video"),  # truncated
        (gzip.compress(b"this is not lottie json", mtime=0), "Lottie"),
        (gzip.compress(b"[1, 2, 3]", mtime=0), "Lottie"),
        (samples.tgs_of(samples.lottie_square())[:60], "TGS"),  # truncated gzip
        (b"\x1f\x8b" + b"\x00" * 40, "TGS"),
        (gzip.compress(b"\xff\xfe{}", mtime=0), "UTF-8"),
    ],
)
def test_corrupt_videos_and_stickers_are_unreadable(data: bytes, reason: str) -> None:
    with pytest.raises(Unreadable, match=reason) as caught:
        motion.frames(data)
    assert caught.value.as_error().retryable is False


def test_oversized_videos_and_stickers_are_refused() -> None:
    with pytest.raises(TooLarge):
        motion.frames(samples.mp4_header() + b"\x00" * images.MAX_SOURCE_BYTES)
    huge = samples.lottie_square(frames=2)
    huge["w"] = huge["h"] = 10_000
    with pytest.raises(TooLarge, match="pixels"):
        motion.frames(samples.tgs_of(huge))
    long = samples.lottie_square(frames=2)
    long["op"] = lottie.MAX_LOTTIE_FRAMES + 10
    with pytest.raises(TooLarge, match="frames"):
        motion.frames(samples.tgs_of(long))


def test_the_video_decoding_budget_is_a_typed_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(video, "MAX_DECODED_PIXELS", 64 * 48 * 2)
    with pytest.raises(TooLarge, match="too many pixels"):
        motion.frames(samples.mp4([RED, GREEN, BLUE, RED, GREEN]))


def test_a_video_that_cannot_seek_is_decoded_once_from_the_start(monkeypatch: pytest.MonkeyPatch) -> None:
    data = samples.webm_sticker(frames=6, size=64, fps=10)
    seeking = motion.frames(data, 5)

    def cannot_seek(_decoder: object, _pts: int) -> object:
        raise video._SeekFailed

    monkeypatch.setattr(video._Decoder, "at", cannot_seek)
    assert motion.frames(data, 5) == seeking  # the same frames, times and bytes
    clip = samples.mp4([RED] * 3 + [GREEN] * 3 + [BLUE] * 3, fps=10)
    assert motion.frames(clip, 5).times_ms == (0, 400, 600)
