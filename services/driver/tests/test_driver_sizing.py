"""What the driver learns of a model's window from its refusals (issue 23: a model whose real window is
smaller than ``context_window_tokens``, or that has none configured, is learnt from its first refusal)."""

from __future__ import annotations

from larkbot.canonical.llm import LLMError
from larkbot.driver.wake.sizing import LEARNT_MARGIN, Sizing
from larkbot.runtime.config import ChatSettings, LlmSettings


def _sizing(window: int | None) -> Sizing:
    endpoint: dict[str, object] = {
        "format": "openai-chat",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "m",
        "default_max_output_tokens": 1000,
    }
    if window is not None:
        endpoint["context_window_tokens"] = window
    return Sizing(LlmSettings.model_validate({"endpoints": {"primary": endpoint}, "primary": "primary"}))


def _refusal(window: int | None = None, given: int | None = None) -> LLMError:
    return LLMError(
        request_id="r",
        category="context_length",
        message="too long",
        window_tokens=window,
        input_tokens=given,
    )


def test_the_window_a_refusal_states_replaces_a_larger_configured_one() -> None:
    sizing = _sizing(16_000)
    assert sizing.window("primary") == 15_000
    sizing.refused("primary", 10_000, _refusal(window=8_000, given=12_000))
    assert sizing.known_window("primary") == 8_000
    # The provider counted 1.2 of its tokens per estimated one: the room of 7,000 is 5,833 estimated.
    assert sizing.window("primary") == int(7_000 / 1.2)
    settings = ChatSettings()
    limits = sizing.limits(settings, "Lark", "feishu", "oc_1", ())
    assert limits.request_limit == sizing.window("primary")
    assert limits.trigger < limits.request_limit


def test_a_refusal_without_numbers_sets_the_window_below_the_refused_request() -> None:
    sizing = _sizing(None)
    assert sizing.window("primary") is None
    assert sizing.limits(ChatSettings(), "Lark", "feishu", "oc_1", ()).request_limit is None
    sizing.refused("primary", 10_000, _refusal())
    assert sizing.known_window("primary") == int(10_000 * (1 - LEARNT_MARGIN)) + 1000
    assert sizing.window("primary") == int(10_000 * (1 - LEARNT_MARGIN))
    # A second refusal, of a smaller request, shrinks it again; a larger one never widens it.
    sizing.refused("primary", 8_000, _refusal())
    smaller = sizing.known_window("primary")
    assert smaller == int(8_000 * (1 - LEARNT_MARGIN)) + 1000
    sizing.refused("primary", 9_000, _refusal())
    assert sizing.known_window("primary") == smaller
    sizing.refused("primary", 9_000, _refusal(window=50_000))
    assert sizing.known_window("primary") == smaller


def test_an_endpoint_the_driver_does_not_know_still_learns() -> None:
    sizing = _sizing(None)
    sizing.refused("elsewhere", 4_000, _refusal(window=3_000, given=4_400))
    assert sizing.known_window("elsewhere") == 3_000
    assert sizing.window("elsewhere") == int(3_000 / 1.1)
