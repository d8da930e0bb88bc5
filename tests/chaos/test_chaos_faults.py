"""Fault injection (issue 8 part 2): a few thousand platform events across tens of chats while every
service is SIGKILLed several times, NATS restarts once and the platforms redeliver; then DESIGN §8's
reliability guarantees are checked and a report is printed (``-s`` shows it; it is also in
``<tmp>/chaos-report.json``).

On a 3-node JetStream cluster with every asset on three replicas (``cluster`` profiles), NATS faults are
SIGKILLs of single servers instead — a follower, the leader of ``EVENTS``, the leader of the partition
leases — each started again on its store; the report adds how long JetStream writes stalled at worst
(a canary stream written every 100 ms).

``LARKBOT_CHAOS_SEED`` replays a run; the seed is printed either way. The short profile runs in
``make test``; the long one is ``slow`` (``make test-all``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import time
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.api import StreamConfig
from tests.harness.chaos import (
    FaultLog,
    Profile,
    Traffic,
    fault_plan,
    feishu_chat_id,
    inject,
    plan_chat,
    run_feishu_chat,
    run_telegram_chat,
    supervise,
    telegram_chat_id,
)
from tests.harness.leases import LeaseWatch
from tests.harness.nats import ClusterNats, RestartableNats
from tests.harness.verdict import clean_events, judge
from tests.harness.world import World, world

from larkbot.canonical.codec import decode
from larkbot.canonical.events import BotIdentity
from larkbot.canonical.names import KEY_VALUES, KV_IDENTITY, KV_LEASES, identity_key
from larkbot.ingress_feishu.core.outbound import feishu_uuid
from larkbot.runtime.bus import Bus, connect
from larkbot.runtime.config import JetStreamSettings, NatsSettings, load_config
from larkbot.testkit.botscript import BotScript
from larkbot.testkit.stack import SERVICES, until

SHORT = Profile("short", feishu_chats=8, telegram_chats=8, events=2000, kills_per_service=2,
                redeliver_share=0.1, mean_gap_s=0.3, settle_timeout_s=240)  # fmt: skip
LONG = Profile("long", feishu_chats=20, telegram_chats=20, events=6000, kills_per_service=4,
               redeliver_share=0.1, mean_gap_s=0.3, settle_timeout_s=420)  # fmt: skip
#: One leader kill under light traffic, no service kills: what an R3 deployment rides through (make test).
CLUSTER_SHORT = Profile("cluster-short", feishu_chats=3, telegram_chats=3, events=360, kills_per_service=0,
                        redeliver_share=0.1, mean_gap_s=0.3, settle_timeout_s=240, nats_faults=1)  # fmt: skip
#: The long profile's traffic and service kills, plus a follower, the EVENTS leader and the leases' leader,
#: with two pipelines and two drivers sharing the partitions (every kill moves leases between them).
CLUSTER_LONG = Profile("cluster-long", feishu_chats=20, telegram_chats=20, events=6000, kills_per_service=4,
                       redeliver_share=0.1, mean_gap_s=0.3, settle_timeout_s=480, nats_faults=3,
                       replicas=(("pipeline", 2), ("driver", 2)))  # fmt: skip
R3 = JetStreamSettings(replicas=3)


def seed() -> int:
    return int(os.environ.get("LARKBOT_CHAOS_SEED") or random.SystemRandom().randrange(10**6))


async def identities(bus: Bus) -> dict[str, BotIdentity]:
    kv = await bus.js.key_value(KV_IDENTITY)
    out = {}
    for platform in ("feishu", "telegram"):
        entry = await kv.get(identity_key(platform))
        out[platform] = decode(entry.value or b"", BotIdentity)
    return out


async def settled(
    w: World,
    script: BotScript,
    traffic: Traffic,
    expected: set[tuple[str, str, str]],
) -> bool:
    if w.telegram.pending_updates:
        return False
    rows = await w.event_rows()
    if not expected <= {(r.platform, r.chat_id, r.dedup_key) for r in rows}:
        return False
    probed = "\n".join(c.raw.decode("utf-8", "replace") for c in script.probes)
    if any(tok not in probed for tok in traffic.newest_token.values()):
        return False
    uuids = {s.uuid for s in w.feishu.sent.values()}
    texts = {m["text"] for m in w.telegram.sent}
    for action in w.tap.of_kind("send_message"):
        # Every send the driver asked for is delivered: one whose driver was killed mid-step is redone
        # from its write-ahead row by the restarted driver.
        done = (
            feishu_uuid(action.idempotency_key) in uuids
            if action.platform.value == "feishu"
            else (getattr(action, "text", None) in texts)
        )
        if not done:
            return False
    return True


class Canary:
    """Writes to a stream of its own every 100 ms and keeps the longest time without a stored write."""

    STREAM = "CHAOS_CANARY"

    def __init__(self, bus: Bus, replicas: int) -> None:
        self.bus = bus
        self.replicas = replicas
        self.worst_s = 0.0
        self.stop = asyncio.Event()

    async def run(self) -> None:
        await self.bus.js.add_stream(
            StreamConfig(
                name=self.STREAM, subjects=["chaos.canary"], num_replicas=self.replicas, max_msgs=1000
            )
        )
        last = time.monotonic()
        while not self.stop.is_set():
            with contextlib.suppress(nats.errors.Error, TimeoutError):
                await self.bus.js.publish("chaos.canary", b".", timeout=1.0)
                now = time.monotonic()
                self.worst_s = max(self.worst_s, now - last)
                last = now
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), 0.1)
        self.worst_s = max(self.worst_s, time.monotonic() - last)


async def run_chaos(
    root: Path, profile: Profile, run_seed: int, *, cluster: tuple[str, ...] = ()
) -> dict[str, Any]:
    """``cluster``: run on a 3-node cluster with R3 assets, killing these victims (see ``ClusterNats``)."""
    print(f"\nchaos profile {profile.name}, seed {run_seed} (LARKBOT_CHAOS_SEED={run_seed} replays it)")
    nats_: RestartableNats | ClusterNats = (
        ClusterNats(root / "nats", cluster) if cluster else RestartableNats(root / "nats")
    )
    url = await asyncio.to_thread(nats_.start)
    bus = await connect(NatsSettings(), "chaos-tests", url=url, give_up_after_s=60)
    if isinstance(nats_, ClusterNats):
        await nats_.ready(bus.js)
    script = BotScript()
    feishu_chats = [feishu_chat_id(i) for i in range(profile.feishu_chats)]
    telegram_chats = [telegram_chat_id(i) for i in range(profile.telegram_chats)]
    chats: dict[str, dict[str, Any]] = {f"feishu:{c}": {} for c in feishu_chats}
    chats.update({f"telegram:{c}": {} for c in telegram_chats})
    per_chat = profile.events // (len(feishu_chats) + len(telegram_chats))
    report: dict[str, Any] = {"profile": profile.name, "seed": run_seed}
    try:
        jetstream = R3 if cluster else None
        databases: dict[str, Any] = {}
        if profile.replicas:
            postgres_url = os.environ.get("TEST_DATABASE_URL")
            if not postgres_url:
                pytest.skip("replicas of the pipeline and the driver share a PostgreSQL: TEST_DATABASE_URL")
            databases = {"database": "postgres", "postgres_url": postgres_url}
        async with world(
            root / "stack",
            bus,
            url,
            script,
            chats,
            jetstream=jetstream,
            replicas=dict(profile.replicas),
            **databases,
        ) as w:
            config = load_config(w.stack.config_path, env={})
            traffic = Traffic()
            faults = FaultLog()
            # Pushes take time too: traffic lasts ~1.7x the planned gaps on this machine.
            plan = fault_plan(
                run_seed,
                SERVICES,
                profile.kills_per_service,
                per_chat * profile.mean_gap_s * 1.7,
                profile.nats_faults,
            )
            canary = Canary(bus, 3 if cluster else 1)
            canary_task = asyncio.create_task(canary.run())
            leases = LeaseWatch(
                ttl_s=next(kv.ttl_s for kv in KEY_VALUES if kv.bucket == KV_LEASES), alive=w.stack.runs_pid
            )
            await leases.start(url)
            t0 = time.monotonic()
            stop = asyncio.Event()
            supervisor = asyncio.create_task(supervise(w.stack, faults, t0, stop))
            injector = asyncio.create_task(inject(w.stack, nats_, plan, faults, t0))
            await asyncio.gather(
                *(run_feishu_chat(w.feishu, c, plan_chat(run_seed, c, per_chat, profile, "feishu"), traffic)
                  for c in feishu_chats),
                *(run_telegram_chat(w.telegram, c, plan_chat(run_seed, str(c), per_chat, profile, "telegram"),
                                    traffic) for c in telegram_chats),
            )  # fmt: skip
            report["traffic_s"] = round(time.monotonic() - t0, 1)
            await injector
            canary.stop.set()
            await canary_task
            report["worst_jetstream_stall_s"] = round(canary.worst_s, 1)
            if isinstance(nats_, ClusterNats):
                report["nats_servers_killed"] = [f"{role}: {name}" for role, name in nats_.killed]
            await asyncio.gather(*traffic.later)
            await w.stack.wait_ready()
            ids = await identities(bus)
            expected = {
                (e.platform.value, e.chat_id, e.dedup_key)
                for events in clean_events(config, w.feishu.bot_open_id, w.feishu.app_id, traffic).values()
                for e in events
            }
            # Bounded: a run that never settles still gets its report (what is lost, what is stuck).
            with contextlib.suppress(AssertionError):
                await until(
                    lambda: settled(w, script, traffic, expected),
                    "quiescence",
                    profile.settle_timeout_s,
                )
            report["settled_s"] = round(time.monotonic() - t0, 1)
            stop.set()
            await supervisor
            verdicts = await judge(w, script, config, traffic, ids)
            await leases.stop()
            failures = [f for v in verdicts for f in v.failures()] + leases.overlaps
            if not leases.writes:
                failures.append("the lease watcher saw no lease write: ownership was not checked")
            report.update(
                accepted={"feishu": len(traffic.feishu_accepted), "telegram": len(traffic.telegram_accepted)},
                committed_member_events=sum(v.committed for v in verdicts),
                redelivered={"feishu_repushes": traffic.repushes, "telegram_repeats": traffic.repeats},
                feishu_push_failures=traffic.push_failures,
                kills=[f"{at:.1f}s {name}" for at, name in faults.kills],
                nats_restarts=[f"{at:.1f}s" for at in faults.nats_restarts],
                self_exits=[
                    f"{at:.1f}s {name} exit {code}: {tail}" for at, name, code, tail in faults.self_exits
                ],
                probes=len(script.probes),
                primaries=len(script.primaries),
                bot_messages=sum(v.bot_sent for v in verdicts),
                bot_unknown_outcome=[u for v in verdicts for u in v.bot_unknown],
                late_received_segments=sum(v.late_received for v in verdicts),
                lease_writes=leases.writes,
                lease_handovers=leases.handovers,
                lease_handovers_unobserved=leases.unobserved,
                replicas=dict(profile.replicas),
                failures=failures,
            )
            if failures:
                report["logs"] = {name: w.stack.tail(name, 30) for name in SERVICES}
    finally:
        await bus.close(drain_timeout_s=5)
        await asyncio.to_thread(nats_.stop)
    (root / "chaos-report.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    print(json.dumps({k: v for k, v in report.items() if k != "logs"}, indent=2))
    return report


@pytest.mark.timeout(900)
async def test_chaos_short_profile(tmp_path: Path) -> None:
    report = await run_chaos(tmp_path, SHORT, seed())
    assert report["kills"]
    assert report["nats_restarts"]
    assert sum(report["accepted"].values()) >= SHORT.events * 0.9
    assert not report["failures"], "\n".join(report["failures"])


@pytest.mark.slow
@pytest.mark.timeout(1200)
async def test_chaos_long_profile(tmp_path: Path) -> None:
    report = await run_chaos(tmp_path, LONG, seed())
    assert len(report["kills"]) == LONG.kills_per_service * len(SERVICES)
    assert not report["failures"], "\n".join(report["failures"])


@pytest.mark.timeout(900)
async def test_chaos_on_a_three_node_cluster_rides_through_a_leader_kill(tmp_path: Path) -> None:
    report = await run_chaos(tmp_path, CLUSTER_SHORT, seed(), cluster=("EVENTS",))
    assert len(report["nats_servers_killed"]) == 1
    # Losing one server of three is an election, not an outage: no service goes down with it.
    assert report["self_exits"] == []
    assert sum(report["accepted"].values()) >= CLUSTER_SHORT.events * 0.9
    assert not report["failures"], "\n".join(report["failures"])


@pytest.mark.slow
@pytest.mark.timeout(1500)
async def test_chaos_long_profile_on_a_three_node_cluster(tmp_path: Path) -> None:
    report = await run_chaos(tmp_path, CLUSTER_LONG, seed(), cluster=("follower", "EVENTS", "KV_leases"))
    assert len(report["nats_servers_killed"]) == 3
    assert len(report["kills"]) == CLUSTER_LONG.kills_per_service * len(SERVICES)
    assert not report["failures"], "\n".join(report["failures"])
