"""The pipeline service on a real JetStream server and real databases: consume → commit → publish."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from nats.aio.msg import Msg
from prometheus_client import REGISTRY

from larkbot.canonical.codec import decode, encode
from larkbot.canonical.context import (
    ContextSnapshot,
    ContextUpdate,
    CursorMove,
    HistoryRequest,
    HistoryResponse,
    ReplaceOp,
    ResetOp,
    Segment,
    SnapshotRequest,
)
from larkbot.canonical.events import BotIdentity, CanonicalEvent, ForwardInfo
from larkbot.canonical.names import (
    KV_IDENTITY,
    STREAM_CONTEXT,
    SUBJECT_PIPELINE_CURSOR,
    SUBJECT_PIPELINE_HISTORY,
    SUBJECT_PIPELINE_SNAPSHOT,
    Platform,
    Service,
    events_subject,
    identity_key,
    msg_id,
)
from larkbot.pipeline.app import Pipeline, PipelineOptions, PipelineService
from larkbot.pipeline.core import alias_for
from larkbot.runtime.bootstrap import bootstrap
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import LarkbotConfig, parse_config
from larkbot.runtime.service import ServiceContext, built
from larkbot.testkit.pipeline import synthetic as s
from larkbot.testkit.pipeline.watch import caught_up

from .test_pipeline_properties import apply_ops

TIMEOUT = 30.0


async def eventually(predicate: Callable[[], bool], timeout_s: float = TIMEOUT) -> None:
    """Poll a condition of the system under test (never a fixed sleep as synchronisation)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not predicate():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


def config(database_url: str, **extra: Any) -> LarkbotConfig:
    return parse_config(
        {
            "utc_offset_min": 480,
            "maintainers": ["ou_alice"],
            "services": {"pipeline": {"database_url": database_url, "http_host": "127.0.0.1"}},
            "chats": {"default": {}, "feishu:oc_chat": {}, "telegram:-100": {}},
            **extra,
        }
    )


class Updates:
    """Every ContextUpdate on ``context.>``, applied to a consumer-side copy per chat."""

    def __init__(self) -> None:
        self.items: list[ContextUpdate] = []
        self.copies: dict[str, list[Segment]] = {}
        self.changed = asyncio.Condition()

    async def on_msg(self, msg: Msg) -> None:
        update = decode(msg.data, ContextUpdate, dict(msg.headers or {}))
        async with self.changed:
            self.items.append(update)
            apply_ops(self.copies.setdefault(update.chat_id, []), list(update.ops))
            self.changed.notify_all()

    async def until(self, predicate: Callable[[], bool]) -> None:
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(predicate), TIMEOUT)

    def xml(self, chat: str) -> list[str]:
        return [seg.xml for seg in self.copies.get(chat, [])]


@contextlib.asynccontextmanager
async def pipeline(
    bus: Bus, nats_url: str, cfg: LarkbotConfig, **options: Any
) -> AsyncIterator[tuple[Pipeline, ServiceContext]]:
    recipe = PipelineService(cfg, PipelineOptions(**options))
    async with built(Service.PIPELINE, recipe, cfg, nats_url=nats_url) as service:
        await asyncio.wait_for(service.components.ready.wait(), TIMEOUT)
        yield service.components, service.ctx


@contextlib.asynccontextmanager
async def watching(bus: Bus) -> AsyncIterator[Updates]:
    updates = Updates()
    sub = await bus.nc.subscribe("context.>", cb=updates.on_msg)
    try:
        yield updates
    finally:
        await sub.unsubscribe()


async def publish(bus: Bus, *events: CanonicalEvent, unique_msg_id: bool = False) -> None:
    for n, event in enumerate(events):
        mid = msg_id(event.platform.value, event.dedup_key) + (f"#{n}" if unique_msg_id else "")
        await bus.publish(events_subject(event.platform.value, event.chat_id), event, msg_id=mid)


async def snapshot(bus: Bus, chat: str = "oc_chat", platform: Platform = Platform.FEISHU) -> ContextSnapshot:
    request = SnapshotRequest(platform=platform, chat_id=chat)
    return await bus.request(SUBJECT_PIPELINE_SNAPSHOT, request, ContextSnapshot, timeout_s=TIMEOUT)


CONVERSATION = [
    s.message("om_1", "hello <world>", sender=s.person("ou_alice", "Alice")),
    s.message("om_2", "hi", sender=s.person("ou_bob", "Bob"), reply_to="om_1"),
    s.reaction("om_1", "👍"),
    s.edit("om_2", "hi there"),
]


