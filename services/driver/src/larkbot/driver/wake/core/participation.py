"""Participation signals for the late-binding prompts, computed from the unfiltered rendered context, and
the bot-to-bot brake.

``consecutive_bot_exchanges`` counts the bot-authored messages (the bot's own or another bot's) at the end
of the context since the last human message; it is zero unless another bot is in that streak, so the bot
talking to itself after a human is not an "exchange".

The brake is deterministic, not a prompt rule: when everything new comes from other bots and the streak
has reached ``cap`` messages (two rounds by default), the wake-up ends before the probe. A model that keeps
answering a bot cannot make two bots loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from larkbot.canonical.context import Segment

from .context import is_external

TEN_MINUTES_MS = 600_000


@dataclass(frozen=True, slots=True)
class Participation:
    recent_self_messages_10m: int
    seconds_since_last_self_message: int | None
    consecutive_bot_exchanges: int


def _is_message(s: Segment) -> bool:
    return s.node_type == "message" and not s.is_deleted


def participation(segments: tuple[Segment, ...], now_ms: int) -> Participation:
    own = [s for s in segments if _is_message(s) and s.is_myself]
    recent = sum(1 for s in own if s.received_at_ms >= now_ms - TEN_MINUTES_MS)
    since = max(0, (now_ms - own[-1].received_at_ms) // 1000) if own else None
    streak = 0
    other_bot = False
    for s in reversed(segments):
        if not _is_message(s):
            continue
        if not (s.is_myself or s.is_bot):
            break
        streak += 1
        other_bot = other_bot or (s.is_bot and not s.is_myself)
    return Participation(recent, since, streak if other_bot else 0)


def bot_loop_brake(
    segments: tuple[Segment, ...], since_ms: int, now_ms: int, cap: int, blocked: frozenset[str] = frozenset()
) -> bool:
    """True when the new input (``blocked`` senders' aside) is bot-only and the bot-to-bot streak has
    reached ``cap``."""
    new = [s for s in segments if is_external(s, blocked) and s.received_at_ms > since_ms]
    if not new or any(not s.is_bot for s in new):
        return False
    return participation(segments, now_ms).consecutive_bot_exchanges >= cap
