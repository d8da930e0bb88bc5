"""The one configuration file: loading, ``${ENV}`` interpolation, per-chat merge, validation.

``config.yaml`` (path from ``LARKBOT_CONFIG``) is validated at start-up; problems raise one
:class:`~larkbot.canonical.ConfigError` naming the file and every bad key by its dotted path, and the
process exits non-zero. There are no silent defaults for invalid values.

Interpolation: ``${NAME}`` is replaced by the environment variable (missing → error naming the key),
``${NAME:-fallback}`` falls back when unset or empty. Interpolation happens on string scalars only and
never re-expands its own output.

Chats: the keys of ``chats`` other than ``default`` are the residency whitelist, written
``<platform>:<chat_id>``; each is ``chats.default`` deep-merged with its own mapping.

One private module per section, imported from here only (the names below are the public API):
``_process`` (``nats``, ``services``), ``_platforms`` (``feishu``, ``telegram``, their ``budgets``),
``_llm``, ``_chats``, ``_media`` (a chat's ``media`` limits), ``_manners`` (a chat's ``talk_level``,
``share_of_voice``, ``quiet_hours``, ``rate_limit``), ``_reminders`` (a chat's ``reminders`` and the
deployment's), ``_files`` (a chat's ``files``), ``_driver`` (``memory``, ``shell``, ``audit``),
``_inspector``, ``_retry`` (``retry``), ``_jetstream`` (``jetstream``); ``_secrets`` says which service
receives which secret; ``_root`` is the whole file and the checks spanning sections, ``_loading`` reads
it.
"""

from ._base import UserIds
from ._chats import ChatSettings
from ._driver import AuditSettings, MemorySettings, ShellSettings
from ._files import ChatFilesSettings
from ._inspector import InspectorSettings, is_loopback
from ._jetstream import AssetSettings, JetStreamSettings
from ._llm import (
    PURPOSES,
    TRANSCRIPTION_FORMAT,
    LlmAccepts,
    LlmEndpoint,
    LlmPurpose,
    LlmRoute,
    LlmSettings,
    MaxTokensField,
    ResolvedAccepts,
    family_accepts,
)
from ._loading import DEFAULT_CONFIG_PATH, interpolate, load_config, parse_config
from ._manners import (
    RATE_MAX_COUNT,
    RATE_WINDOW_MAX_S,
    TALK_LEVELS,
    ChatRateLimit,
    PersonRateLimit,
    QuietAllow,
    QuietHoursSettings,
    RateLimitSettings,
    ShareOfVoiceSettings,
    TalkLevel,
)
from ._media import (
    MEDIA_MAX_BYTES,
    TRANSCRIPTION_MAX_DURATION_S,
    ChatMediaSettings,
    TranscriptionSettings,
)
from ._platforms import FeishuBudgets, FeishuSettings, TelegramBudgets, TelegramSettings
from ._process import (
    MediaServiceSettings,
    NatsSettings,
    PipelineServiceSettings,
    ServiceSettings,
    ServicesSettings,
)
from ._reminders import ChatRemindersSettings, RemindersSettings
from ._retry import BackoffSettings, RetrySettings
from ._root import LarkbotConfig, deep_merge
from ._secrets import WITHHELD

__all__ = [
    "DEFAULT_CONFIG_PATH",
    "MEDIA_MAX_BYTES",
    "PURPOSES",
    "RATE_MAX_COUNT",
    "RATE_WINDOW_MAX_S",
    "TALK_LEVELS",
    "TRANSCRIPTION_FORMAT",
    "TRANSCRIPTION_MAX_DURATION_S",
    "WITHHELD",
    "AssetSettings",
    "AuditSettings",
    "BackoffSettings",
    "ChatFilesSettings",
    "ChatMediaSettings",
    "ChatRateLimit",
    "ChatRemindersSettings",
    "ChatSettings",
    "FeishuBudgets",
    "FeishuSettings",
    "InspectorSettings",
    "JetStreamSettings",
    "LarkbotConfig",
    "LlmAccepts",
    "LlmEndpoint",
    "LlmPurpose",
    "LlmRoute",
    "LlmSettings",
    "MaxTokensField",
    "MediaServiceSettings",
    "MemorySettings",
    "NatsSettings",
    "PersonRateLimit",
    "PipelineServiceSettings",
    "QuietAllow",
    "QuietHoursSettings",
    "RateLimitSettings",
    "RemindersSettings",
    "ResolvedAccepts",
    "RetrySettings",
    "ServiceSettings",
    "ServicesSettings",
    "ShareOfVoiceSettings",
    "ShellSettings",
    "TalkLevel",
    "TelegramBudgets",
    "TelegramSettings",
    "TranscriptionSettings",
    "UserIds",
    "deep_merge",
    "family_accepts",
    "interpolate",
    "is_loopback",
    "load_config",
    "parse_config",
]