async def test_live_processing_publishes_updates_that_rebuild_the_snapshot(
    bus: Bus, nats_url: str, database_url: str
) -> None:
    cfg = config(database_url)
    async with watching(bus) as updates, pipeline(bus, nats_url, cfg) as (app, _):
        await publish(bus, *CONVERSATION)
        await updates.until(lambda: "hi there" in "".join(updates.xml("oc_chat")))
        snap = await snapshot(bus)
        assert [seg.xml for seg in snap.segments] == updates.xml("oc_chat")
        assert snap.seq == updates.items[-1].seq
        assert [u.base_seq for u in updates.items[1:]] == [u.seq for u in updates.items[:-1]]
        a1 = alias_for("oc_chat", "om_1")
        assert updates.xml("oc_chat")[0] == (
            f'<message id="{a1}" sender="Alice" uid="ou_alice" t="01-02 11:04:05" maintainer="true">'
            "hello &lt;world&gt;</message>"
        )
        # A redelivery (same dedup key, past the stream's duplicate window) adds no row and no segment.
        before = await app.repo.count("feishu", "oc_chat")
        seen = len(updates.items)
        await publish(bus, CONVERSATION[0], unique_msg_id=True)
        await publish(bus, s.message("om_3", "after"))
        await updates.until(lambda: len(updates.items) > seen)
        assert await app.repo.count("feishu", "oc_chat") == before + 1
        assert [seg.segment_id for seg in (await snapshot(bus)).segments].count("msg:om_1") == 1


async def test_cold_start_replays_exactly_what_live_processing_published(
    bus: Bus, nats_url: str, database_url: str
) -> None:
    cfg = config(database_url)
    async with watching(bus) as updates:
        async with pipeline(bus, nats_url, cfg):
            await publish(bus, *CONVERSATION, s.message("om_9", "x", sender=s.person("ou_alice", "Ali")))
            await updates.until(
                lambda: any(seg.segment_id == "msg:om_9" for seg in updates.copies.get("oc_chat", []))
            )
            live = await snapshot(bus)
        async with pipeline(bus, nats_url, cfg) as (app, _):
            replayed = await snapshot(bus)
            assert app.replayed_events == 5
    assert replayed.segments == live.segments
    assert replayed.seq >= live.seq


async def test_history_resolves_aliases_and_cursor_moves_reset_the_context(
    bus: Bus, nats_url: str, database_url: str
) -> None:
    cfg = config(database_url)
    async with watching(bus) as updates:
        async with pipeline(bus, nats_url, cfg):
            await publish(bus, *CONVERSATION)
            await updates.until(lambda: "hi there" in "".join(updates.xml("oc_chat")))
            cursor = (await snapshot(bus)).segments[1].event_seq  # om_2 and before go
            moved = await bus.request(
                SUBJECT_PIPELINE_CURSOR,
                CursorMove(platform=Platform.FEISHU, chat_id="oc_chat", cursor=cursor, reason="compaction"),
                ContextSnapshot,
                timeout_s=TIMEOUT,
            )
            assert moved.cursor == cursor
            assert [seg.segment_id for seg in moved.segments] == [f"evt:{cursor + 1}"]
            await updates.until(lambda: isinstance(updates.items[-1].ops[0], ResetOp))
            assert updates.xml("oc_chat") == [seg.xml for seg in moved.segments]
            # om_1 left the live context: its alias is resolved from persisted history.
            history = await bus.request(
                SUBJECT_PIPELINE_HISTORY,
                HistoryRequest(
                    platform=Platform.FEISHU,
                    chat_id="oc_chat",
                    message_ids=(alias_for("oc_chat", "om_1"), "om_2", "om_404"),
                ),
                HistoryResponse,
                timeout_s=TIMEOUT,
            )
            assert [item.message_id for item in history.found] == ["om_1", "om_2"]
            assert history.missing == ("om_404",)
            assert history.found[1].xml.endswith("\nhi there</message>")
            assert history.found[0].alias == alias_for("oc_chat", "om_1")
            assert [(item.sender_id, item.reply_to_message_id) for item in history.found] == [
                ("ou_alice", None),
                ("ou_bob", "om_1"),
            ]
        async with pipeline(bus, nats_url, cfg):
            after_restart = await snapshot(bus)
    assert after_restart.cursor == cursor
    assert after_restart.segments == moved.segments


