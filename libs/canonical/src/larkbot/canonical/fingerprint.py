"""What an event says, apart from how it was delivered: the fingerprint that tells a redelivery from a
different event under the same dedup key.

Copies of one event differ only in what is captured per delivery or filled in later, which the fingerprint
leaves out: ``received_at_ms``, ``utc_offset_min`` and ``event_id`` (captured by the ingress process that
took the delivery), the names in every :class:`~.events.Sender` (snapshots: a contact name may arrive
between two deliveries; identity is the id), an attachment's ``content_hash`` / ``thumbnail_key``
(written into the stored copy once a media worker saw the bytes) and a custom emoji's ``pack`` / ``alt_key``
(written once a media worker described it). Everything else — content, sender id,
reply target, attachments, times of the platform — is what the event says.

``event_msg_id`` is the ``Nats-Msg-Id`` an ingress publishes with: ``<platform>:<dedup_key>#<16 hex
digits of the fingerprint>``. A redelivery carries the same id, so JetStream's duplicate window and the
ingress's dedup records absorb it; an event that reuses a dedup key with other content carries another,
so it reaches the pipeline, which keeps the first copy as the record and reports the conflict instead of
it vanishing as a "duplicate".
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

from .events import CanonicalEvent
from .names import msg_id

__all__ = ["PER_DELIVERY", "event_fingerprint", "event_msg_id"]

#: Captured per delivery by the ingress that took it.
PER_DELIVERY: Final = frozenset({"received_at_ms", "utc_offset_min", "event_id"})
_SENDER_SNAPSHOT: Final = ("display_name", "username")
_MEDIA_FILLED: Final = ("content_hash", "thumbnail_key")
_EMOJI_FILLED: Final = ("pack", "alt_key")


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        keys = value.keys()
        drop: tuple[str, ...] = ()
        if {"id", "display_name", "is_bot"} <= keys:
            drop = _SENDER_SNAPSHOT
        elif {"type", "file_id"} <= keys:
            drop = _MEDIA_FILLED
        elif value.get("kind") == "custom_emoji":
            drop = _EMOJI_FILLED
        return {k: _strip(v) for k, v in value.items() if k not in drop}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def event_fingerprint(event: CanonicalEvent) -> str:
    """SHA-256 (hex) of what the event says; the same for every delivery of it."""
    data = event.model_dump(mode="json", exclude=set(PER_DELIVERY))
    canonical = json.dumps(_strip(data), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def event_msg_id(event: CanonicalEvent) -> str:
    """The ``Nats-Msg-Id`` of an event an ingress publishes."""
    return f"{msg_id(event.platform.value, event.dedup_key)}#{event_fingerprint(event)[:16]}"
