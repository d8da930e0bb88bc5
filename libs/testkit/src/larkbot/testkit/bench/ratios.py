"""Each headline figure of ``larkbot bench`` beside the machine limit that bounds it (DESIGN §8), derived
after every part ran from the ``limits`` part (:mod:`.limits`) and the figures. Pure: no I/O.

**The turn floor** is what the measured path of one turn (``turn_overhead_ms``: inbound update → probe
request, probe reply → primary request, primary reply → ``sendMessage``) must spend on the bus and in
SQLite, each hop and commit at its cost measured in the same run (:data:`TURN_PATH`, counted from the code).
Not on the path, so not counted: the chat's turn history (the holder keeps it, ``wake.history``: read
once per take-over, and not at all for a chat the take-over found without any), the late binding's
memories (read while the probe is away, ``memory.ahead``), the probe's record (stored beside the primary
call, ``StoreProbe`` with ``beside_primary``), the complete step record and the processed mark (after the
send returns), the audit record (after the wake-up), the ledger record and the self-sent event (after
``sendMessage``).
Not measured among the limits, so not counted either: the gateway's HTTP round trip to the provider (one
per model call) and the long poll's answer reaching the ingress. The floor is therefore a lower bound.

**The pipeline ceiling** is the slowest stage of the pipeline's work measured alone: pull-consuming,
committing rows in batches, reduce+render, pipelined publishing. The service cannot be faster than it.

**The cold-replay floor** is 1,000,000 events at the reduce+render rate: the replay also reads and decodes
the rows, so it cannot be faster.

A ratio that cannot be derived is ``null``, and ``null_because`` says why (a part that did not run under
``--only``, or failed, or a figure not measured).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["CEILING_STAGES", "PART_OF", "TURN_PATH", "Hop", "pipeline_ceiling", "ratios", "turn_floor"]


@dataclass(frozen=True, slots=True)
class Hop:
    """One kind of hop or commit on the turn's path: ``count`` times the p50 of the limit ``limit``."""

    what: str
    limit: str
    count: float
    source: str


#: The turn's path, in order. A JetStream hop whose consumer is already waiting costs a delivery (the
#: publisher's acknowledgement arrives beside it, off the path); a publish that must be acknowledged
#: before the path goes on costs a publish.
TURN_PATH: tuple[Hop, ...] = (
    Hop(
        "the ingress publishes the event to EVENTS; a partition reader of the pipeline receives it",
        "jetstream_delivery_ms",
        1,
        "ingress_telegram.adapters.inbound (bus.publish) → runtime.reader (PullStream)",
    ),
    Hop(
        "the pipeline commits the event (events, senders, resume point: one transaction)",
        "sqlite_commit_ms",
        1,
        "pipeline.adapters.intake._commit → adapters.repository.EventRepository.commit",
    ),
    Hop(
        "the pipeline publishes the context update; the driver's context consumer receives it",
        "jetstream_delivery_ms",
        1,
        "pipeline.adapters.chats._publish_once → runtime.consume (PullStream)",
    ),
    Hop(
        "the speaking budget read before the probe (two bucket gets at once)",
        "nats_round_trip_ms",
        1,
        "driver.wake.ports.read_chat → budgets.reader → runtime.budgets.store.BudgetReader.read",
    ),
    Hop(
        "the probe: a bus request to the gateway and its reply",
        "nats_round_trip_ms",
        1,
        "driver.wake.ports.probe → wake.clients.generate",
    ),
    Hop(
        "the primary call: a bus request to the gateway and its reply",
        "nats_round_trip_ms",
        1,
        "driver.wake.ports.model → wake.clients.generate",
    ),
    Hop(
        "write-ahead: the step that sends, persisted as pending before the send",
        "sqlite_commit_ms",
        1,
        "driver.wake.core.turn.primary_turn (Persist pending) → wake.ports.persist → repository.add_turn",
    ),
    Hop(
        "the send request reaching the ingress (half a round trip: the reply follows sendMessage)",
        "nats_round_trip_ms",
        0.5,
        "driver.wake.executor (send_message) → wake.clients.act",
    ),
    Hop(
        "the sent-ledger claim before sendMessage (a KV create, acknowledged)",
        "jetstream_publish_ms",
        1,
        "ingress_telegram.adapters.records._claim → adapters.ledger.claim",
    ),
    Hop(
        "the minute budget booked before sendMessage (a KV compare-and-set, acknowledged)",
        "jetstream_publish_ms",
        1,
        "ingress_telegram.adapters.actions._spend → runtime.budgets.store.Budgets.spend_messages",
    ),
)

#: The pipeline's stages measured alone, each in events (or messages, or rows) per second.
CEILING_STAGES: tuple[str, ...] = (
    "jetstream_consume_per_s",
    "sqlite_insert_rows_per_s",
    "reduce_render_events_per_s",
    "jetstream_publish_per_s",
)

