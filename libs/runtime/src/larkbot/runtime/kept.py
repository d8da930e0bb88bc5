"""What the bootstrap keeps of an operator's changes to an existing stream (pure, but for its log line and
metric): more replicas than configured, tighter limits, their discard policy (``bootstrap``'s table)."""

from __future__ import annotations

import logging
from dataclasses import replace

from nats.js.api import StreamConfig

from . import metrics

__all__ = ["differs", "kept_from"]

log = logging.getLogger("larkbot.runtime.bootstrap")


def _limit(value: float | int | None) -> float:
    """A limit as a number where larger is looser (unset, ``0`` or ``-1`` is no limit)."""
    return float("inf") if value is None or value <= 0 else float(value)


def kept_from(existing: StreamConfig, wanted: StreamConfig, asset: str) -> StreamConfig:
    """``wanted`` with what an operator set kept: more replicas, tighter limits, their discard policy."""
    kept: dict[str, object] = {}
    if (existing.num_replicas or 1) > (wanted.num_replicas or 1):
        kept["num_replicas"] = existing.num_replicas
    for field in ("max_age", "max_bytes"):
        have, want = getattr(existing, field), getattr(wanted, field)
        if _limit(have) < _limit(want):
            kept[field] = have
    if existing.discard is not None and existing.discard != wanted.discard:
        kept["discard"] = existing.discard
    for setting, value in kept.items():
        log.warning(
            "bootstrap keeps %s of %s at %s (the configuration says %s)",
            setting,
            asset,
            value,
            getattr(wanted, setting),
        )
        metrics.BOOTSTRAP_KEPT.labels(asset, setting).inc()
    return replace(wanted, **kept)  # type: ignore[arg-type]  # fields of StreamConfig, by name


_COMPARED = (
    "subjects",
    "retention",
    "max_age",
    "max_bytes",
    "discard",
    "num_replicas",
    "duplicate_window",
    "max_msg_size",
    "subject_transform",
)


def differs(existing: StreamConfig, wanted: StreamConfig) -> bool:
    return any(_normal(getattr(existing, f)) != _normal(getattr(wanted, f)) for f in _COMPARED)


def _normal(value: object) -> object:
    # The server answers lists where we send them, and ``0``/``None``/``-1`` for "no limit".
    if isinstance(value, list):
        return tuple(value)
    if value in (None, 0, -1):
        return None
    return value
