"""What one wake-up asks of the rate limits, and when it is held (docs/driver.md "Rate limits").

What is counted:

- for a **person** (platform + user id), the wake-ups their messages trigger: every member who wrote
  new input of a wake-up counts one hit for it, however many messages the debounce gathered (a burst is
  one wake-up, one probe), whether or not the bot then answers — each cost a probe call. The hit's time
  is the member's newest message in the input, so a retried wake-up counts nobody twice;
- for the **chat**, the bot's primary turns: a wake-up is checked before its probe and counted when its
  primary turn starts (a probe that decides to stay silent costs the chat nothing). The hit's time is
  the end of the wake-up's input.

When a wake-up is held: once the chat's window is full or in its cooldown, or when every member whose
input it carries is limited. A limited member's messages stay in the context (the pipeline renders them
as always): another member's message still wakes the bot, which then sees them, and the probe and the
primary are told, in their late-binding message, which of the members who wrote since the bot last acted
are limited and until when (``peek``: looked at, never counted).

A wake-up whose input holds a maintainer's message or a runtime event (the bot's own background task
reporting) is never held and counts no person: maintainers bypass the limits, and the bot's own work is
not a member's demand. A continuation of an open chain and a retry carrying its activation were admitted
when they started.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final, Literal

from larkbot.canonical.context import Segment
from larkbot.driver.wake.core.context import is_external

from .window import Limit, Verdict

Scope = Literal["person", "chat"]
SCOPES: Final[tuple[Scope, ...]] = ("person", "chat")
#: ``check``: judged, not counted (a full window starts its cooldown); ``admit``: judged and counted
#: when admitted; ``record``: counted; ``peek``: judged, nothing written (is someone limited now?).
Mode = Literal["check", "admit", "record", "peek"]
#: Members, besides the wake-up's own, whose limits the probe is told of: the latest writers since the
#: bot last acted (what the probe judges), at most this many (each costs a read of the store).
PEEKED_MAX: Final = 8


@dataclass(frozen=True, slots=True)
class RateLimits:
    """A chat's rate limits as the wake-up uses them (``None``: that part is off)."""

    person: Limit | None = None
    chat: Limit | None = None

    @property
    def on(self) -> bool:
        return self.person is not None or self.chat is not None


@dataclass(frozen=True, slots=True)
class RateAsk:
    scope: Scope
    #: The record's key in the store (:func:`key`).
    key: str
    #: The person's user id or the chat's id: logged and told to the model, never part of the key.
    subject: str
    limit: Limit
    hit_ms: int
    mode: Mode


def key(scope: Scope, platform: str, subject: str) -> str:
    """The store key of a person's or a chat's record: a digest, so that any id fits the bus's key
    alphabet and no user id appears in the bucket's subjects."""
    digest = hashlib.sha256(f"{platform}:{subject}".encode()).hexdigest()[:40]
    return f"{scope}.{digest}"


@dataclass(frozen=True, slots=True)
class Triggers:
    """Who the new input of a wake-up came from."""

    #: Each member with new input and the time of their newest message in it, first writer first.
    persons: tuple[tuple[str, int], ...]
    #: A maintainer's message or a runtime event is part of the input: the wake-up is not limited.
    bypass: bool


def triggers(
    segments: tuple[Segment, ...], since_ms: int, maintainers: frozenset[str], blocked: frozenset[str]
) -> Triggers:
    newest: dict[str, int] = {}
    bypass = False
    for s in segments:
        if s.received_at_ms <= since_ms or not is_external(s, blocked):
            continue
        if s.node_type == "runtime" or s.sender_id is None or s.sender_id in maintainers:
            bypass = True
            continue
        newest[s.sender_id] = max(newest.get(s.sender_id, s.received_at_ms), s.received_at_ms)
    return Triggers(tuple(newest.items()), bypass)


def person_asks(platform: str, found: Triggers, limit: Limit) -> tuple[RateAsk, ...]:
    return tuple(
        RateAsk("person", key("person", platform, sender), sender, limit, at, "admit")
        for sender, at in found.persons
    )


def peek_asks(
    platform: str,
    segments: tuple[Segment, ...],
    found: Triggers,
    *,
    since_ms: int,
    now_ms: int,
    limit: Limit,
    maintainers: frozenset[str],
    blocked: frozenset[str],
) -> tuple[RateAsk, ...]:
    """Looks at the latest members (at most :data:`PEEKED_MAX`) who wrote after ``since_ms`` (the bot's
    last action) and are not among the wake-up's own."""
    own = {sender for sender, _at in found.persons}
    others: list[str] = []
    for s in reversed(segments):
        if len(others) == PEEKED_MAX or s.received_at_ms <= since_ms:
            break
        sender = s.sender_id
        if (
            s.node_type == "message"
            and sender is not None
            and is_external(s, blocked)
            and sender not in maintainers
            and sender not in own
            and sender not in others
        ):
            others.append(sender)
    return tuple(RateAsk("person", key("person", platform, o), o, limit, now_ms, "peek") for o in others)


def chat_ask(platform: str, chat_id: str, limit: Limit, hit_ms: int, mode: Mode) -> RateAsk:
    return RateAsk("chat", key("chat", platform, chat_id), chat_id, limit, hit_ms, mode)


def limited_line(refused: tuple[tuple[str, Verdict], ...], utc_offset_min: int) -> str | None:
    """The late-binding line naming the members whose messages no longer wake the bot (``None``: none)."""
    named = [
        f"uid {subject}" + (f" (until {_clock(v.until_ms, utc_offset_min)})" if v.until_ms else "")
        for subject, v in refused
        if not v.admitted
    ]
    if not named:
        return None
    return (
        f"Rate limit: the messages of {', '.join(named)} no longer wake you (they woke you too often); "
        "they stay in the chat log. Answer the others; take theirs up only when someone else does."
    )


def _clock(at_ms: int, utc_offset_min: int) -> str:
    minute = (at_ms // 60_000 + utc_offset_min) % (24 * 60)
    return f"{minute // 60:02d}:{minute % 60:02d}"


__all__ = [
    "PEEKED_MAX",
    "SCOPES",
    "Mode",
    "RateAsk",
    "RateLimits",
    "Scope",
    "Triggers",
    "chat_ask",
    "key",
    "limited_line",
    "peek_asks",
    "person_asks",
    "triggers",
]
