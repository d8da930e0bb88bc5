"""Render parameters of a chat from the configuration, the bot's identity and the frozen deployment offset."""

from __future__ import annotations

from larkbot.canonical.aliases import aliases_enabled
from larkbot.canonical.events import BotIdentity
from larkbot.canonical.names import Platform
from larkbot.runtime.config import ChatSettings, LarkbotConfig

from .core import RenderParams


def render_params(
    config: LarkbotConfig,
    chat: ChatSettings,
    platform: Platform,
    chat_id: str,
    identity: BotIdentity | None,
    deployment_offset_min: int,
) -> RenderParams:
    """Aliases apply to Feishu only: its ``om_…`` ids are 34 characters, while Telegram's short numeric ids
    stay canonical so that message deep links keep working."""
    return RenderParams(
        platform=platform,
        chat_id=chat_id,
        bot_user_id=identity.bot_id if identity is not None else None,
        bot_username=identity.username if identity is not None else None,
        maintainers=frozenset(config.maintainers),
        contact_names=dict(chat.contact_names),
        blocked_users=frozenset(chat.blocked_users),
        alias_message_ids=aliases_enabled(platform, chat.alias_message_ids),
        deployment_utc_offset_min=deployment_offset_min,
        chat_utc_offset_min=chat.utc_offset_min,
        chat_title=chat.display_name,
    )
