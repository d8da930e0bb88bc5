"""Each figure beside its limit: the turn floor, the pipeline ceiling, the ratios and why one is null."""

from __future__ import annotations

from typing import Any

import pytest

from larkbot.testkit.bench.ratios import TURN_PATH, pipeline_ceiling, ratios, turn_floor
from larkbot.testkit.bench.report import MEASUREMENTS, UnknownPart, select


def _limits(**rates: float) -> dict[str, Any]:
    return {
        "nats_round_trip_ms": {"p50": 0.4, "p99": 9.0},
        "jetstream_publish_ms": {"p50": 0.3, "p99": 9.0},
        "jetstream_delivery_ms": {"p50": 0.5, "p99": 9.0},
        "sqlite_commit_ms": {"p50": 2.0, "p99": 9.0},
        "sqlite_read_ms": {"p50": 1.0, "p99": 9.0},
        "jetstream_consume_per_s": 50_000,
        "sqlite_insert_rows_per_s": 30_000,
        "reduce_render_events_per_s": 20_000,
        "jetstream_publish_per_s": 25_000,
    } | rates


def _figures(limits: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "limits": limits,
        "turn_overhead_ms": {"p50": 14.0, "p99": 30.0},
        "pipeline_events_per_s": 5_000.0,
        "cold_replay_events_per_s": 10_000.0,
        "llm_gateway": {"roundtrip_p50_ms": 2.0},
        "memory_search_ms": {"p50": 5.0, "p99": 12.0},
    }


def test_the_turn_floor_counts_each_hop_at_its_p50() -> None:
    floor = turn_floor(_limits())
    # 2 deliveries × 0.5, 2 commits × 2, 3.5 round trips × 0.4, 2 acknowledged publishes × 0.3.
    assert floor["floor_ms"] == pytest.approx(7.0)
    assert [hop["limit"] for hop in floor["hops"]] == [hop.limit for hop in TURN_PATH]
    assert sum(hop["ms"] for hop in floor["hops"]) == pytest.approx(floor["floor_ms"])


def test_the_ceiling_is_the_slowest_stage() -> None:
    assert pipeline_ceiling(_limits()) == (20_000.0, "reduce_render_events_per_s")
    assert pipeline_ceiling(_limits(sqlite_insert_rows_per_s=12_000)) == (
        12_000.0,
        "sqlite_insert_rows_per_s",
    )


def test_every_figure_beside_its_limit() -> None:
    out = ratios(_figures(_limits()), {})
    assert out["turn_overhead_ms"]["floor_ms"] == pytest.approx(7.0)
    assert out["turn_overhead_ms"]["p50_to_floor"] == 2.0
    assert out["pipeline_events_per_s_ceiling"] == 20_000.0
    assert out["pipeline_to_ceiling"] == 0.25
    assert out["cold_replay_1m_events_s_floor"] == 50.0
    assert out["cold_replay_to_floor"] == 2.0
    assert out["gateway_round_trip_p50_to_nats"] == 5.0
    assert out["memory_search_p50_to_sqlite_read"] == 5.0
    assert out["null_because"] == {}


def test_a_part_that_did_not_run_leaves_its_ratios_null_and_says_why() -> None:
    figures = _figures(_limits()) | {"turn_overhead_ms": None, "pipeline_events_per_s": None}
    figures["cold_replay_events_per_s"] = None
    out = ratios(figures, {"turn": "did not run (--only)", "pipeline": "failed"})
    assert out["turn_overhead_ms"]["floor_ms"] == pytest.approx(7.0)  # the floor needs the limits only
    assert out["turn_overhead_ms"]["p50_to_floor"] is None
    assert out["pipeline_to_ceiling"] is None
    assert out["cold_replay_to_floor"] is None
    assert out["cold_replay_1m_events_s_floor"] == 50.0
    assert out["null_because"] == {
        "turn_overhead_ms.p50_to_floor": "the turn part did not run (--only)",
        "pipeline_to_ceiling": "the pipeline part failed",
        "cold_replay_to_floor": "the pipeline part failed",
    }
    assert out["gateway_round_trip_p50_to_nats"] == 5.0


def test_a_figure_missing_from_a_part_that_ran_is_named() -> None:
    out = ratios(_figures(_limits()) | {"memory_search_ms": None}, {})
    assert out["null_because"] == {"memory_search_p50_to_sqlite_read": "memory_search_ms was not measured"}


def test_without_the_limits_every_ratio_is_null_for_that_reason() -> None:
    out = ratios(_figures(None), {"limits": "did not run (--only)"})
    reasons = out.pop("null_because")
    assert set(out.values()) == {None}
    assert set(reasons) == set(out)
    assert set(reasons.values()) == {"the limits part did not run (--only)"}


def test_only_picks_parts_in_the_bench_order() -> None:
    assert select(None) == tuple(name for name, _ in MEASUREMENTS)
    assert select(["turn,limits", "pipeline"]) == ("limits", "pipeline", "turn")
    assert select(["limits"]) == ("limits",)


def test_an_unknown_part_is_refused_with_the_list_of_parts() -> None:
    with pytest.raises(UnknownPart) as refused:
        select(["limits,turns"])
    assert "turns" in str(refused.value)
    assert "limits, llm_gateway, pipeline, driver, long_chat, media, turn, memory" in str(refused.value)
    with pytest.raises(UnknownPart):
        select([","])