async def test_an_edit_of_an_unseen_message_is_rendered_and_found_by_its_alias_after_compaction(
    bus: Bus, nats_url: str, database_url: str
) -> None:
    cfg = config(database_url)
    alice = s.person("ou_alice", "Alice")
    edited = s.edit("om_7", "the fixed text", sender=alice, sent_at=s.BASE_SEC - 3600)
    later = s.message("om_8", "after", sender=s.person("ou_bob", "Bob"), at=s.BASE_SEC + 90)
    async with watching(bus) as updates, pipeline(bus, nats_url, cfg):
        await publish(bus, edited, later)
        await updates.until(lambda: len(updates.xml("oc_chat")) == 2)
        shown = updates.xml("oc_chat")[0]
        assert shown.startswith(f'<message id="{alias_for("oc_chat", "om_7")}" sender="Alice" uid="ou_alice"')
        assert shown.endswith('edited="01-02 11:05:05" maintainer="true">the fixed text</message>')
        cursor = (await snapshot(bus)).segments[1].event_seq  # both leave the live context
        await bus.request(
            SUBJECT_PIPELINE_CURSOR,
            CursorMove(platform=Platform.FEISHU, chat_id="oc_chat", cursor=cursor, reason="compaction"),
            ContextSnapshot,
            timeout_s=TIMEOUT,
        )
        history = await bus.request(
            SUBJECT_PIPELINE_HISTORY,
            HistoryRequest(
                platform=Platform.FEISHU, chat_id="oc_chat", message_ids=(alias_for("oc_chat", "om_7"),)
            ),
            HistoryResponse,
            timeout_s=TIMEOUT,
        )
    assert history.missing == ()
    (item,) = history.found
    assert (item.message_id, item.sender_id, item.xml) == ("om_7", "ou_alice", shown)


async def test_history_items_carry_the_sender_and_flags_of_their_segments(
    bus: Bus, nats_url: str, database_url: str
) -> None:
    alice, bot = s.person("ou_alice", "Alice"), s.person("ou_bot", "Lark", is_bot=True)
    forwarded = s.message("om_fwd", "news", sender=alice).model_copy(
        update={"forward_info": ForwardInfo(from_name="Zed")}
    )
    events = [
        s.message("om_plain", "I moved to Berlin", sender=alice),
        forwarded,
        s.message("om_reply", "congrats", sender=s.person("ou_bob", "Bob"), reply_to="om_plain"),
        s.message("om_gone", "typo", sender=alice, reply_to="om_plain"),
        s.delete("om_gone"),
        s.message("om_mine", "noted", sender=bot, self_sent=True),
        s.message("om_helper", "beep", sender=s.person("ou_b2", "Helper", is_bot=True)),
    ]
    cfg = config(database_url)
    async with watching(bus) as updates, pipeline(bus, nats_url, cfg):
        await publish(bus, *events)
        await updates.until(lambda: len(updates.copies.get("oc_chat", [])) == 6)
        requested = (
            "om_plain",
            "om_fwd",
            alias_for("oc_chat", "om_reply"),
            "om_gone",
            "om_mine",
            "om_helper",
        )
        history = await bus.request(
            SUBJECT_PIPELINE_HISTORY,
            HistoryRequest(platform=Platform.FEISHU, chat_id="oc_chat", message_ids=requested),
            HistoryResponse,
            timeout_s=TIMEOUT,
        )
        live = {seg.message_id: seg for seg in updates.copies["oc_chat"]}
    assert history.missing == ()
    found = {
        item.message_id: (
            item.sender_id,
            item.is_myself,
            item.is_self_sent,
            item.is_bot,
            item.is_deleted,
            item.is_forwarded,
            item.reply_to_message_id,
        )
        for item in history.found
    }
    assert found == {
        "om_plain": ("ou_alice", False, False, False, False, False, None),
        "om_fwd": ("ou_alice", False, False, False, False, True, None),
        "om_reply": ("ou_bob", False, False, False, False, False, "om_plain"),
        "om_gone": ("ou_alice", False, False, False, True, False, "om_plain"),
        "om_mine": ("ou_bot", True, True, True, False, False, None),
        "om_helper": ("ou_b2", False, False, True, False, False, None),
    }
    # Every reply target was requested too, so history renders exactly what the live context does.
    for item in history.found:
        segment = live[item.message_id]
        assert item.xml == segment.xml
        assert found[item.message_id] == (
            segment.sender_id,
            segment.is_myself,
            segment.is_self_sent,
            segment.is_bot,
            segment.is_deleted,
            segment.is_forwarded,
            segment.reply_to_message_id,
        )


async def test_residency_archives_telegram_and_drops_unconfigured_feishu(
    bus: Bus, nats_url: str, database_url: str
) -> None:
    cfg = config(database_url)
    async with watching(bus) as updates, pipeline(bus, nats_url, cfg) as (app, _):
        await publish(
            bus,
            s.message("om_x", "private", chat="oc_other"),
            s.message("5", "archived", chat="-200", platform=Platform.TELEGRAM),
            s.message("6", "projected", chat="-100", platform=Platform.TELEGRAM),
        )
        await updates.until(lambda: "-100" in updates.copies)
        await eventually(lambda: caught_up(app))
        assert await app.repo.count("feishu", "oc_other") == 0
        assert await app.repo.count("telegram", "-200") == 1
        assert {u.chat_id for u in updates.items} == {"-100"}
        assert updates.xml("-100") == [
            '<message id="6" sender="Alice" uid="ou_alice" t="01-02 11:04:05" maintainer="true">'
            "projected</message>"
        ]


