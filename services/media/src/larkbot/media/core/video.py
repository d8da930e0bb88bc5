"""Frames of MP4 and WebM files (H.264, VP8/VP9, AV1… whatever the FFmpeg inside PyAV decodes). Pure.

Decisions:

- PyAV (``av``), not an ffmpeg executable: its wheel carries FFmpeg's libraries (libvpx and dav1d
  included) and decodes in-process from the bytes in memory — no subprocess per job, no temporary file,
  no pipe protocol to parse — and the same dependency serves audio conversions.
- Two passes. The first only demuxes (no decoding) to learn every frame's presentation time; the picks
  are made on that list (:func:`.images.frame_indices`: first and last included). The second seeks to the
  keyframe before each pick and decodes up to it, so a one-minute video costs five short decodes, not
  1,800 frames. A file that cannot seek is decoded once from the start instead (within the same budget).
- VP9 in WebM carries transparency beside the picture (Matroska BlockAdditional), which only libvpx's
  decoder reads; FFmpeg's own ``vp9`` decoder drops it. VP9 streams are therefore decoded with
  ``libvpx-vp9`` and come out ``yuva420p`` when they have alpha; frames with alpha become RGBA images.
- One decoding thread per job: the worker runs ``cores + 1`` jobs at once, so FFmpeg's own threads would
  only compete with them.
- Bounds: the source's size (20 MB, checked by the caller), ``MAX_PIXELS`` per frame from the stream's
  header, and ``MAX_DECODED_PIXELS`` for all decoding (long GOPs between keyframes cost decoded frames).
  Anything FFmpeg refuses is :class:`.Unreadable` with the exception's type, never its text.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction
from typing import Final, cast

import av
import av.container
import av.video
from av.video.codeccontext import VideoCodecContext
from PIL import Image

from .errors import TooLarge, Unreadable, Unsupported
from .images import MAX_DECODED_PIXELS, MAX_PIXELS, Picked, frame_indices

#: Frames a file may declare (a 20 MB file of tiny frames); the first pass keeps one timestamp per frame.
MAX_DEMUXED_FRAMES: Final = 200_000
_ALPHA_DECODERS: Final = {"vp9": "libvpx-vp9", "vp8": "libvpx"}

__all__ = ["MAX_DEMUXED_FRAMES", "pick"]


@contextmanager
def _decoding() -> Iterator[None]:
    try:
        yield
    except (TooLarge, Unsupported, Unreadable):
        raise
    except Exception as exc:  # untrusted input: FFmpeg's messages may quote it
        raise Unreadable(f"not a readable video ({type(exc).__name__})") from None


def _image(frame: av.VideoFrame) -> Image.Image:
    """RGBA when the frame has an alpha plane, else RGB."""
    alpha = any(component.is_alpha for component in frame.format.components)
    mode, packed = ("RGBA", "rgba") if alpha else ("RGB", "rgb24")
    out = frame.reformat(format=packed)
    plane = out.planes[0]
    return Image.frombuffer(mode, (out.width, out.height), bytes(plane), "raw", mode, plane.line_size, 1)


class _SeekFailed(Exception):
    """The container cannot seek (a WebM without cues that FFmpeg cannot scan, a damaged index)."""


class _Decoder:
    """Decodes one video stream, within the decoded-pixel budget."""

    def __init__(self, container: av.container.InputContainer, stream: av.video.VideoStream) -> None:
        self.container = container
        self.stream = stream
        name = _ALPHA_DECODERS.get(stream.codec_context.name)
        self.codec: VideoCodecContext = (
            cast(VideoCodecContext, av.CodecContext.create(name, "r"))
            if name is not None
            else stream.codec_context
        )
        self.codec.thread_count = 1
        self.area = stream.codec_context.width * stream.codec_context.height
        self.budget = MAX_DECODED_PIXELS

    def frames(self) -> Iterator[av.VideoFrame]:
        """Decoded frames from where the container stands to the end of the file."""
        for packet in self.container.demux(self.stream):
            for frame in self.codec.decode(packet):
                self.budget -= max(self.area, frame.width * frame.height)
                if self.budget < 0:
                    raise TooLarge("reaching the picked frames decodes too many pixels")
                yield frame

    def at(self, pts: int) -> av.VideoFrame:
        """The first frame presented at or after ``pts`` (the last one of the file, at worst)."""
        try:
            self.container.seek(pts, stream=self.stream, backward=True, any_frame=False)
        except av.FFmpegError:
            raise _SeekFailed from None
        self.codec.flush_buffers()
        last: av.VideoFrame | None = None
        for frame in self.frames():
            if frame.pts is not None and frame.pts >= pts:
                return frame
            last = frame
        if last is None:
            raise Unreadable("the video has no decodable frame")
        return last

    def in_one_pass(self, targets: list[int]) -> list[av.VideoFrame]:
        """For each of the sorted ``targets``, the first frame at or after it, decoding from the start."""
        found: list[av.VideoFrame] = []
        last: av.VideoFrame | None = None
        for frame in self.frames():
            while len(found) < len(targets) and frame.pts is not None and frame.pts >= targets[len(found)]:
                found.append(frame)
            last = frame
        if last is None:
            raise Unreadable("the video has no decodable frame")
        return found + [last] * (len(targets) - len(found))


def _opened(data: bytes) -> tuple[av.container.InputContainer, av.video.VideoStream]:
    container = av.open(io.BytesIO(data), mode="r")
    if not container.streams.video:
        container.close()
        raise Unreadable("the file has no video stream")
    return container, container.streams.video[0]


def pick(data: bytes, picks: int) -> tuple[list[Picked], int]:
    """``(picked frames, frames in the file)`` of an MP4/WebM file."""
    with _decoding():
        container, stream = _opened(data)
        with container:
            width, height = stream.codec_context.width, stream.codec_context.height
            if width * height > MAX_PIXELS:
                raise TooLarge(f"the video has {width}×{height} pixels; the limit is {MAX_PIXELS}")
            times: list[int] = []
            for packet in container.demux(stream):
                if packet.pts is not None and packet.size:
                    times.append(packet.pts)
                    if len(times) > MAX_DEMUXED_FRAMES:
                        raise TooLarge(f"the video has more than {MAX_DEMUXED_FRAMES} frames")
            if not times:
                raise Unreadable("the video has no frames")
            times.sort()
            base = stream.time_base or Fraction(1, 1000)
            targets = [times[index] for index in frame_indices(len(times), picks)]
            try:
                decoder = _Decoder(container, stream)
                frames = [decoder.at(target) for target in targets]
            except _SeekFailed:
                frames = []
        if not frames:  # could not seek: decode once from the start, on a fresh container
            container, stream = _opened(data)
            with container:
                frames = _Decoder(container, stream).in_one_pass(targets)
        picked = []
        for target, frame in zip(targets, frames, strict=True):
            shown = frame.pts if frame.pts is not None else target
            picked.append(Picked(_image(frame), round((shown - times[0]) * base * 1000)))
    return picked, len(times)
