"""A chat's rate limits read from its configuration (``rate_limit.person``, ``rate_limit.chat``)."""

from __future__ import annotations

from larkbot.runtime.config import ChatSettings

from .core.rates import RateLimits
from .core.window import Limit


def rate_limits_of(settings: ChatSettings) -> RateLimits:
    configured = settings.rate_limit
    if configured is None:
        return RateLimits()
    person, chat = configured.person, configured.chat
    return RateLimits(
        person=None
        if person is None
        else Limit(person.max_wakeups, round(person.window_s * 1000), round(person.cooldown_s * 1000)),
        chat=None
        if chat is None
        else Limit(chat.max_turns, round(chat.window_s * 1000), round(chat.cooldown_s * 1000)),
    )


__all__ = ["rate_limits_of"]
