"""Each service's view of the configuration: only its own secrets are read, the others are withheld."""

from __future__ import annotations

from typing import Any

import pytest

from larkbot.canonical.errors import ConfigError
from larkbot.runtime.config import WITHHELD, parse_config

RAW: dict[str, Any] = {
    "nats": {"url": "nats://n:4222", "token": "${NATS_TOKEN}"},
    "services": {
        "pipeline": {"database_url": "${PIPELINE_DATABASE_URL}"},
        "driver": {"database_url": "${DRIVER_DATABASE_URL}"},
    },
    "feishu": {"app_id": "cli_x", "app_secret": "${FEISHU_APP_SECRET}"},
    "telegram": {"bot_token": "${TELEGRAM_BOT_TOKEN}"},
    "llm": {
        "endpoints": {
            "main": {
                "format": "openai-chat",
                "base_url": "https://x/v1",
                "model": "m",
                "api_key": "${LLM_API_KEY}",
            }
        },
        "primary": "main",
        "prompt_cache_key_salt": "${LLM_PROMPT_CACHE_KEY_SALT}",
    },
    "inspector": {"access_token": "${INSPECTOR_TOKEN}"},
}

ALL = {
    "NATS_TOKEN": "nats-token-123",
    "PIPELINE_DATABASE_URL": "postgresql+asyncpg://p:pw1@db/p",
    "DRIVER_DATABASE_URL": "postgresql+asyncpg://d:pw2@db/d",
    "FEISHU_APP_SECRET": "feishu-secret-123",
    "TELEGRAM_BOT_TOKEN": "123:telegram-token",
    "LLM_API_KEY": "sk-llm-key-123",
    "LLM_PROMPT_CACHE_KEY_SALT": "salt-0123456789abcdef",
    "INSPECTOR_TOKEN": "inspector-token-123456",
}

#: What each process receives, by the environment variables it is given.
OWN = {
    "media": {"NATS_TOKEN"},
    "bootstrap": {"NATS_TOKEN"},
    "pipeline": {"NATS_TOKEN", "PIPELINE_DATABASE_URL"},
    "driver": {"NATS_TOKEN", "DRIVER_DATABASE_URL"},
    "ingress-feishu": {"NATS_TOKEN", "FEISHU_APP_SECRET"},
    "ingress-telegram": {"NATS_TOKEN", "TELEGRAM_BOT_TOKEN"},
    "llm-gateway": {"NATS_TOKEN", "LLM_API_KEY", "LLM_PROMPT_CACHE_KEY_SALT"},
    "inspector": {"NATS_TOKEN", "DRIVER_DATABASE_URL", "INSPECTOR_TOKEN"},
}


@pytest.mark.parametrize("service", sorted(OWN))
def test_a_service_starts_with_only_its_own_secrets_in_its_environment(service: str) -> None:
    env = {name: ALL[name] for name in OWN[service]}
    config = parse_config(RAW, env, service=service)
    held = set(config.secret_values())
    assert held == {ALL[name] for name in OWN[service]}


@pytest.mark.parametrize("service", sorted(OWN))
def test_a_secret_in_the_environment_does_not_reach_a_service_that_does_not_own_it(service: str) -> None:
    config = parse_config(RAW, ALL, service=service)
    assert set(config.secret_values()) == {ALL[name] for name in OWN[service]}
    if service == "inspector":  # a view of every section
        assert config.feishu is not None
        assert config.feishu.app_secret.get_secret_value() == WITHHELD
    elif service != "ingress-feishu":
        assert config.feishu is None  # a section it does not read is not in its view


def test_its_own_secret_missing_or_empty_still_stops_a_service_naming_the_key() -> None:
    with pytest.raises(ConfigError) as missing:
        parse_config(RAW, {"NATS_TOKEN": "t"}, service="ingress-telegram")
    assert "telegram.bot_token" in str(missing.value)
    with pytest.raises(ConfigError) as empty:
        parse_config(RAW, {"NATS_TOKEN": "t", "TELEGRAM_BOT_TOKEN": ""}, service="ingress-telegram")
    assert "telegram.bot_token" in str(empty.value)


def test_the_whole_file_is_checked_without_a_service() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(RAW, {"NATS_TOKEN": "t"})
    assert "feishu.app_secret" in str(caught.value)
    assert parse_config(RAW, ALL).secret_values()


BROKEN_LLM = {**RAW, "llm": {**RAW["llm"], "primary": "nope"}}
BROKEN_TELEGRAM = {**RAW, "telegram": {**RAW["telegram"], "nonsense": 1}}


@pytest.mark.parametrize(
    ("raw", "key", "refused_by", "started_by"),
    [
        (BROKEN_LLM, "llm", ("driver", "llm-gateway", "media", "pipeline"), ("ingress-feishu", "bootstrap")),
        (BROKEN_TELEGRAM, "telegram.nonsense", ("ingress-telegram",), ("media", "ingress-feishu", "driver")),
    ],
)
def test_a_service_validates_only_the_sections_it_reads(
    raw: dict[str, Any], key: str, refused_by: tuple[str, ...], started_by: tuple[str, ...]
) -> None:
    for service in started_by:
        parse_config(raw, ALL, service=service)
    for service in refused_by:
        with pytest.raises(ConfigError) as caught:
            parse_config(raw, ALL, service=service)
        assert key in str(caught.value), service
    with pytest.raises(ConfigError) as whole:
        parse_config(raw, ALL)
    assert key in str(whole.value)


def test_a_section_it_does_not_read_asks_nothing_of_its_environment() -> None:
    raw = {**RAW, "feishu": {"app_id": "${FEISHU_APP_ID}", "app_secret": "${FEISHU_APP_SECRET}"}}
    assert parse_config(raw, {"NATS_TOKEN": "t"}, service="media").feishu is None
    with pytest.raises(ConfigError) as caught:
        parse_config(raw, {"NATS_TOKEN": "t", "FEISHU_APP_SECRET": "s"}, service="ingress-feishu")
    assert "feishu.app_id" in str(caught.value)


def test_a_misspelt_section_is_refused_by_every_service() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({**RAW, "telegarm": {}}, ALL, service="media")
    assert "telegarm" in str(caught.value)


def test_the_pipeline_reads_the_llm_routes_of_its_media_jobs_without_any_key() -> None:
    # Regression: the pipeline names a chat's vision and transcription endpoints on its media jobs from
    # llm.routes / llm.<purpose>; with the llm section withheld from it, every job named none.
    config = parse_config(RAW, ALL, service="pipeline")
    assert config.llm.endpoints
    assert config.llm.primary == RAW["llm"]["primary"]
    assert not any(
        endpoint.api_key is not None and endpoint.api_key.get_secret_value() != WITHHELD
        for endpoint in config.llm.endpoints.values()
    )
