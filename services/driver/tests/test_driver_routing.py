"""Model routing (``llm.routes``): the endpoint of each model call chosen per purpose and chat by the first
matching rule, else the purpose's own; a rule naming an endpoint that does not exist is refused by its key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY
from pydantic import ValidationError

from larkbot.driver.tools.core import tools
from larkbot.driver.wake.sizing import Sizing
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import LlmSettings
from larkbot.testkit.driver.harness import World, decide, world
from larkbot.testkit.driver.synthetic import response, tool_call

VIP, OTHER = "oc_vip_1", "oc_plain_1"


def _endpoint(window: int = 100_000) -> dict[str, Any]:
    return {
        "format": "openai-chat",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "m",
        "context_window_tokens": window,
    }


LLM: dict[str, Any] = {
    "endpoints": {"small": _endpoint(), "big": _endpoint(200_000), "cheap": _endpoint()},
    "probe": "small",
    "primary": "small",
    "routes": [
        {"chats": ["feishu:oc_vip_*"], "purpose": ["primary", "compaction"], "endpoint": "big"},
        {"platform": "telegram", "purpose": "probe", "endpoint": "cheap"},
        {"chats": ["feishu:oc_vip_*"], "endpoint": "cheap"},
    ],
}


def _routes(purpose: str, endpoint: str, by: str) -> float:
    labels = {"purpose": purpose, "endpoint": endpoint, "by": by}
    return REGISTRY.get_sample_value("larkbot_driver_llm_routes_total", labels) or 0.0


def test_the_first_matching_rule_chooses_and_the_purposes_own_endpoint_is_the_default() -> None:
    sizing = Sizing(LlmSettings.model_validate(LLM))
    assert sizing.routed("primary", "feishu", VIP) == "big"
    assert sizing.routed("compaction", "feishu", VIP) == "big"
    # The first rule does not name the probe; the third does, for the same chats.
    assert sizing.routed("probe", "feishu", VIP) == "cheap"
    assert sizing.routed("probe", "telegram", "-100123") == "cheap"
    assert sizing.routed("primary", "telegram", "-100123") == "small"
    assert sizing.routed("primary", "feishu", OTHER) == "small"
    # Compaction and memory follow the chat's primary (and compaction), routed or not.
    plain = Sizing(LlmSettings.model_validate({**LLM, "routes": [LLM["routes"][0] | {"purpose": "primary"}]}))
    assert plain.routed("compaction", "feishu", VIP) == "big"
    assert plain.routed("memory", "feishu", VIP) == "big"
    assert plain.routed("memory", "feishu", OTHER) == "small"
    before = _routes("primary", "big", "rule"), _routes("primary", "small", "default")
    assert sizing.endpoint("primary", "feishu", VIP) == "big"
    assert sizing.endpoint("primary", "feishu", OTHER) == "small"
    assert (_routes("primary", "big", "rule"), _routes("primary", "small", "default")) == (
        before[0] + 1,
        before[1] + 1,
    )


def test_a_rule_naming_no_endpoint_or_matching_everything_is_refused_by_its_key() -> None:
    wrong = {**LLM, "routes": [LLM["routes"][0], {"platform": "telegram", "endpoint": "huge"}]}
    with pytest.raises(ValidationError) as refused:
        LlmSettings.model_validate(wrong)
    (problem,) = refused.value.errors()
    assert problem["loc"] == ("routes", 1, "endpoint")
    assert "names no endpoint of llm.endpoints (big, cheap, small)" in problem["msg"]
    with pytest.raises(ValidationError) as everything:
        LlmSettings.model_validate({**LLM, "routes": [{"endpoint": "big"}]})
    assert everything.value.errors()[0]["loc"][:2] == ("routes", 0)
    with pytest.raises(ValidationError) as purpose:
        LlmSettings.model_validate({**LLM, "routes": [{"purpose": "chat", "endpoint": "big"}]})
    assert purpose.value.errors()[0]["loc"][:3] == ("routes", 0, "purpose")


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}"


async def _asked(w: World, n: int, at: int, chat_id: str) -> None:
    w.queue("probe", chat_id).append(decide("send_message", "asked directly"))
    w.queue("primary", chat_id).append(response(tool_call(tools.SEND, f"s{n}", text=f"answer {n}")))
    await w.say(n, at, chat_id=chat_id, mentions_me=True, text="@Lark which model?")
    await w.tick(at + 1000)


async def test_each_chats_requests_go_to_the_endpoints_its_rules_choose(
    bus: Bus, nats_url: str, db: str
) -> None:
    async with world(bus, nats_url, db, chats=(VIP, OTHER), llm=LLM) as w:
        await _asked(w, 1, 0, VIP)
        await _asked(w, 2, 3000, OTHER)
        vip = {r.purpose: r.endpoint for r in w.requests("primary", VIP) + w.requests("probe", VIP)}
        plain = {r.purpose: r.endpoint for r in w.requests("primary", OTHER) + w.requests("probe", OTHER)}
    assert vip == {"primary": "big", "probe": "cheap"}
    assert plain == {"primary": "small", "probe": "small"}


async def test_a_fallback_the_gateway_made_is_recorded_on_the_turn_response(
    bus: Bus, nats_url: str, db: str
) -> None:
    fell_back = response(tool_call(tools.SEND, "s1", text="answer")).model_copy(
        update={"fallback_from": ("small",), "endpoint": "big"}
    )
    async with world(bus, nats_url, db, chats=(OTHER,), llm=LLM) as w:
        w.queue("probe", OTHER).append(decide("send_message", "asked directly"))
        w.queue("primary", OTHER).append(fell_back)
        await w.say(1, 0, chat_id=OTHER, mentions_me=True, text="@Lark hello?")
        await w.tick(1000)
        turn = await w.driver.runner.repo.latest_turn("feishu", OTHER)
        # The answer of the fallback calibrates the fallback's endpoint, not the one asked.
        calibrated = set(w.driver.runner.sizing.calibrations)
    assert turn is not None
    assert turn.fallback_from == ("small",)
    # Nothing of this chat asks "big": only the answer saying it came from there can calibrate it.
    assert "big" in calibrated
