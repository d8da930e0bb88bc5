"""``make bench-load``: the members' plan, and the whole harness in its smoke size — every service a
process, a few chats for a few seconds — so that the by-hand ten-minute run cannot rot."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from larkbot.runtime.bus import Bus
from larkbot.testkit.bench import load
from larkbot.testkit.bench.load_plot import plot
from larkbot.testkit.bench.load_traffic import MIX, plan, split
from larkbot.testkit.stack import SERVICES


def test_the_plan_follows_the_mix_over_both_platforms_in_time_order() -> None:
    acts = list(plan(1000, 600, 1.0))
    assert 9_000 < len(acts) < 11_000  # 1,000 chats × 10 minutes × 1 act a minute
    assert [a.at_s for a in acts] == sorted(a.at_s for a in acts)
    assert all(0 <= a.at_s < 600 for a in acts)
    kinds = Counter(a.kind for a in acts)
    for kind, share in MIX.items():
        # Reactions and edits in a chat with nothing said yet become text: a little more text, a little less
        # of the others.
        assert abs(kinds[kind] / len(acts) - share) < 0.03, (kind, kinds)
    telegram, feishu = split(1000)
    assert (telegram, feishu) == (500, 500)
    assert {a.chat for a in acts if a.platform == "telegram"} <= set(range(telegram))
    assert {a.chat for a in acts if a.platform == "feishu"} <= set(range(feishu))
    assert list(plan(1000, 600, 1.0)) == acts  # the same arguments, the same acts


def test_reactions_and_edits_act_on_messages_already_said_and_never_on_a_recalled_one() -> None:
    said: dict[tuple[str, int], set[int]] = {}
    recalled: set[tuple[str, int, int]] = set()
    for act in plan(200, 600, 2.0, seed=5):
        chat = (act.platform, act.chat)
        if act.kind in ("text", "mention", "media"):
            assert act.n == len(said.get(chat, ())) + 1
            said.setdefault(chat, set()).add(act.n)
            continue
        assert act.n in said[chat]
        assert (*chat, act.n) not in recalled
        if act.kind == "edit" and act.platform == "feishu":
            recalled.add((*chat, act.n))
    assert recalled  # Feishu's share of edits are recalls


async def test_a_smoke_run_answers_every_mention_drains_every_lag_and_plots(
    bus: Bus, nats_url: str, tmp_path: Path
) -> None:
    # ``bus``: the streams start empty, so the services see only this run's traffic.
    report = await load.run(nats_url, load.SMOKE, tmp_path / "stack")

    assert report["restarts"] == []
    assert set(report["log_counts"]) == set(SERVICES)
    turns = report["turns"]
    assert turns["asked"] > 0
    assert turns["answered"] == turns["asked"]
    assert turns["turn_ms"]["n"] == turns["asked"]
    assert 0 < turns["turn_ms"]["p50"] <= turns["turn_ms"]["p99"]
    assert report["drained_after_s"] is not None
    assert set(report["acts"]) <= set(MIX)
    assert sum(report["acts"].values()) == report["samples"][-1]["acts"]
    assert report["model_calls"]["primary"] >= turns["asked"]
    assert report["model_calls"]["vision"] >= 1  # the smoke plan has a photo
    samples = report["samples"]
    assert len(samples) >= report["traffic_s"] / load.SMOKE.sample_s - 1
    assert set(samples[-1]["lag"]) == {"ingress", "events", "context", "media"}
    assert not any(samples[-1]["lag"].values())
    assert set(report["rss_mib"]) == set(SERVICES)
    assert all(summary["max"] and summary["max"] > 20 for summary in report["rss_mib"].values())
    assert all(samples[-1]["cpu_s"][name] > 0 for name in SERVICES)
    assert set(report["cpu_ms_per_act"]) == set(SERVICES)

    png = tmp_path / "load.png"
    plot(report, png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 10_000


def test_cpu_per_act_counts_a_restarted_process_from_zero_again() -> None:
    def sample(acts: int, driver: float | None, pipeline: float) -> dict[str, object]:
        return {"acts": acts, "cpu_s": {"driver": driver, "pipeline": pipeline}}

    samples = [
        sample(0, 2.0, 1.0),
        sample(100, 3.0, 1.5),
        sample(200, None, 2.0),  # the driver had exited: restarted after this sample
        sample(300, 0.5, 2.5),  # the new process from 0
        sample(400, 1.5, 3.0),
    ]
    # driver: 1.0 before it exited, 0.5 + 1.0 after; pipeline: 2.0; over 400 acts.
    assert load.cpu_per_act(samples) == {"driver": 6.25, "pipeline": 5.0}
