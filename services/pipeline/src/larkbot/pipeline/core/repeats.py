"""An event whose ``(platform, chat_id, dedup_key)`` is already stored: a redelivery, or a conflict.

The unique key makes the first copy the record either way. What the second copy is decides whether it
may pass without a word:

- ``duplicate`` — the same event delivered again (a platform re-push, a crash replay, a redelivery after a
  hand-over): the same :func:`~larkbot.canonical.fingerprint.event_fingerprint`, which leaves out what
  each delivery captures and what the pipeline fills in later.
- ``duplicate`` too — two deletions of the same messages: the ingress reports a deletion the bot made
  (``delete_message``, ``ban_spammer``) as a delete event, and Feishu then sends its own recall event of
  the same message under the same key, with another actor and time. Either copy means the same change.
- ``self_echo`` — the platform's copy of the bot's own message meeting the synthetic self-sent copy the
  ingress published after the send (either order): both carry the platform's final message id, so they
  share the key by design (``MessageEvent``); the first stays the record.
- ``conflict`` — anything else: the key names a different event. The platforms reuse ids only in the ways
  the dedup keys already encode — an edit is keyed by message id, edit date and a digest of its state
  (two edits in one second are two keys), a Telegram group upgraded to a supergroup is recorded under the
  group's id with the supergroup's message ids prefixed ``s``, so they never meet the group's keys. A
  conflict is logged, counted and dead-lettered by the caller, never dropped in silence.
"""

from __future__ import annotations

from typing import Literal

from larkbot.canonical.events import CanonicalEvent, DeleteEvent, MessageEvent
from larkbot.canonical.fingerprint import event_fingerprint

Repeat = Literal["duplicate", "self_echo", "conflict"]


def classify(stored: CanonicalEvent, incoming: CanonicalEvent) -> Repeat:
    """What ``incoming`` is, given the event ``stored`` under the same key."""
    if event_fingerprint(stored) == event_fingerprint(incoming):
        return "duplicate"
    if (
        isinstance(stored, DeleteEvent)
        and isinstance(incoming, DeleteEvent)
        and set(stored.message_ids) == set(incoming.message_ids)
    ):
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
