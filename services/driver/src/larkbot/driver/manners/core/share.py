"""The bot's share of voice in a chat, computed from the rendered context (the segments the driver holds),
so it is the same on every replica and after a restart.

The share counts the bot's messages among the chat's last ``window_messages`` messages that were received
within ``window_ms`` before now, and divides by ``window_messages`` — not by how many messages were found.
A quiet chat's few messages therefore never make a large share: after "ask, answer" the bot holds 1 of 20,
not 1 of 2. In a busy chat the window is full and the share is the plain fraction of the last N messages.
Deleted messages count for nobody; events and runtime output are not messages.
"""

from __future__ import annotations

from dataclasses import dataclass

from larkbot.canonical.context import Segment


@dataclass(frozen=True, slots=True)
class VoiceLimits:
    window_messages: int = 20
    window_ms: int = 900_000
    #: At this share the probe (and the primary) are told.
    soft_share: float = 0.20
    #: A wake-up that is not a direct address is held when one more message would exceed this share.
    hard_share: float = 0.30


@dataclass(frozen=True, slots=True)
class Share:
    own: int
    counted: int
    window_messages: int

    @property
    def value(self) -> float:
        return self.own / self.window_messages

    def over(self, share: float, *, adding: int = 0) -> bool:
        """Whether the share (with ``adding`` more of the bot's messages) is above ``share``."""
        return self._compare(share, adding) > 0

    def reaches(self, share: float) -> bool:
        return self._compare(share, 0) >= 0

    def _compare(self, share: float, adding: int) -> int:
        # In basis points, integers on purpose: 6 of 20 is exactly 0.30, never above it by rounding.
        mine, limit = (self.own + adding) * 10_000, round(share * 10_000) * self.window_messages
        return (mine > limit) - (mine < limit)


def share_of_voice(segments: tuple[Segment, ...], now_ms: int, limits: VoiceLimits) -> Share:
    since = now_ms - limits.window_ms
    recent = [
        s for s in segments if s.node_type == "message" and not s.is_deleted and s.received_at_ms >= since
    ][-limits.window_messages :]
    return Share(sum(1 for s in recent if s.is_myself), len(recent), limits.window_messages)


__all__ = ["Share", "VoiceLimits", "share_of_voice"]
