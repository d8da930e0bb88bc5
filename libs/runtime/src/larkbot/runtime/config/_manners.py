"""A chat's manners (``chats.<key>.talk_level``, ``share_of_voice``, ``quiet_hours``, ``rate_limit``;
docs/driver.md "Manners" and "Rate limits"): how much of a chat's conversation the bot may take, when it
keeps quiet, and how often one person, or the chat, may have it act.

The talk level supplies the share-of-voice limits a chat does not give; a value given explicitly (in
``chats.default`` or the chat's own mapping, deep-merged) overrides its level's. The limits are checked
once resolved, so a soft share above the hard one is refused whichever side set it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, Literal

from pydantic import Field, field_validator, model_validator

from ._base import _Section

TalkLevel = Literal["reserved", "normal", "chatty"]
QuietAllow = Literal["direct", "none"]

_TIME: Final = re.compile(r"([01]\d|2[0-3]):([0-5]\d)")


class ShareOfVoiceSettings(_Section):
    """The bot's messages among the chat's last ``window_messages`` messages received within
    ``window_s``, as a share of ``window_messages``. At ``soft_share`` the probe is told; a wake-up that
    is not a direct address is held when one more message would take the share above ``hard_share``."""

    window_messages: int = Field(ge=2, le=500)
    window_s: float = Field(gt=0)
    soft_share: float = Field(gt=0, le=1)
    hard_share: float = Field(gt=0, le=1)

    @model_validator(mode="after")
    def _soft_below_hard(self) -> ShareOfVoiceSettings:
        if self.soft_share > self.hard_share:
            raise ValueError(
                f"soft_share ({self.soft_share}) must be at most hard_share ({self.hard_share}); a value "
                "not given comes from the chat's talk_level"
            )
        return self


#: The share-of-voice limits of each talk level (docs/driver.md "Manners" gives the reasoning).
TALK_LEVELS: Final[Mapping[str, ShareOfVoiceSettings]] = {
    "reserved": ShareOfVoiceSettings(window_messages=20, window_s=1800, soft_share=0.10, hard_share=0.20),
    "normal": ShareOfVoiceSettings(window_messages=20, window_s=900, soft_share=0.20, hard_share=0.30),
    "chatty": ShareOfVoiceSettings(window_messages=20, window_s=600, soft_share=0.30, hard_share=0.45),
}


def _minute_of_day(value: str) -> int:
    found = _TIME.fullmatch(value)
    if found is None:
        raise ValueError(f"{value!r} is not a time of day written HH:MM (00:00 to 23:59)")
    return int(found[1]) * 60 + int(found[2])


class QuietHoursSettings(_Section):
    """Local times (the chat's ``utc_offset_min``, else the deployment's) from ``start`` up to ``end``,
    past midnight when ``end`` comes first. ``allow``: what still wakes the bot then — ``direct``
    addresses only, or ``none``."""

    start: str
    end: str
    allow: QuietAllow = "direct"

    @field_validator("start", "end")
    @classmethod
    def _time_of_day(cls, value: str) -> str:
        _minute_of_day(value)
        return value

    @model_validator(mode="after")
    def _not_empty(self) -> QuietHoursSettings:
        if self.start == self.end:
            raise ValueError("start and end are the same time: quiet hours would be empty")
        return self

    @property
    def start_min(self) -> int:
        return _minute_of_day(self.start)

    @property
    def end_min(self) -> int:
        return _minute_of_day(self.end)


#: The longest window and cooldown a rate limit may name, and the most wake-ups or turns it may allow
#: within a window: the driver's ``rate-limits`` bucket keeps a record for this long after its last
#: write (``larkbot.canonical.names``), and a record holds at most this many times.
RATE_WINDOW_MAX_S: Final = 86_400
RATE_MAX_COUNT: Final = 100


class PersonRateLimit(_Section):
    """The wake-ups one person (platform + user id) may trigger within ``window_s``; the one past
    ``max_wakeups`` starts a ``cooldown_s`` during which the person's messages wake nothing (0: none,
    a plain sliding window)."""

    max_wakeups: int = Field(ge=1, le=RATE_MAX_COUNT)
    window_s: float = Field(gt=0, le=RATE_WINDOW_MAX_S)
    cooldown_s: float = Field(default=0, ge=0, le=RATE_WINDOW_MAX_S)


class ChatRateLimit(_Section):
    """The primary turns the bot may take in a chat within ``window_s``; a wake-up that would take one
    more starts a ``cooldown_s`` during which no member's message wakes it (0: none)."""

    max_turns: int = Field(ge=1, le=RATE_MAX_COUNT)
    window_s: float = Field(gt=0, le=RATE_WINDOW_MAX_S)
    cooldown_s: float = Field(default=0, ge=0, le=RATE_WINDOW_MAX_S)


class RateLimitSettings(_Section):
    """A chat's rate limits (docs/driver.md "Rate limits"); each part is off unless given. Maintainers
    bypass both."""

    person: PersonRateLimit | None = None
    chat: ChatRateLimit | None = None


def with_level_defaults(chat: Any) -> Any:
    """A chat's raw settings with ``share_of_voice`` completed from its talk level, ``normal`` when none
    is given (an unknown level completes from ``normal`` and is refused under its own key).

    Every chat has limits unless it says ``share_of_voice: null``: a busy group must not become a
    dialogue with the bot because nobody thought to configure it."""
    if not isinstance(chat, Mapping):
        return chat
    voice = chat.get("share_of_voice", {})
    if not isinstance(voice, Mapping):
        return chat  # null turns the limits off; anything else is refused under its key
    level = chat.get("talk_level", "normal")
    defaults = TALK_LEVELS.get(level if isinstance(level, str) else "normal", TALK_LEVELS["normal"])
    return {**chat, "share_of_voice": {**defaults.model_dump(), **voice}}
