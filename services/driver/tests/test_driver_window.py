"""Probe window selection (SPEC §4.2): sticky start, half-budget jumps, pinned direct addresses."""

from __future__ import annotations

import pytest

from larkbot.canonical.context import Segment
from larkbot.driver.wake.core.estimate import segment_tokens
from larkbot.driver.wake.core.window import select_window
from larkbot.testkit.driver.synthetic import segment

T0 = 1_700_000_000_000


def _chat(n: int, **flags: dict[int, bool]) -> tuple[Segment, ...]:
    # Every segment has the same size, so budgets read as segment counts.
    return tuple(
        segment(
            i,
            at_ms=T0 + i * 1000,
            text="x" * (60 - len(str(i))),
            mentions_me=i in flags.get("mentions", {}),
        )
        for i in range(1, n + 1)
    )


SIZE = segment_tokens(segment(1, text="x" * 59))


def _ids(segments: tuple[Segment, ...]) -> list[int]:
    return [int(s.segment_id[3:]) for s in segments]


@pytest.mark.parametrize(
    ("n", "last_action_n", "budget_segments", "sticky_n", "expected_first"),
    [
        pytest.param(5, 0, 10, None, 1, id="everything-fits-half"),
        pytest.param(20, 18, 10, None, 16, id="jump-to-half-budget"),
        pytest.param(20, 18, 10, 13, 13, id="sticky-start-held-within-budget"),
        pytest.param(20, 18, 10, 10, 16, id="sticky-start-jumps-when-over-budget"),
        pytest.param(20, 12, 10, None, 13, id="mandatory-start-reaches-back-to-last-action"),
        pytest.param(20, 12, 10, 15, 13, id="sticky-after-mandatory-start-is-ignored"),
    ],
)
def test_window_start(
    n: int, last_action_n: int, budget_segments: int, sticky_n: int | None, expected_first: int
) -> None:
    segments = _chat(n)
    window = select_window(
        segments,
        T0 + last_action_n * 1000,
        budget_segments * SIZE,
        f"om_{sticky_n}" if sticky_n else None,
    )
    assert _ids(window.tail)[0] == expected_first
    assert _ids(window.tail)[-1] == n
    assert window.omitted == 0
    assert window.start_id == f"om_{expected_first}"


def test_start_is_stable_while_the_window_grows_then_jumps() -> None:
    budget = 10 * SIZE
    starts = []
    sticky = None
    for n in range(1, 31):
        window = select_window(_chat(n), T0 + (n - 1) * 1000, budget, sticky)
        sticky = window.start_id
        starts.append(sticky)
    # Cache stability: the start changes only at a few jumps, never on every message.
    assert len(set(starts)) <= 5
    assert starts[-1] is not None


def test_overflow_keeps_the_newest_part_pins_addresses_and_counts_omitted() -> None:
    segments = _chat(40, mentions={3: True, 7: True})
    window = select_window(segments, T0, 10 * SIZE, None)
    assert _ids(window.pinned) == [3, 7]
    assert _ids(window.tail) == list(range(36, 41))
    assert window.omitted == 40 - 5 - 2
    again = select_window((*segments, *_chat(42)[40:]), T0, 10 * SIZE, window.start_id)
    assert _ids(again.tail)[0] == 36  # the fallback start is sticky too
    assert again.omitted == window.omitted


def test_empty_context() -> None:
    window = select_window((), 0, 100, None)
    assert window.segments == ()
    assert window.start_id is None


@pytest.mark.parametrize("others", [0, 3], ids=["alone", "after-others"])
def test_newest_segment_larger_than_the_budget_is_kept_not_a_crash(others: int) -> None:
    # Regression: a segment over the budget as the only unprocessed input raised IndexError.
    segments = (*_chat(others), segment(others + 1, at_ms=T0 + 60_000, text="y" * 50_000, mentions_me=True))
    window = select_window(segments, T0 + 30_000, 10 * SIZE, None)
    assert _ids(window.tail) == [others + 1]
    assert window.pinned == ()
    assert window.omitted == 0
    assert window.start_id == f"om_{others + 1}"
