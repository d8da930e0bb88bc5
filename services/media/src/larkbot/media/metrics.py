"""Every metric of the media workers, defined once."""

from __future__ import annotations

from prometheus_client import Counter

JOBS = Counter(
    "larkbot_media_jobs_total", "Media jobs handled, by transform and outcome", ["transform", "outcome"]
)
