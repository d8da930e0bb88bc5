"""Render parameters of a chat from the configuration, the bot's identity and the frozen deployment offset;
a chat's media policy (the settings its media jobs carry)."""

from __future__ import annotations

from collections.abc import Mapping

from larkbot.canonical.aliases import aliases_enabled
from larkbot.canonical.events import BotIdentity
from larkbot.canonical.names import Platform
from larkbot.runtime.config import ChatSettings, LarkbotConfig

from .core import RenderParams
from .core.admission import NO_POLICY, MediaPolicy


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


class ChatParams:
    """The render parameters of a configured chat (``None`` for any other), read with the bot's current
    identity per platform (``identities``, kept up to date by the identity watch)."""

    def __init__(
        self, config: LarkbotConfig, identities: Mapping[Platform, BotIdentity], deployment_offset_min: int
    ) -> None:
        self.config = config
        self.identities = identities
        self.deployment_offset_min = deployment_offset_min

    def __call__(self, platform: Platform, chat_id: str) -> RenderParams | None:
        chat = self.config.chat(platform.value, chat_id)
        if chat is None:
            return None
        identity = self.identities.get(platform)
        return render_params(self.config, chat, platform, chat_id, identity, self.deployment_offset_min)


def resident_keys(config: LarkbotConfig) -> list[tuple[str, str]]:
    """Every configured chat as ``(platform, chat_id)``, in a fixed order (platform, then id)."""
    return [
        (platform.value, chat_id)
        for platform in Platform
        for chat_id in sorted(config.chat_ids(platform.value))
    ]


def media_policy(config: LarkbotConfig, platform: str, chat_id: str) -> MediaPolicy:
    """``chats.<key>.media`` and the chat's routes for ``vision`` and ``transcription`` (``llm.routes``,
    else ``llm.<purpose>``; a vision job naming none uses the workers' ``llm.vision``). Transcripts are
    asked for only when the chat has them enabled and some transcription endpoint serves it."""
    chat = config.chat(platform, chat_id)
    if chat is None:
        return NO_POLICY
    media = chat.media
    llm = config.llm
    heard = media.transcription
    speech = (llm.route("transcription", platform, chat_id) or llm.transcription) if heard.enabled else None
    return MediaPolicy(
        vision_endpoint=llm.route("vision", platform, chat_id),
        transcription_endpoint=speech,
        max_frames=media.max_frames,
        max_bytes=media.max_bytes,
        language=heard.language,
        max_duration_s=heard.max_duration_s,
    )
