"""Every metric of the media workers, defined once (no chat or user ids as labels)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)

JOBS = Counter(
    "larkbot_media_jobs_total",
    "Media jobs answered, by transform and outcome (ok or the error code)",
    ["transform", "outcome"],
)
TRANSFORM_SECONDS = Histogram(
    "larkbot_media_transform_seconds",
    "Time from taking a job to publishing its result (download, decode, encode, vision)",
    ["transform"],
    buckets=_SECONDS,
)
JOBS_IN_FLIGHT = Gauge("larkbot_media_jobs_in_flight", "Jobs being worked on by this worker")
INPUT_BYTES = Counter(
    "larkbot_media_input_bytes_total", "Bytes of source media read, by transform", ["transform"]
)
OUTPUT_BYTES = Counter(
    "larkbot_media_output_bytes_total", "Bytes of outputs written to the object store", ["kind"]
)
DOWNLOADS = Counter(
    "larkbot_media_downloads_total", "Downloads asked of an ingress, by outcome", ["platform", "outcome"]
)
ALT_TEXT_CACHE = Counter(
    "larkbot_media_alt_text_cache_lookups_total", "Alt-text cache lookups, by result (hit, miss)", ["result"]
)
VISION_CALLS = Counter("larkbot_media_vision_calls_total", "Vision model calls, by outcome", ["outcome"])
VISION_SECONDS = Histogram(
    "larkbot_media_vision_seconds", "Round trip of one vision call through llm.generate", buckets=_SECONDS
)
READ_IMAGE = Counter(
    "larkbot_media_read_image_total",
    "media.read_image requests, by detail and outcome",
    ["detail", "outcome"],
)
EMOJI_RESOLUTIONS = Counter(
    "larkbot_media_custom_emoji_resolutions_total",
    "Custom emoji asked of an ingress (getCustomEmojiStickers), by outcome (ok, unknown, failed)",
    ["outcome"],
)
READ_FILE = Counter(
    "larkbot_media_read_file_total",
    "media.read_file requests, by the format read (kind; unknown when refused first) and outcome",
    ["kind", "outcome"],
)
READ_FILE_SECONDS = Histogram(
    "larkbot_media_read_file_seconds",
    "Time to answer one media.read_file request (download, extraction or cache)",
    buckets=_SECONDS,
)
EXTRACT_CACHE = Counter(
    "larkbot_media_file_extract_cache_lookups_total",
    "File extract cache lookups, by result (hit, miss)",
    ["result"],
)

TRANSCRIPT_CACHE = Counter(
    "larkbot_media_transcript_cache_lookups_total",
    "Transcript cache lookups, by result (hit, miss)",
    ["result"],
)
TRANSCRIPTIONS = Counter(
    "larkbot_media_transcriptions_total",
    "Speech-to-text calls through llm.transcribe, by outcome (ok, unavailable, bad_reply, failed)",
    ["outcome"],
)
TRANSCRIPTION_SECONDS = Histogram(
    "larkbot_media_transcription_seconds",
    "Round trip of one speech-to-text call through llm.transcribe",
    buckets=_SECONDS,
)
AUDIO_SECONDS = Counter(
    "larkbot_media_transcribed_audio_seconds_total", "Seconds of audio sent to be transcribed"
)
AUDIO_CONVERT_SECONDS = Histogram(
    "larkbot_media_audio_conversion_seconds",
    "Decoding a file's audio into the 16 kHz mono WAV sent for transcription",
    buckets=_SECONDS,
)

# Labelled counters start at 0, so that increase() sees their first event (FACTS: Prometheus).
for _result in ("hit", "miss"):
    TRANSCRIPT_CACHE.labels(_result)
    EXTRACT_CACHE.labels(_result)
for _outcome in ("ok", "unknown", "failed"):
    EMOJI_RESOLUTIONS.labels(_outcome)
for _outcome in ("ok", "unavailable", "bad_reply", "failed"):
    TRANSCRIPTIONS.labels(_outcome)
