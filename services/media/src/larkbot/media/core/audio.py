"""Speech for transcription: any audio (or a video's sound) to 16 kHz mono WAV, through PyAV. Pure.

Decisions:

- One output format for every source and every endpoint: 16-bit PCM WAV, mono, 16 kHz. Whisper-family
  models hear 16 kHz mono whatever they are sent (nothing the model uses is lost), every
  ``/audio/transcriptions`` server reads WAV (whisper.cpp's without FFmpeg reads nothing else), and the
  bytes are a pure function of the decoded audio (deterministic requests, cacheable by content). The
  price is size, 32 kB a second: OpenAI's 25 MB upload limit is ~13 min, beyond any sane voice note
  (the chat's ``max_duration_s`` is 5 min by default, 30 min at most).
- Telegram voice notes (OGG/Opus), audio files (MP3, M4A, FLAC, OGG…), Feishu audio (Opus) and the
  sound of video notes (AAC in MP4) all go through the same decode; whatever the FFmpeg inside PyAV
  decodes is accepted.
- Duration is bounded twice: the container's declared length is checked before decoding, and decoding
  stops as soon as the samples pass the limit (a header may lie). Longer audio is :class:`.TooLong`.
- One decoding thread per job, like video (the worker runs ``cores + 1`` jobs at once); anything FFmpeg
  refuses is :class:`.Unreadable` with the exception's type, never its text (it may quote the input).
"""

from __future__ import annotations

import io
import wave
from dataclasses import dataclass
from typing import Final

import av
import av.audio
import av.container

from .errors import TooLarge, TooLong, Unreadable

SAMPLE_RATE: Final = 16_000
WAV_MIME: Final = "audio/wav"
WAV_NAME: Final = "speech.wav"
_BYTES_PER_SAMPLE: Final = 2


@dataclass(frozen=True, slots=True)
class Speech:
    """The audio as sent for transcription, and how long it lasts."""

    wav: bytes
    duration_ms: int


def _declared_s(container: av.container.InputContainer, stream: av.audio.AudioStream) -> float | None:
    if stream.duration is not None and stream.time_base is not None:
        return float(stream.duration * stream.time_base)
    if container.duration is not None:
        return container.duration / av.time_base
    return None


def speech(data: bytes, max_duration_s: float) -> Speech:
    """The first audio stream of ``data`` as 16 kHz mono WAV; :class:`.TooLong` past ``max_duration_s``."""
    limit = int(max_duration_s * SAMPLE_RATE)
    pcm = bytearray()
    try:
        with av.open(io.BytesIO(data), mode="r") as container:
            if not container.streams.audio:
                raise Unreadable("the file has no audio stream")
            stream = container.streams.audio[0]
            declared = _declared_s(container, stream)
            if declared is not None and declared > max_duration_s:
                raise TooLong(f"the audio lasts {declared:.0f} s; the limit is {max_duration_s:g} s")
            stream.codec_context.thread_count = 1
            resampler = av.AudioResampler(format="s16", layout="mono", rate=SAMPLE_RATE)
            for frame in container.decode(stream):
                for out in resampler.resample(frame):
                    pcm += bytes(out.planes[0])[: out.samples * _BYTES_PER_SAMPLE]
                if len(pcm) > limit * _BYTES_PER_SAMPLE:
                    raise TooLong(f"the audio lasts longer than the limit of {max_duration_s:g} s")
            for out in resampler.resample(None):
                pcm += bytes(out.planes[0])[: out.samples * _BYTES_PER_SAMPLE]
    except (TooLarge, Unreadable):
        raise
    except Exception as exc:  # untrusted input: FFmpeg's messages may quote it
        raise Unreadable(f"not readable audio ({type(exc).__name__})") from None
    samples = len(pcm) // _BYTES_PER_SAMPLE
    if samples == 0:
        raise Unreadable("the audio has no decodable samples")
    if samples > limit:
        raise TooLong(f"the audio lasts longer than the limit of {max_duration_s:g} s")
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(_BYTES_PER_SAMPLE)
        writer.setframerate(SAMPLE_RATE)
        writer.writeframes(bytes(pcm))
    return Speech(buffer.getvalue(), round(samples * 1000 / SAMPLE_RATE))
