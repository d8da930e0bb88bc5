"""An event whose ``(platform, chat_id, dedup_key)`` is already stored: a redelivery, or a conflict.

The unique key makes the first copy the record either way. What the second copy is decides whether it
may pass without a word:

- ``duplicate`` — the same event delivered again (a platform re-push, a crash replay, a redelivery after a
  hand-over). Copies of one event differ only in what is captured per delivery or filled in later, which
  :func:`fingerprint` leaves out: ``received_at_ms``, ``utc_offset_min`` and ``event_id`` (captured by the
  ingress that took the delivery), the names in every :class:`Sender` (snapshots: the contact name may
  arrive between two deliveries; identity is the id), and an attachment's ``content_hash`` /
  ``thumbnail_key`` (the pipeline writes them into the stored copy once a media worker saw the bytes).
- ``self_echo`` — the platform's copy of the bot's own message meeting the synthetic self-sent copy the
  ingress published after the send (either order): both carry the platform's final message id, so they
  share the key by design (``MessageEvent``); the first stays the record.
- ``conflict`` — anything else: the key names a different event. The platforms reuse ids only in the ways
  the dedup keys already encode — an edit is keyed by message id, edit date and a digest of its state
  (two edits in one second are two keys), a Telegram group upgraded to a supergroup continues under a new
  chat id, so its message ids never meet the old group's keys. A conflict is logged, counted and
  dead-lettered by the caller, never dropped in silence.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final, Literal

from larkbot.canonical.events import CanonicalEvent, MessageEvent

Repeat = Literal["duplicate", "self_echo", "conflict"]

#: Captured per delivery by the ingress that took it.
_PER_DELIVERY: Final = ("received_at_ms", "utc_offset_min", "event_id")
#: Snapshot fields of a sender (``Sender.id`` and ``is_bot`` stay).
_SENDER_SNAPSHOT: Final = ("display_name", "username")
#: Filled into the stored copy by the pipeline from media results.
_MEDIA_FILLED: Final = ("content_hash", "thumbnail_key")


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        keys = set(value)
        drop: tuple[str, ...] = ()
        if {"id", "display_name", "is_bot"} <= keys:
            drop = _SENDER_SNAPSHOT
        elif {"type", "file_id"} <= keys:
            drop = _MEDIA_FILLED
        return {k: _strip(v) for k, v in value.items() if k not in drop}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def fingerprint(event: CanonicalEvent) -> str:
    """A digest of what the event says, the same for every delivery of it."""
    data = event.model_dump(mode="json", exclude=set(_PER_DELIVERY))
    canonical = json.dumps(_strip(data), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def classify(stored: CanonicalEvent, incoming: CanonicalEvent) -> Repeat:
    """What ``incoming`` is, given the event ``stored`` under the same key."""
    if fingerprint(stored) == fingerprint(incoming):
        return "duplicate"
    if (
        isinstance(stored, MessageEvent)
        and isinstance(incoming, MessageEvent)
        and stored.message_id == incoming.message_id
        and stored.sender.id == incoming.sender.id
        and stored.is_self_sent != incoming.is_self_sent
    ):
        return "self_echo"
    return "conflict"
