"""A chat's manners read from its configuration (``talk_level``, ``share_of_voice``, ``quiet_hours``)."""

from __future__ import annotations

from larkbot.runtime.config import ChatSettings

from .core.manners import Manners
from .core.quiet import QuietHours
from .core.share import VoiceLimits


def manners_of(settings: ChatSettings, *, direct_chat: bool) -> Manners:
    voice = settings.share_of_voice
    quiet = settings.quiet_hours
    return Manners(
        talk_level=settings.talk_level,
        voice=None
        if voice is None
        else VoiceLimits(
            window_messages=voice.window_messages,
            window_ms=round(voice.window_s * 1000),
            soft_share=voice.soft_share,
            hard_share=voice.hard_share,
        ),
        quiet=None if quiet is None else QuietHours(quiet.start_min, quiet.end_min, quiet.allow),
        direct_chat=direct_chat,
    )


__all__ = ["manners_of"]