#: The part of the report each figure comes from (``report.MEASUREMENTS``).
#: The bench part whose run sets each figure of the report.
PART_OF: dict[str, str] = {
    "limits": "limits",
    "turn_overhead_ms": "turn",
    "pipeline_events_per_s": "pipeline",
    "cold_replay_1m_events_s": "pipeline",
    "cold_replay_events_per_s": "pipeline",
    "resident_bytes_per_chat": "pipeline",
    "chat_reload_ms": "pipeline",
    "gateway_overhead_ms": "llm_gateway",
    "llm_gateway": "llm_gateway",
    "cacheable_prefix_ratio": "driver",
    "long_chat": "long_chat",
    "long_chat_small": "long_chat",
    "media_thumbnails_per_s": "media",
    "media_frames_per_s": "media",
    "transcription_overhead_ms": "media",
    "many_chats": "many_chats",
    "scale": "scale",
    "memory_search_ms": "memory",
    "memory_late_binding": "memory",
}


def turn_floor(limits: Mapping[str, Any]) -> dict[str, Any]:
    """``floor_ms`` and each hop's share of it (``hops``)."""
    hops = [
        {
            "what": hop.what,
            "limit": hop.limit,
            "count": hop.count,
            "ms": round(hop.count * limits[hop.limit]["p50"], 3),
        }
        for hop in TURN_PATH
    ]
    return {"floor_ms": round(sum(h["ms"] for h in hops), 3), "hops": hops}


def pipeline_ceiling(limits: Mapping[str, Any]) -> tuple[float, str]:
    """The ceiling in events/s and the stage that sets it."""
    stage = min(CEILING_STAGES, key=lambda name: (float(limits[name]), name))
    return float(limits[stage]), stage


def ratios(figures: Mapping[str, Any], missing: Mapping[str, str]) -> dict[str, Any]:
    """The ``ratios`` object of the report from its ``figures``; ``missing`` says why a part has no
    figures (``{"turn": "did not run (--only)"}``)."""
    out: dict[str, Any] = dict.fromkeys(
        (
            "turn_overhead_ms",
            "pipeline_events_per_s_ceiling",
            "pipeline_ceiling_stage",
            "pipeline_to_ceiling",
            "cold_replay_1m_events_s_floor",
            "cold_replay_to_floor",
            "gateway_round_trip_p50_to_nats",
            "memory_search_p50_to_sqlite_read",
        )
    )
    because: dict[str, str] = {}

    def absent(*keys: str) -> str | None:
        for key in keys:
            if figures.get(key) is None:
                part = PART_OF[key]
                return f"the {part} part {missing[part]}" if part in missing else f"{key} was not measured"
        return None

    limits = figures.get("limits")

    if (why := absent("limits")) is not None:
        because.update(dict.fromkeys(out, why))
        out["null_because"] = because
        return out
    assert limits is not None

    floor = turn_floor(limits)
    if (why := absent("turn_overhead_ms")) is None:
        p50 = figures["turn_overhead_ms"]["p50"]
        out["turn_overhead_ms"] = {**floor, "p50_to_floor": round(p50 / floor["floor_ms"], 2)}
    else:
        out["turn_overhead_ms"] = {**floor, "p50_to_floor": None}
        because["turn_overhead_ms.p50_to_floor"] = why

    ceiling, stage = pipeline_ceiling(limits)
    out["pipeline_events_per_s_ceiling"], out["pipeline_ceiling_stage"] = ceiling, stage
    if (why := absent("pipeline_events_per_s")) is None:
        out["pipeline_to_ceiling"] = round(figures["pipeline_events_per_s"] / ceiling, 3)
    else:
        because["pipeline_to_ceiling"] = why

    rate = float(limits["reduce_render_events_per_s"])
    out["cold_replay_1m_events_s_floor"] = round(1_000_000 / rate, 2)
    # The replay's rate rather than its 1M-event seconds: the same ratio at 1M events, and one under --quick.
    if (why := absent("cold_replay_events_per_s")) is None:
        out["cold_replay_to_floor"] = round(rate / figures["cold_replay_events_per_s"], 2)
    else:
        because["cold_replay_to_floor"] = why

    rtt = limits["nats_round_trip_ms"]["p50"]
    if (why := absent("llm_gateway")) is None:
        out["gateway_round_trip_p50_to_nats"] = round(figures["llm_gateway"]["roundtrip_p50_ms"] / rtt, 2)
    else:
        because["gateway_round_trip_p50_to_nats"] = why

    if (why := absent("memory_search_ms")) is None:
        read = limits["sqlite_read_ms"]["p50"]
        out["memory_search_p50_to_sqlite_read"] = round(figures["memory_search_ms"]["p50"] / read, 2)
    else:
        because["memory_search_p50_to_sqlite_read"] = why

    out["null_because"] = because
    return out
