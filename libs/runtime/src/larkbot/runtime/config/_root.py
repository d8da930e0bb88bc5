"""The whole file: every section, the per-chat merge and the checks that span sections."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator

from larkbot.canonical.names import Platform

from ._base import UserIds, _problems, _Section
from ._chats import ChatSettings
from ._driver import AuditSettings, MemorySettings, ShellSettings
from ._inspector import InspectorSettings
from ._jetstream import JetStreamSettings
from ._llm import LlmSettings
from ._platforms import FeishuSettings, TelegramSettings
from ._process import NatsSettings, ServicesSettings
from ._reminders import RemindersSettings
from ._retry import RetrySettings
from ._secrets import WITHHELD


class LarkbotConfig(_Section):
    nats: NatsSettings = NatsSettings()
    jetstream: JetStreamSettings = JetStreamSettings()
    data_dir: str = "data"
    utc_offset_min: int | None = Field(default=None, ge=-840, le=840)
    services: ServicesSettings = ServicesSettings()
    maintainers: UserIds = ()
    feishu: FeishuSettings | None = None
    telegram: TelegramSettings | None = None
    llm: LlmSettings = LlmSettings()
    memory: MemorySettings = MemorySettings()
    shell: ShellSettings = ShellSettings()
    audit: AuditSettings = AuditSettings()
    reminders: RemindersSettings = RemindersSettings()
    inspector: InspectorSettings = InspectorSettings()
    retry: RetrySettings = RetrySettings()
    #: Dry run for every chat (``ChatSettings.dry_run``).
    dry_run: bool = False
    chats: dict[str, ChatSettings] = Field(default_factory=dict)

    @field_validator("chats", mode="before")
    @classmethod
    def _merge_defaults(cls, value: Any) -> Any:
        if not isinstance(value, Mapping):
            return value
        default = value.get("default") or {}
        if not isinstance(default, Mapping):
            return value  # let validation name chats.default
        merged: dict[str, Any] = {"default": default}
        for key, chat in value.items():
            if key == "default":
                continue
            merged[key] = deep_merge(default, chat) if isinstance(chat, Mapping) else chat
        return merged

    @field_validator("chats")
    @classmethod
    def _chat_keys(cls, value: dict[str, ChatSettings]) -> dict[str, ChatSettings]:
        platforms = {p.value for p in Platform}
        for key in value:
            if key == "default":
                continue
            platform, sep, chat_id = key.partition(":")
            if not sep or platform not in platforms or not chat_id:
                raise ValueError(
                    f"chat key {key!r} must be '<platform>:<chat_id>' with platform in {sorted(platforms)}"
                )
        return value

    @model_validator(mode="after")
    def _maintainers_not_blocked(self) -> LarkbotConfig:
        # Maintainer status opens the shell tools; a blocked sender must never hold it.
        maintainers = frozenset(self.maintainers)
        found: list[tuple[tuple[str | int, ...], str, Any]] = [
            (("chats", key, "blocked_users", index), "a maintainer cannot be a blocked user", user_id)
            for key, chat in self.chats.items()
            for index, user_id in enumerate(chat.blocked_users)
            if user_id in maintainers
        ]
        if found:
            raise _problems("maintainers", found)
        return self

    @model_validator(mode="after")
    def _direct_chats(self) -> LarkbotConfig:
        # ``direct_with`` opens a person's private memories to a chat: it names one direct chat's person.
        # In chats.default it would open them to every chat; on Telegram a private chat's id is its
        # person's user id, so any other value names a group (or someone else).
        default = self.chats.get("default")
        if default is not None and default.direct_with is not None:
            where = ("chats", "default", "direct_with")
            msg = "names the person of one direct chat: set it on that chat, not in chats.default"
            raise _problems("chats", [(where, msg, None)])
        found: list[tuple[tuple[str | int, ...], str, Any]] = []
        for key, chat in self.chats.items():
            platform, _, chat_id = key.partition(":")
            if platform != Platform.TELEGRAM.value or chat.direct_with in (None, chat_id):
                continue
            if chat_id.isdigit():
                msg = f"a Telegram private chat's id is its person's user id: {chat_id}, or leave it unset"
            else:
                msg = "a Telegram group (negative id) is never a direct chat: leave it unset"
            found.append((("chats", key, "direct_with"), msg, None))
        if found:
            raise _problems("chats", found)
        return self

    def chat(self, platform: str, chat_id: str) -> ChatSettings | None:
        """Settings of a configured chat, or ``None`` when the chat is not on the whitelist."""
        return self.chats.get(f"{platform}:{chat_id}")

    def chat_ids(self, platform: str) -> frozenset[str]:
        prefix = f"{platform}:"
        return frozenset(k[len(prefix) :] for k in self.chats if k.startswith(prefix))

    def secret_values(self) -> list[str]:
        """Every secret value in the configuration, for log masking."""
        found: list[str] = []
        _collect_secrets(self, found)
        return [s for s in found if s and s != WITHHELD]


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _collect_secrets(value: Any, out: list[str]) -> None:
    if isinstance(value, SecretStr):
        out.append(value.get_secret_value())
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            _collect_secrets(getattr(value, name), out)
    elif isinstance(value, Mapping):
        for v in value.values():
            _collect_secrets(v, out)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _collect_secrets(v, out)
