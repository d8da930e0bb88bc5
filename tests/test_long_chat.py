"""``long_chat`` of ``larkbot bench``: a group that talks for weeks through the real pipeline and driver, with
a model whose window is 16k tokens. The short replay runs in ``make test``; the full 20,000 messages are a
``slow`` test (``make test-all``) and the benchmark."""

from __future__ import annotations

from typing import Any

import pytest

from larkbot.runtime.bus import Bus
from larkbot.testkit.bench.longchat import QUICK_MESSAGES, SMALL_MESSAGES, measure


def _check(figures: dict[str, Any], messages: int, key: str = "long_chat") -> dict[str, Any]:
    long_chat = figures[key]
    assert long_chat["messages"] == messages
    assert long_chat["over_window"] == 0  # no request the model had to refuse
    assert long_chat["largest_request_tokens"] + 1024 <= long_chat["window_tokens"]
    assert long_chat["latched"] == 0  # never silent because of size
    assert long_chat["trimmed"] == 0  # compaction kept up; nothing had to be cut
    assert long_chat["last_answer"]
    assert long_chat["answers"] == long_chat["requests"]["primary"] - long_chat["primary_extra_steps"]
    assert long_chat["breaks"] == 0  # compaction boundaries are the only breaks
    assert long_chat["compactions"] == long_chat["requests"]["compaction"]
    # Every compaction a primary request followed shows there as a new summary (a compaction after the
    # replay's last primary request has none to show in).
    trailing = long_chat["compactions_after_last_primary"]
    assert trailing <= 1
    assert long_chat["compaction_boundaries"] + trailing == long_chat["compactions"]
    return long_chat


async def test_a_short_long_chat_compacts_and_keeps_answering(bus: Bus, nats_url: str) -> None:
    figures = await measure(nats_url, quick=True)
    long_chat = _check(figures, QUICK_MESSAGES)
    assert long_chat["compactions"] >= 3
    # Issue 23: an 8,000-token model compacted about once per answer (a fixed 3,000-token summary and
    # 1,000-token reserve left the history a sliver of the window): 159 compactions for 177 answers,
    # a provider-side cached share of 0.80. Shared by proportion, a compaction leaves room for turns.
    small = _check(figures, QUICK_MESSAGES, "long_chat_small")
    assert small["compactions"] >= 3
    assert small["compactions_per_answer"] <= 0.35
    assert small["provider_cached_share"] >= 0.82


@pytest.mark.slow
async def test_twenty_thousand_messages_in_a_16k_window(bus: Bus, nats_url: str) -> None:
    figures = await measure(nats_url, quick=False)
    _check(figures, SMALL_MESSAGES, "long_chat_small")
    long_chat = _check(figures, 20_000)
    assert long_chat["compactions"] >= 50
    assert long_chat["ratio_between_compactions"] >= 0.95
