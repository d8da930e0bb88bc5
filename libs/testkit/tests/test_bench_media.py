"""The benchmark runs end to end and reports the figures ``larkbot bench`` reads (small photos here)."""

from __future__ import annotations

from larkbot.testkit.bench.media import measure


async def test_measure_reports_thumbnail_frame_and_transcription_figures(nats_url: str) -> None:
    result = await measure(nats_url, True, photo_size=(800, 600))
    assert result["media_thumbnails_per_s"] > 0
    assert result["media"]["worker"]["jobs"] == 8
    assert result["media"]["photo"] == "800x600 JPEG"
    assert result["media"]["transform"]["thumbnails_per_s_one_thread"] > 0
    assert result["media_frames_per_s"] > 0
    frames = result["media"]["frames"]
    assert (frames["jobs"], frames["frames"]) == (6, 30)  # five distinct frames of each clip
    assert set(frames["transform"]) == {"mp4_ms", "webm_ms", "tgs_ms"}
    transcription = result["media"]["transcription"]
    assert result["transcription_overhead_ms"] == transcription["overhead_ms_p50"] > 0
    assert transcription["jobs"] == 4
    assert transcription["job_ms_p50"] > transcription["overhead_ms_p50"]
    assert transcription["conversion_ms"] > 0
