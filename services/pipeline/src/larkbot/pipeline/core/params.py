"""What rendering depends on besides the IC: per-chat settings, identity and the frozen deployment offset."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from larkbot.canonical.names import Platform


@dataclass(frozen=True, slots=True)
class RenderParams:
    """Render settings of one chat. ``bot_user_id`` is the bot's own id on the platform (``None`` until the
    ingress has published it; self-sent messages are recognised regardless). ``deployment_utc_offset_min``
    is frozen at process start; ``chat_utc_offset_min`` (when set) overrides the per-event offset captured
    at ingress for this chat's timestamps."""

    platform: Platform
    chat_id: str
    bot_user_id: str | None = None
    bot_username: str | None = None
    maintainers: frozenset[str] = frozenset()
    contact_names: Mapping[str, str] = field(default_factory=dict)
    blocked_users: frozenset[str] = frozenset()
    alias_message_ids: bool = False
    deployment_utc_offset_min: int = 0
    chat_utc_offset_min: int | None = None
    chat_title: str | None = None

    def name_of(self, user_id: str, display_name: str | None) -> str:
        """Contact-name override, else the snapshot name, else the id itself."""
        override = self.contact_names.get(user_id)
        if override:
            return override
        return display_name or user_id
