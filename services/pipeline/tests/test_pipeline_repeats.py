"""An event whose dedup key is already taken: a redelivery passes silently, a conflict never does."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from larkbot.canonical.codec import decode_as
from larkbot.canonical.content import Attachment, AttachmentType
from larkbot.canonical.events import EVENT_ADAPTER, MessageEvent
from larkbot.canonical.fingerprint import event_fingerprint
from larkbot.canonical.names import STREAM_DEAD_LETTER
from larkbot.pipeline.adapters.repository import EventRepository
from larkbot.pipeline.adapters.writes import NewEvent, Stored
from larkbot.pipeline.app import MIGRATIONS
from larkbot.pipeline.core.repeats import classify
from larkbot.runtime.bus import Bus
from larkbot.runtime.db import create_engine, migrate
from larkbot.testkit.pipeline import synthetic as s

from .test_pipeline_service import config, pipeline, publish, snapshot, watching

ALICE = s.person("ou_alice", "Alice")


def events_total(kind: str, outcome: str) -> float:
    labels = {"kind": kind, "outcome": outcome}
    return REGISTRY.get_sample_value("larkbot_pipeline_events_total", labels) or 0.0


# -- the rule (pure) -----------------------------------------------------------------------------------
def test_a_redelivery_differs_only_in_what_each_delivery_captures() -> None:
    photo = Attachment(type=AttachmentType.PHOTO, file_id="img_1", mime="image/png")
    first = s.message("om_1", "hi", sender=ALICE, attachments=(photo,))
    again = s.message(
        "om_1",
        "hi",
        sender=s.person("ou_alice", "Alice Wang"),  # the contact name arrived in between
        received_ms=first.received_at_ms + 3_600_000,  # Feishu's re-push an hour later
        offset=0,  # taken by a replica in another zone
        attachments=(photo.model_copy(update={"content_hash": "sha256:ab", "thumbnail_key": "sha256:cd"}),),
    ).model_copy(update={"event_id": "ev_other"})
    assert event_fingerprint(first) == event_fingerprint(again)
    assert classify(again, first) == "duplicate"


@pytest.mark.parametrize(
    "other",
    [
        s.message("om_1", "something else", sender=ALICE),
        s.message("om_1", "hi", sender=s.person("ou_mallory", "Alice")),
        s.message("om_1", "hi", sender=ALICE, reply_to="om_0"),
        s.message("om_1", "hi", sender=ALICE, at=s.BASE_SEC + 60),
        s.reaction("om_1", "👍", dedup="om_1"),
    ],
)
def test_anything_else_under_the_key_is_a_conflict(other: object) -> None:
    first = s.message("om_1", "hi", sender=ALICE)
    assert classify(first, other) == "conflict"  # type: ignore[arg-type]


def test_the_platform_echo_of_a_self_sent_copy_is_expected() -> None:
    bot = s.person("ou_bot", "LarkBot", is_bot=True)
    synthetic = s.message("om_9", "**hi**", sender=bot, self_sent=True)
    echo = s.message("om_9", "hi", sender=bot)
    assert classify(synthetic, echo) == "self_echo"
    assert classify(echo, synthetic) == "self_echo"


def test_the_platforms_recall_event_of_a_deletion_the_bot_made_is_a_duplicate() -> None:
    by_bot = s.delete("om_5").model_copy(update={"actor_id": "ou_bot"})
    by_platform = s.delete("om_5", at=s.BASE_SEC + 121).model_copy(update={"actor_id": "ou_operator"})
    assert classify(by_bot, by_platform) == "duplicate"
    assert classify(by_platform, by_bot) == "duplicate"
    assert classify(by_bot, s.delete("om_5", "om_6", dedup="recall:om_5")) == "conflict"


# -- the repository: the holder of a taken key ---------------------------------------------------------
async def test_commit_returns_the_copy_holding_a_taken_key(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        await migrate(engine, MIGRATIONS)
        repo = EventRepository(engine)
        first = s.message("om_1", "hi", sender=ALICE)
        [stored_id] = await repo.commit([NewEvent(first)])
        assert isinstance(stored_id, int)
        other = s.message("om_1", "other", sender=ALICE)
        fresh = s.message("om_2", "new", sender=ALICE)
        again = s.message("om_2", "newer", sender=ALICE)
        ids = await repo.commit([NewEvent(other), NewEvent(fresh), NewEvent(again)])
        assert ids[0] == Stored(stored_id, first)
        assert isinstance(ids[1], int)
        assert ids[2] == Stored(ids[1], fresh)
        assert await repo.commit([NewEvent(s.message("om_3", "x", sender=ALICE))]) == [ids[1] + 1]
    finally:
        await engine.dispose()


# -- the service ---------------------------------------------------------------------------------------
async def test_a_reused_key_is_logged_counted_and_dead_lettered_and_the_first_copy_stays(
    bus: Bus, nats_url: str, database_url: str
) -> None:
    cfg = config(database_url)
    first = s.message("om_1", "the original", sender=ALICE)
    redelivery = s.message("om_1", "the original", sender=s.person("ou_alice", "Alice Wang"), received_ms=1)
    reused = s.message("om_1", "a different message", sender=s.person("ou_bob", "Bob"))
    duplicates = events_total("message", "duplicate")
    conflicts = events_total("message", "conflict")
    async with watching(bus) as updates, pipeline(bus, nats_url, cfg):
        await publish(bus, first)
        await updates.until(lambda: bool(updates.copies.get("oc_chat")))
        await publish(bus, redelivery, reused, unique_msg_id=True)
        await publish(bus, s.message("om_2", "after", sender=ALICE))
        await updates.until(lambda: len(updates.copies.get("oc_chat", [])) == 2)
        xml = "".join(seg.xml for seg in (await snapshot(bus)).segments)
    assert "the original" in xml
    assert "a different message" not in xml
    assert events_total("message", "duplicate") == duplicates + 1
    assert events_total("message", "conflict") == conflicts + 1
    info = await bus.js.stream_info(STREAM_DEAD_LETTER)
    assert info.state.messages == 1
    record = await bus.js.get_msg(STREAM_DEAD_LETTER, info.state.last_seq)
    headers = dict(record.headers or {})
    assert headers["Larkbot-Dead-Letter-Reason"] == "conflict"
    assert "'om_1'" in headers["Larkbot-Dead-Letter-Error"]
    # Held by row 1, or by the redelivery still queued ahead of it in the same read: either way not this.
    assert "with different content" in headers["Larkbot-Dead-Letter-Error"]
    kept = decode_as(record.data or b"", EVENT_ADAPTER)
    assert isinstance(kept, MessageEvent)
    assert kept.sender.id == "ou_bob"