async def test_undecodable_event_is_dead_lettered(bus: Bus, nats_url: str, database_url: str) -> None:
    cfg = config(database_url)
    async with watching(bus) as updates, pipeline(bus, nats_url, cfg):
        await bus.js.publish(
            events_subject("feishu", "oc_chat"), b'{"kind": "nonsense"}', headers={"Larkbot-Schema": "1"}
        )
        await publish(bus, s.message("om_1", "fine"))
        await updates.until(lambda: bool(updates.copies.get("oc_chat")))
        info = await bus.js.stream_info("DEADLETTER")
        assert info.state.messages == 1


async def test_identity_change_re_renders_with_myself(bus: Bus, nats_url: str, database_url: str) -> None:
    cfg = config(database_url)
    async with watching(bus) as updates, pipeline(bus, nats_url, cfg):
        await publish(bus, s.message("om_1", "I am the bot", sender=s.person("ou_bot", "Lark", is_bot=True)))
        await updates.until(lambda: bool(updates.copies.get("oc_chat")))
        assert 'bot="true"' in updates.xml("oc_chat")[0]
        kv = await bus.js.key_value(KV_IDENTITY)
        identity = BotIdentity(platform=Platform.FEISHU, bot_id="ou_bot", name="Lark", updated_at_ms=1)
        await kv.put(identity_key("feishu"), encode(identity))
        await updates.until(lambda: 'myself="true"' in "".join(updates.xml("oc_chat")))
        assert isinstance(updates.items[-1].ops[0], ResetOp)


async def test_a_context_update_the_bus_refused_is_published_again(
    bus: Bus, nats_url: str, database_url: str
) -> None:
    """A lost update used to be only logged: its chat's newest message then never reached the driver,
    which notices a gap only from a next update (a 3-node cluster losing the CONTEXT leader)."""

    def failed() -> float:
        return REGISTRY.get_sample_value("larkbot_pipeline_updates_total", {"outcome": "failed"}) or 0.0

    cfg = config(database_url)
    async with watching(bus) as updates, pipeline(bus, nats_url, cfg):
        await publish(bus, CONVERSATION[0])
        await updates.until(lambda: bool(updates.items))
        before = failed()
        await bus.js.delete_stream(STREAM_CONTEXT)
        await publish(bus, s.message("om_last", "the newest message"))
        await eventually(lambda: failed() > before)
        await bootstrap(bus.js)
        # Declared again empty: whatever the stream holds now was published again.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + TIMEOUT
        while not any("the newest message" in xml for xml in await stored_xml(bus)):
            assert loop.time() < deadline, "the refused update was never published again"
            await asyncio.sleep(0.05)


async def stored_xml(bus: Bus) -> list[str]:
    """The rendered XML of every update ``CONTEXT`` holds."""
    state = (await bus.js.stream_info(STREAM_CONTEXT)).state
    out: list[str] = []
    for seq in range(state.first_seq, state.last_seq + 1) if state.messages else ():
        update = decode((await bus.js.get_msg(STREAM_CONTEXT, seq)).data or b"", ContextUpdate)
        out += [seg.xml for op in update.ops for seg in getattr(op, "segments", ())]
        out += [op.segment.xml for op in update.ops if isinstance(op, ReplaceOp)]
    return out


async def test_a_chat_active_lately_is_marked_when_its_partition_is_loaded(
    bus: Bus, nats_url: str, database_url: str
) -> None:
    """The previous owner may have been killed between a commit and its publication: a consumer behind
    learns it from the mark's ``base_seq``, one up to date applies a replace of the last segment by itself."""
    cfg = config(database_url)
    now_ms = int(time.time() * 1000)
    async with watching(bus) as updates:
        async with pipeline(bus, nats_url, cfg):
            await publish(
                bus, s.message("om_old", "long ago"), s.message("om_new", "just now", received_ms=now_ms)
            )
            await updates.until(lambda: "just now" in "".join(updates.xml("oc_chat")))
            live = await snapshot(bus)
        seen = len(updates.items)
        async with pipeline(bus, nats_url, cfg):
            await updates.until(lambda: len(updates.items) > seen)
            mark = updates.items[-1]
            assert mark.chat_id == "oc_chat"
            assert mark.ops == (ReplaceOp(segment=live.segments[-1]),)
            assert mark.seq > live.seq
            # A consumer that held the live state finds nothing changed.
            assert updates.xml("oc_chat") == [seg.xml for seg in live.segments]
            assert (await snapshot(bus)).segments == live.segments
