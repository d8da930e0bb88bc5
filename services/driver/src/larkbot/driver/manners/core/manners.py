"""The gate of a chat's manners, decided before the probe, and the guidance the probe and the primary
are given in their late-binding message (never in the cached prefix).

The gate is deterministic, like the bot-to-bot brake: it is computed from the rendered context and the
clock, and its outcome is one of

- ``wake``: any input may wake the bot;
- ``direct_only``: only a direct address may (quiet hours with ``allow: direct``, or a share of voice one
  more message would take above the hard limit);
- ``suppressed``: nothing may (quiet hours with ``allow: none``).

A wake-up the gate does not admit ends before the probe (no model call); its input is marked processed,
so the bot does not come back to it when the hours end or its share drops. A direct address is new input
that mentions the bot or replies to it, a runtime event (the bot's own background task reporting), or
any message of a direct chat. Quiet hours are checked first: they name the reason when both apply. A direct
chat has no share of voice: half of a one-to-one conversation is the bot's by nature.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from larkbot.canonical.context import Segment
from larkbot.driver.wake.core.context import is_external

from .quiet import QuietHours, in_quiet_hours
from .share import Share, VoiceLimits, share_of_voice

TalkLevel = Literal["reserved", "normal", "chatty"]
GateOutcome = Literal["wake", "direct_only", "suppressed"]
HeldReason = Literal["share_of_voice", "quiet_hours"]

#: What each talk level adds to the guidance (its share-of-voice limits are the configuration's
#: defaults, ``larkbot.runtime.config.TALK_LEVELS``). ``normal`` adds nothing: the probe's rules are
#: written for it.
TALK_GUIDANCE: Final[Mapping[TalkLevel, str | None]] = {
    "reserved": (
        "Talk level in this chat: reserved. Speak when you are addressed or clearly needed; otherwise "
        "prefer a reaction or silence."
    ),
    "normal": None,
    "chatty": (
        "Talk level in this chat: chatty. You may join the conversation when you have something to "
        "add, without being asked; still leave room for the others."
    ),
}


@dataclass(frozen=True, slots=True)
class Manners:
    """A chat's manners as the wake-up uses them."""

    talk_level: TalkLevel = "normal"
    #: ``None``: the chat has no share-of-voice limits (``share_of_voice: null``).
    voice: VoiceLimits | None = None
    quiet: QuietHours | None = None
    #: A direct (one-to-one) chat: every message in it is a direct address.
    direct_chat: bool = False


@dataclass(frozen=True, slots=True)
class Assessment:
    share: Share
    quiet: bool
    outcome: GateOutcome
    #: Why the outcome is not ``wake``.
    reason: HeldReason | None
    #: Whether the new input holds a direct address.
    addressed: bool

    @property
    def held(self) -> HeldReason | None:
        """Why the wake-up ends before the probe; ``None``: it goes on."""
        if self.outcome == "suppressed" or (self.outcome == "direct_only" and not self.addressed):
            return self.reason
        return None


def decide(share: Share, quiet: bool, manners: Manners) -> tuple[GateOutcome, HeldReason | None]:
    if quiet and manners.quiet is not None:
        return ("suppressed" if manners.quiet.allow == "none" else "direct_only"), "quiet_hours"
    voice = manners.voice
    if voice is not None and not manners.direct_chat and share.over(voice.hard_share, adding=1):
        return "direct_only", "share_of_voice"
    return "wake", None


def addressed(
    segments: tuple[Segment, ...], since_ms: int, manners: Manners, blocked: frozenset[str] = frozenset()
) -> bool:
    new = [s for s in segments if is_external(s, blocked) and s.received_at_ms > since_ms]
    if manners.direct_chat:
        return bool(new)
    return any(s.mentions_me or s.replies_to_me or s.node_type == "runtime" for s in new)


def assess(
    segments: tuple[Segment, ...],
    *,
    since_ms: int,
    now_ms: int,
    utc_offset_min: int,
    manners: Manners,
    blocked: frozenset[str] = frozenset(),
) -> Assessment:
    share = share_of_voice(segments, now_ms, manners.voice or VoiceLimits())
    quiet = manners.quiet is not None and in_quiet_hours(manners.quiet, now_ms, utc_offset_min)
    outcome, reason = decide(share, quiet, manners)
    return Assessment(share, quiet, outcome, reason, addressed(segments, since_ms, manners, blocked))


def guidance(assessment: Assessment, manners: Manners) -> tuple[str, ...]:
    """Lines for the late-binding message: the talk level's, quiet hours while they last, and the share
    of voice once it reaches the soft limit."""
    lines: list[str] = []
    level = TALK_GUIDANCE[manners.talk_level]
    if level is not None:
        lines.append(level)
    if assessment.quiet and manners.quiet is not None:
        lines.append(
            f"Quiet hours in this chat ({manners.quiet.label()} local time): answer only what is "
            "addressed to you, and briefly."
        )
    share, voice = assessment.share, manners.voice
    if voice is None or manners.direct_chat or not share.reaches(voice.soft_share):
        return tuple(lines)
    lines.append(
        f"Your share of this chat's recent messages: {share.own} of the last {share.window_messages} "
        f"(soft limit {voice.soft_share:.0%}, hard limit {voice.hard_share:.0%}). Let the others carry "
        "the conversation: answer what is addressed to you; otherwise prefer a reaction or silence."
    )
    if assessment.reason == "share_of_voice":
        lines.append("Over the hard limit, only direct addresses wake you until your share drops.")
    return tuple(lines)


__all__ = [
    "TALK_GUIDANCE",
    "Assessment",
    "GateOutcome",
    "HeldReason",
    "Manners",
    "TalkLevel",
    "addressed",
    "assess",
    "decide",
    "guidance",
]
