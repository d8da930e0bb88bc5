"""Rendered timestamps (SPEC §3 "Timestamps"): ``MM-DD HH:MM:SS`` in chat-local time.

The year is never shown: adding it would rewrite a message's rendering once a year and break prompt
caching (the late-binding prompt carries the current year). A ``+HH:MM`` suffix appears only when the
event's offset differs from the deployment's offset frozen at start-up, so an ordinary deployment renders
no suffix at all.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

_EPOCH = datetime(1970, 1, 1)

#: Arrival later than this after the platform's timestamp renders ``received`` (late delivery).
LATE_DELIVERY_SEC = 120


def offset_suffix(offset_min: int) -> str:
    sign = "+" if offset_min >= 0 else "-"
    hours, minutes = divmod(abs(offset_min), 60)
    return f"{sign}{hours:02d}:{minutes:02d}"


def format_time(epoch_sec: float, offset_min: int, deployment_offset_min: int) -> str:
    """``epoch_sec`` shown at ``offset_min``; fractions of a second are floored."""
    local = _EPOCH + timedelta(seconds=math.floor(epoch_sec) + offset_min * 60)
    rendered = f"{local.month:02d}-{local.day:02d} {local.hour:02d}:{local.minute:02d}:{local.second:02d}"
    if offset_min != deployment_offset_min:
        rendered += offset_suffix(offset_min)
    return rendered


def is_late(received_at_ms: int, timestamp_sec: float) -> bool:
    """Delivered more than :data:`LATE_DELIVERY_SEC` after the platform's own timestamp."""
    return received_at_ms / 1000.0 - timestamp_sec > LATE_DELIVERY_SEC
