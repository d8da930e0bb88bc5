"""Configuration: interpolation, per-chat merge, validation errors naming the key path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from larkbot.canonical.errors import ConfigError
from larkbot.runtime.config import TALK_LEVELS, ChatSettings, load_config, parse_config

ENDPOINT = {"format": "openai-chat", "base_url": "https://api.openai.com/v1", "model": "gpt-5"}
BASE = {
    "feishu": {"app_id": "cli_a1b2", "app_secret": "${FEISHU_SECRET}"},
    "maintainers": ["ou_maint"],
    "chats": {
        "default": {"initial_delay_ms": 800, "contact_names": {"ou_a": "Alice"}, "persona_files": ["p.md"]},
        "feishu:oc_team": {"initial_delay_ms": 0, "contact_names": {"ou_b": "Bob"}},
        "telegram:-1001": {},
    },
}


def test_env_interpolation_and_chat_defaults_deep_merge() -> None:
    config = parse_config(BASE, {"FEISHU_SECRET": "s3cr3t-value"})
    assert config.feishu is not None
    assert config.feishu.app_secret.get_secret_value() == "s3cr3t-value"
    team = config.chat("feishu", "oc_team")
    assert team is not None
    assert team.initial_delay_ms == 0
    assert team.contact_names == {"ou_a": "Alice", "ou_b": "Bob"}  # mappings merge, not replace
    assert team.persona_files == ("p.md",)
    tg = config.chat("telegram", "-1001")
    assert tg is not None
    assert tg.initial_delay_ms == 800
    assert config.chat("feishu", "oc_other") is None
    assert config.chat_ids("feishu") == frozenset({"oc_team"})
    assert config.maintainers == ("ou_maint",)
    assert "s3cr3t-value" in config.secret_values()


def test_env_fallback_syntax() -> None:
    config = parse_config({"nats": {"url": "${NATS_URL:-nats://127.0.0.1:4222}"}}, {})
    assert config.nats.url == "nats://127.0.0.1:4222"
    config = parse_config({"nats": {"url": "${NATS_URL:-nats://x:1}"}}, {"NATS_URL": "nats://y:2"})
    assert config.nats.url == "nats://y:2"


@pytest.mark.parametrize(
    ("raw", "env", "path"),
    [
        (BASE, {}, "feishu.app_secret"),  # missing env var
        ({"chats": {"default": {"initial_delay_ms": -5}}}, {}, "chats.default.initial_delay_ms"),
        ({"chats": {"feishu:oc_1": {"probe_timeout_s": "soon"}}}, {}, "chats.feishu:oc_1.probe_timeout_s"),
        ({"chats": {"oc_1": {}}}, {}, "chats"),
        (
            {"chats": {"default": {"transient_retry_delays_s": [5, 0]}}},
            {},
            "chats.default.transient_retry_delays_s.1",
        ),
        (
            {"chats": {"default": {"transient_retry_delays_s": [1, 2, 3, 4, 5, 6]}}},
            {},
            "chats.default.transient_retry_delays_s",
        ),
        ({"chats": {"default": {"bot_exchange_cap": 0}}}, {}, "chats.default.bot_exchange_cap"),
        ({"chats": {"default": {"action_attempts": 11}}}, {}, "chats.default.action_attempts"),
        (
            {"chats": {"default": {"probe_summary_max_est_tokens": -1}}},
            {},
            "chats.default.probe_summary_max_est_tokens",
        ),
        ({"services": {"pipeline": {"http_port": 70000}}}, {}, "services.pipeline.http_port"),
        (
            {"services": {"pipeline": {"resident_budget_mb": 0}}},
            {},
            "services.pipeline.resident_budget_mb",
        ),
        ({"services": {"driver": {"resident_budget_mb": 64}}}, {}, "services.driver.resident_budget_mb"),
        ({"services": {"media": {"max_frames": 6}}}, {}, "services.media.max_frames"),
        ({"services": {"pipeline": {"max_frames": 3}}}, {}, "services.pipeline.max_frames"),
        ({"nats": {"urls": "nats://x"}}, {}, "nats.urls"),  # unknown key: never silently ignored
        (
            {"llm": {"endpoints": {"main": {"format": "gpt", "base_url": "u", "model": "m"}}}},
            {},
            "llm.endpoints.main.format",
        ),
        (
            {"llm": {"endpoints": {"main": {**ENDPOINT, "accepts": {"temperature": "sometimes"}}}}},
            {},
            "llm.endpoints.main.accepts.temperature",
        ),
        (
            {"llm": {"endpoints": {"main": {**ENDPOINT, "accepts": {"max_tokens_field": "max_output"}}}}},
            {},
            "llm.endpoints.main.accepts.max_tokens_field",
        ),
        (
            {"llm": {"endpoints": {"main": {**ENDPOINT, "accepts": {"top_p": False}}}}},
            {},
            "llm.endpoints.main.accepts.top_p",
        ),
        (
            {
                "llm": {
                    "endpoints": {
                        "main": {
                            **ENDPOINT,
                            "format": "responses",
                            "accepts": {"max_tokens_field": "max_tokens"},
                        }
                    }
                }
            },
            {},
            "llm.endpoints.main",
        ),
    ],
)
def test_bad_config_names_the_key_path(raw: dict[str, object], env: dict[str, str], path: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(raw, env)
    assert info.value.path == path
    assert path in str(info.value)


def test_load_config_from_file_and_errors(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("maintainers: [ou_x]\nchats:\n  default: {}\n  'feishu:oc_1': {}\n", encoding="utf-8")
    assert load_config(good, {}).chat_ids("feishu") == frozenset({"oc_1"})
    broken = tmp_path / "broken.yaml"
    broken.write_text("chats: [unclosed\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid YAML at line"):
        load_config(broken, {})
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.yaml", {})
    # No LARKBOT_CONFIG and no ./config.yaml: the built-in defaults.
    assert load_config(None, {}).chats == {}


def test_secret_never_in_config_error_message() -> None:
    raw = {"telegram": {"bot_token": "123456:SECRET-TOKEN-VALUE", "mode": "carrier-pigeon"}}
    with pytest.raises(ConfigError) as info:
        parse_config(raw, {})
    assert "SECRET-TOKEN-VALUE" not in str(info.value)
    assert info.value.path == "telegram.mode"


def test_the_prompt_cache_key_salt_is_a_masked_secret_and_empty_means_unset() -> None:
    salt = "9f8e7d6c5b4a39281706f5e4d3c2b1a0"
    raw = {"llm": {"prompt_cache_key_salt": "${LLM_PROMPT_CACHE_KEY_SALT:-}"}}
    config = parse_config(raw, {"LLM_PROMPT_CACHE_KEY_SALT": salt})
    assert config.llm.prompt_cache_key_salt is not None
    assert config.llm.prompt_cache_key_salt.get_secret_value() == salt
    assert salt in config.secret_values()  # masked in logs like every other secret
    assert salt not in repr(config)
    assert salt not in config.model_dump_json()
    assert parse_config(raw, {}).llm.prompt_cache_key_salt is None
    with pytest.raises(ConfigError) as info:
        parse_config({"llm": {"prompt_cache_key_salt": "short-salt"}}, {})
    assert info.value.path == "llm.prompt_cache_key_salt"
    assert "short-salt" not in str(info.value)


def test_endpoint_accepts_resolve_per_family_and_configuration() -> None:
    raw = {
        "llm": {
            "endpoints": {
                "reasoning": ENDPOINT,
                "local": {
                    "format": "openai-chat",
                    "base_url": "http://127.0.0.1:11434/v1",
                    "model": "qwen3:8b",
                },
                "claude": {
                    "format": "anthropic-messages",
                    "base_url": "https://api.anthropic.com/v1",
                    "model": "claude-sonnet-4-5",
                    "extra_body": {"thinking": {"type": "enabled", "budget_tokens": 2048}},
                    "accepts": {"forced_tool_choice": True},
                },
            }
        }
    }
    endpoints = parse_config(raw, {}).llm.endpoints
    reasoning = endpoints["reasoning"].resolved_accepts()
    assert (reasoning.max_tokens_field, reasoning.temperature) == ("max_completion_tokens", False)
    local = endpoints["local"].resolved_accepts()
    assert (local.max_tokens_field, local.temperature, local.forced_tool_choice) == ("max_tokens", True, True)
    claude = endpoints["claude"].resolved_accepts()
    assert (claude.temperature, claude.forced_tool_choice) == (False, True)  # configured beats the family


@pytest.mark.parametrize("name", ["example.yaml", "local.yaml"])
def test_shipped_configuration_files_stay_valid(name: str) -> None:
    path = Path(__file__).parents[3] / "config" / name
    config = load_config(path, {})
    for endpoint in config.llm.endpoints.values():
        endpoint.resolved_accepts()


def test_operations_endpoints_listen_on_loopback_unless_configured() -> None:
    from larkbot.canonical.names import SERVICE_PORTS

    config = parse_config({"services": {"media": {"http_host": "0.0.0.0", "http_port": 9999}}}, {})
    for service, port in SERVICE_PORTS.items():
        settings = config.services.for_service(service.value)
        if service.value == "media":
            assert (settings.http_host, config.services.http_port("media")) == ("0.0.0.0", 9999)
        else:
            assert (settings.http_host, config.services.http_port(service.value)) == ("127.0.0.1", port)


def test_services_are_configured_under_the_names_the_docs_use() -> None:
    from larkbot.canonical.names import Service

    hyphenated = {s.value: {"http_port": 9200 + i, "log_level": "DEBUG"} for i, s in enumerate(Service)}
    config = parse_config({"services": hyphenated}, {})
    for i, service in enumerate(Service):
        assert config.services.http_port(service.value) == 9200 + i
        assert config.services.for_service(service.value).log_level == "DEBUG"
    # The field's spelling keeps working.
    legacy = parse_config({"services": {"ingress_feishu": {"http_port": 9300}}}, {})
    assert legacy.services.http_port("ingress-feishu") == 9300


@pytest.mark.parametrize(
    ("services", "path", "message"),
    [
        ({"ingress-feishu": {}, "ingress_feishu": {}}, "services.ingress-feishu", "given twice"),
        ({"llm-gateway": {"http_port": "x"}}, "services.llm-gateway.http_port", "integer"),
        ({"ingress-feishu": {"port": 1}}, "services.ingress-feishu.port", "Extra inputs"),
        ({"ingres-feishu": {}}, "services.ingres-feishu", "Extra inputs"),
    ],
)
def test_a_bad_services_key_is_named_as_written(services: dict[str, object], path: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"services": services}, {})
    assert info.value.path == path
    assert message in info.value.message


@pytest.mark.parametrize(
    ("chats", "path"),
    [
        ({"default": {"direct_with": "ou_a"}, "feishu:oc_1": {}}, "chats.default.direct_with"),
        ({"telegram:-1001234": {"direct_with": "42"}}, "chats.telegram:-1001234.direct_with"),
        ({"telegram:42": {"direct_with": "43"}}, "chats.telegram:42.direct_with"),
    ],
)
def test_direct_with_names_the_person_of_one_direct_chat(chats: dict[str, object], path: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"chats": chats}, {})
    assert info.value.path == path
    ok = parse_config(
        {"chats": {"telegram:42": {"direct_with": "42"}, "feishu:oc_1": {"direct_with": "ou_a"}}}, {}
    )
    assert [c.direct_with for k, c in ok.chats.items() if k != "default"] == ["42", "ou_a"]


def test_maintainer_and_blocked_ids_are_trimmed() -> None:
    config = parse_config(
        {"maintainers": [" ou_m ", "123"], "chats": {"feishu:oc_x": {"blocked_users": ["\tou_spam\n"]}}}, {}
    )
    assert config.maintainers == ("ou_m", "123")
    chat = config.chat("feishu", "oc_x")
    assert chat is not None
    assert chat.blocked_users == ("ou_spam",)


@pytest.mark.parametrize(
    ("raw", "problems"),
    [
        ({"maintainers": ["ou_a", "  "]}, [("maintainers.1", "a user id must not be empty")]),
        ({"maintainers": ["ou_a", "ou_b", " ou_a"]}, [("maintainers.2", "duplicates the id at index 0")]),
        (
            {"chats": {"telegram:-100": {"blocked_users": ["42", "", "42"]}}},
            [
                ("chats.telegram:-100.blocked_users.1", "a user id must not be empty"),
            ],
        ),
        (
            {"chats": {"telegram:-100": {"blocked_users": ["42", "7", "42 "]}}},
            [("chats.telegram:-100.blocked_users.2", "duplicates the id at index 0")],
        ),
        (
            {
                "maintainers": ["ou_m", "ou_n"],
                "chats": {
                    "feishu:oc_x": {"blocked_users": ["ou_spam", "ou_n"]},
                    "feishu:oc_y": {"blocked_users": ["ou_m"]},
                },
            },
            [
                ("chats.feishu:oc_x.blocked_users.1", "a maintainer cannot be a blocked user"),
                ("chats.feishu:oc_y.blocked_users.0", "a maintainer cannot be a blocked user"),
            ],
        ),
    ],
)
def test_maintainer_and_blocked_id_problems_name_their_keys(
    raw: dict[str, object], problems: list[tuple[str, str]]
) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(raw, {})
    assert list(info.value.problems) == problems


def test_the_package_exports_exactly_its_public_names() -> None:
    # Derived from the package's namespace, never a copied list: a name imported into
    # ``larkbot.runtime.config`` is public only through ``__all__``, and every name there resolves.
    import larkbot.runtime.config as config

    public = {name for name, value in vars(config).items() if not name.startswith("_")}
    assert sorted(config.__all__) == sorted(public)
    assert all(getattr(config, name) is not None for name in config.__all__)


@pytest.mark.parametrize(
    ("raw", "env", "key"),
    [
        (
            {"feishu": {"app_id": "cli_x", "app_secret": "${FEISHU_APP_SECRET}"}},
            {"FEISHU_APP_SECRET": ""},
            "feishu.app_secret",
        ),
        (
            {"telegram": {"bot_token": "${TELEGRAM_BOT_TOKEN}"}},
            {"TELEGRAM_BOT_TOKEN": " "},
            "telegram.bot_token",
        ),
        (
            {
                "llm": {
                    "endpoints": {
                        "main": {
                            "format": "openai-chat",
                            "base_url": "http://x",
                            "model": "m",
                            "api_key": "${LLM_API_KEY:-}",
                        }
                    }
                }
            },
            {},
            "llm.endpoints.main.api_key",
        ),
        ({"nats": {"token": "${NATS_TOKEN:-}"}}, {}, "nats.token"),
        ({"services": {"driver": {"database_url": ""}}}, {}, "services.driver.database_url"),
    ],
)
def test_an_empty_secret_is_refused_naming_its_key(
    raw: dict[str, Any], env: dict[str, str], key: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(raw, env)
    assert key in str(caught.value)
    assert "empty" in str(caught.value)


@pytest.mark.parametrize("purpose", ["probe", "primary", "compaction", "vision", "memory"])
def test_a_purpose_naming_no_endpoint_is_refused_naming_its_key(purpose: str) -> None:
    endpoint = {"format": "openai-chat", "base_url": "http://x", "model": "m"}
    with pytest.raises(ConfigError) as caught:
        parse_config({"llm": {"endpoints": {"main": endpoint}, purpose: "nope"}}, {})
    assert f"llm.{purpose}" in str(caught.value)
    assert "main" in str(caught.value)
    assert parse_config({"llm": {"endpoints": {"main": endpoint}, purpose: "main"}}, {})


@pytest.mark.parametrize(
    ("chats", "path"),
    [
        ({"default": {"talk_level": "loud"}}, "chats.default.talk_level"),
        ({"default": {"share_of_voice": {"soft_share": 0}}}, "chats.default.share_of_voice.soft_share"),
        (
            {"default": {"share_of_voice": {"window_messages": 1}}},
            "chats.default.share_of_voice.window_messages",
        ),
        ({"default": {"share_of_voice": {"every": 3}}}, "chats.default.share_of_voice.every"),
        # Soft above hard, the hard one from the level: refused once resolved.
        (
            {"default": {"talk_level": "chatty", "share_of_voice": {"hard_share": 0.25}}},
            "chats.default.share_of_voice",
        ),
        (
            {"default": {}, "feishu:oc_1": {"quiet_hours": {"start": "24:00", "end": "07:00"}}},
            "chats.feishu:oc_1.quiet_hours.start",
        ),
        ({"default": {"quiet_hours": {"start": "23:00", "end": "7:30"}}}, "chats.default.quiet_hours.end"),
        ({"default": {"quiet_hours": {"start": "07:00", "end": "07:00"}}}, "chats.default.quiet_hours"),
        (
            {"default": {"quiet_hours": {"start": "23:00", "end": "07:00", "allow": "some"}}},
            "chats.default.quiet_hours.allow",
        ),
        ({"default": {"quiet_hours": {"start": "23:00"}}}, "chats.default.quiet_hours.end"),
        (
            {"default": {"rate_limit": {"person": {"max_wakeups": 0, "window_s": 60}}}},
            "chats.default.rate_limit.person.max_wakeups",
        ),
        (
            {"default": {}, "telegram:-100": {"rate_limit": {"person": {"max_wakeups": 5}}}},
            "chats.telegram:-100.rate_limit.person.window_s",
        ),
        (
            {"default": {"rate_limit": {"person": {"max_wakeups": 5, "window_s": 90_000}}}},
            "chats.default.rate_limit.person.window_s",
        ),
        (
            {"default": {"rate_limit": {"chat": {"max_turns": 101, "window_s": 60}}}},
            "chats.default.rate_limit.chat.max_turns",
        ),
        (
            {"default": {"rate_limit": {"chat": {"max_turns": 5, "window_s": 60, "cooldown_s": -1}}}},
            "chats.default.rate_limit.chat.cooldown_s",
        ),
        ({"default": {"rate_limit": {"persons": {}}}}, "chats.default.rate_limit.persons"),
        (
            {"default": {"rate_limit": {"chat": {"max_turns": 3, "window_s": 60, "max_wakeups": 3}}}},
            "chats.default.rate_limit.chat.max_wakeups",
        ),
        ({"default": {"rate_limit": 10}}, "chats.default.rate_limit"),
    ],
)
def test_bad_manners_name_their_keys(chats: dict[str, object], path: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"chats": chats}, {})
    assert info.value.path == path


def test_the_talk_level_supplies_the_share_of_voice_limits_a_chat_does_not_give() -> None:
    config = parse_config(
        {
            "chats": {
                "default": {"talk_level": "reserved", "quiet_hours": {"start": "23:00", "end": "07:30"}},
                "feishu:oc_quiet": {},
                "feishu:oc_fun": {
                    "talk_level": "chatty",
                    "share_of_voice": {"hard_share": 0.5},
                    "quiet_hours": None,
                },
            }
        },
        {},
    )
    quiet, fun = config.chats["feishu:oc_quiet"], config.chats["feishu:oc_fun"]
    assert quiet.share_of_voice == TALK_LEVELS["reserved"]
    assert quiet.quiet_hours is not None
    assert (quiet.quiet_hours.start_min, quiet.quiet_hours.end_min, quiet.quiet_hours.allow) == (
        1380,
        450,
        "direct",
    )
    # The chat's own level (not the default's resolved limits), and its explicit value over the level's.
    chatty = TALK_LEVELS["chatty"]
    assert fun.share_of_voice == chatty.model_copy(update={"hard_share": 0.5})
    assert fun.quiet_hours is None
    # Manners are on by default: a chat that names neither a talk level nor limits has normal's.
    assert ChatSettings().share_of_voice == TALK_LEVELS["normal"]
    assert ChatSettings(talk_level="normal").share_of_voice == TALK_LEVELS["normal"]
    levels = [TALK_LEVELS[name] for name in ("reserved", "normal", "chatty")]
    assert [v.hard_share for v in levels] == sorted(v.hard_share for v in levels)


def test_share_of_voice_is_on_by_default_and_null_turns_it_off() -> None:
    config = parse_config(
        {
            "chats": {
                "feishu:oc_plain": {},
                "feishu:oc_free": {"share_of_voice": None},
                "feishu:oc_reserved": {"talk_level": "reserved"},
            }
        },
        {},
    )
    assert config.chats["feishu:oc_plain"].share_of_voice == TALK_LEVELS["normal"]
    assert config.chats["feishu:oc_free"].share_of_voice is None
    assert config.chats["feishu:oc_reserved"].share_of_voice == TALK_LEVELS["reserved"]
    # Off for every chat from chats.default; a chat's own limits still turn it on there.
    off = parse_config(
        {
            "chats": {
                "default": {"share_of_voice": None},
                "feishu:oc_plain": {},
                "feishu:oc_own": {
                    "share_of_voice": {
                        "window_messages": 20,
                        "window_s": 900,
                        "soft_share": 0.2,
                        "hard_share": 0.3,
                    }
                },
            }
        },
        {},
    )
    assert off.chats["feishu:oc_plain"].share_of_voice is None
    assert off.chats["feishu:oc_own"].share_of_voice == TALK_LEVELS["normal"]


def test_rate_limits_are_off_unless_configured_and_a_chat_may_turn_a_part_off() -> None:
    person = {"max_wakeups": 10, "window_s": 600, "cooldown_s": 600}
    config = parse_config(
        {
            "chats": {
                "default": {"rate_limit": {"person": person}},
                "feishu:oc_busy": {"rate_limit": {"chat": {"max_turns": 30, "window_s": 3600}}},
                "feishu:oc_free": {"rate_limit": {"person": None}},
            }
        },
        {},
    )
    busy, free = config.chats["feishu:oc_busy"].rate_limit, config.chats["feishu:oc_free"].rate_limit
    assert ChatSettings().rate_limit is None
    assert busy is not None
    assert busy.person is not None
    assert busy.chat is not None
    assert (busy.person.max_wakeups, busy.person.window_s, busy.person.cooldown_s) == (10, 600, 600)
    assert (busy.chat.max_turns, busy.chat.window_s, busy.chat.cooldown_s) == (30, 3600, 0)
    assert free is not None
    assert free.person is None
    assert free.chat is None


FEISHU = {"app_id": "cli_a1b2", "app_secret": "s3cr3t-value"}


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        (
            {"telegram": {"bot_token": "t0ken-1234", "budgets": {"messages_per_minute": -1}}},
            "telegram.budgets.messages_per_minute",
        ),
        (
            {"telegram": {"bot_token": "t0ken-1234", "budgets": {"per_minute": 20}}},
            "telegram.budgets.per_minute",
        ),
        (
            {"feishu": {**FEISHU, "budgets": {"api_calls_per_month": -5}}},
            "feishu.budgets.api_calls_per_month",
        ),
        (
            {"feishu": {**FEISHU, "budgets": {"messages_per_minute": "lots"}}},
            "feishu.budgets.messages_per_minute",
        ),
        # A day allowed more than its month could never be spent: refused at the day's key.
        (
            {"feishu": {**FEISHU, "budgets": {"api_calls_per_day": 500, "api_calls_per_month": 100}}},
            "feishu.budgets.api_calls_per_day",
        ),
        (
            {"chats": {"default": {}, "telegram:-1001": {"messages_per_minute": -2}}},
            "chats.telegram:-1001.messages_per_minute",
        ),
        ({"chats": {"default": {"messages_per_minute": 1.5}}}, "chats.default.messages_per_minute"),
    ],
)
def test_bad_budgets_name_their_keys(raw: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(raw, {})
    assert info.value.path == path


def test_budget_defaults_telegram_twenty_a_minute_feishu_unlimited() -> None:
    config = parse_config({"telegram": {"bot_token": "t0ken-1234"}, "feishu": FEISHU}, {})
    assert config.telegram is not None
    assert config.feishu is not None
    assert config.telegram.budgets.messages_per_minute == 20
    feishu = config.feishu.budgets
    assert (feishu.messages_per_minute, feishu.api_calls_per_day, feishu.api_calls_per_month) == (0, 0, 0)
    assert ChatSettings().messages_per_minute is None


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ({"chats": {"default": {"reminders": {"enabled": "sometimes"}}}}, "chats.default.reminders.enabled"),
        ({"chats": {"default": {"reminders": {"max_pending": 0}}}}, "chats.default.reminders.max_pending"),
        (
            {"chats": {"default": {}, "feishu:oc_1": {"reminders": {"max_pending_per_person": 0}}}},
            "chats.feishu:oc_1.reminders.max_pending_per_person",
        ),
        # A person's limit above the chat's, the chat's from chats.default: refused once merged.
        (
            {
                "chats": {
                    "default": {"reminders": {"max_pending": 3, "max_pending_per_person": 2}},
                    "feishu:oc_1": {"reminders": {"max_pending_per_person": 4}},
                }
            },
            "chats.feishu:oc_1.reminders",
        ),
        (
            {"chats": {"default": {"reminders": {"max_ahead_days": 0}}}},
            "chats.default.reminders.max_ahead_days",
        ),
        (
            {"chats": {"default": {"reminders": {"max_text_chars": 5}}}},
            "chats.default.reminders.max_text_chars",
        ),
        ({"chats": {"default": {"reminders": {"when": "later"}}}}, "chats.default.reminders.when"),
        ({"reminders": {"poll_interval_s": 0}}, "reminders.poll_interval_s"),
        ({"reminders": {"poll_interval_s": 120}}, "reminders.poll_interval_s"),
        ({"reminders": {"retention_days": -1}}, "reminders.retention_days"),
        ({"reminders": {"enabled": True}}, "reminders.enabled"),
    ],
)
def test_bad_reminder_settings_name_their_keys(raw: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(raw, {})
    assert info.value.path == path


def test_reminders_are_off_unless_a_chat_turns_them_on_and_merge_from_the_default() -> None:
    config = parse_config(
        {
            "chats": {
                "default": {"reminders": {"max_pending": 10}},
                "feishu:oc_on": {"reminders": {"enabled": True}},
                "feishu:oc_off": {},
            }
        },
        {},
    )
    on, off = config.chats["feishu:oc_on"].reminders, config.chats["feishu:oc_off"].reminders
    assert (on.enabled, on.max_pending, on.max_pending_per_person) == (True, 10, 5)
    assert (off.enabled, off.max_pending) == (False, 10)
    assert ChatSettings().reminders.enabled is False
    assert (config.reminders.poll_interval_s, config.reminders.retention_days) == (5.0, 30.0)
