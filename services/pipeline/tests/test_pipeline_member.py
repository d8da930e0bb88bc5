"""``pipeline.member``: what the pipeline observed of one member, from the persisted events — distinct
messages (deleted ones included, edits and repeated copies adding none), surviving compaction; and the
0004 migration giving rows stored before it their author."""

from __future__ import annotations

from sqlalchemy import text

from larkbot.canonical.codec import encode
from larkbot.canonical.context import ContextSnapshot, CursorMove, MemberRequest, MemberResponse
from larkbot.canonical.names import SUBJECT_PIPELINE_CURSOR, SUBJECT_PIPELINE_MEMBER, Platform
from larkbot.pipeline.app import MIGRATIONS
from larkbot.pipeline.core import alias_for
from larkbot.runtime.bus import Bus
from larkbot.runtime.db import create_engine, migrate
from larkbot.testkit.pipeline import synthetic as s

from .test_pipeline_service import TIMEOUT, config, pipeline, publish, snapshot, watching

ALICE = s.person("ou_alice", "Alice")
BOB = s.person("ou_bob", "Bob")


async def member(bus: Bus, user_id: str, **extra: int) -> MemberResponse:
    request = MemberRequest(platform=Platform.FEISHU, chat_id="oc_chat", user_id=user_id, **extra)
    return await bus.request(SUBJECT_PIPELINE_MEMBER, request, MemberResponse, timeout_s=TIMEOUT)


async def test_member_counts_distinct_messages_with_deleted_ones_and_survives_compaction(
    bus: Bus, nats_url: str, database_url: str
) -> None:
    events = [
        s.message("om_1", "one", sender=ALICE, at=s.BASE_SEC + 1),
        s.message("om_2", "two", sender=ALICE, at=s.BASE_SEC + 2),
        s.message("om_3", "three", sender=ALICE, at=s.BASE_SEC + 3),
        s.message("om_4", "four", sender=ALICE, at=s.BASE_SEC + 4),
        s.message("om_b1", "bob here", sender=BOB, at=s.BASE_SEC + 5),
        # Edits and a second copy of the same message id add no message.
        s.edit("om_1", "one, edited", at=s.BASE_SEC + 10),
        s.edit("om_1", "one, edited again", at=s.BASE_SEC + 11),
        s.message("om_4", "four", sender=ALICE, at=s.BASE_SEC + 4, dedup="om_4:echo"),
        # One message deleted alone, two in one delete event (no message id on its row).
        s.delete("om_2", at=s.BASE_SEC + 20),
        s.delete("om_3", "om_b1", at=s.BASE_SEC + 21),
        s.message("om_end", "the last one", sender=s.person("ou_carol", "Carol"), at=s.BASE_SEC + 30),
    ]
    cfg = config(database_url)
    async with watching(bus) as updates, pipeline(bus, nats_url, cfg):
        await publish(bus, *events)
        await updates.until(lambda: "the last one" in "".join(updates.xml("oc_chat")))
        # Compaction moves everything out of the context: the count comes from the events table.
        cursor = (await snapshot(bus)).segments[-1].event_seq
        await bus.request(
            SUBJECT_PIPELINE_CURSOR,
            CursorMove(platform=Platform.FEISHU, chat_id="oc_chat", cursor=cursor, reason="compaction"),
            ContextSnapshot,
            timeout_s=TIMEOUT,
        )
        assert (await snapshot(bus)).segments == ()

        alice = await member(bus, "ou_alice")
        bob = await member(bus, "ou_bob")
        newest = await member(bus, "ou_alice", max_messages=1)
        none = await member(bus, "ou_alice", max_messages=0)
        stranger = await member(bus, "ou_nobody")

    assert alice.user_id == "ou_alice"
    assert alice.message_count == 4
    assert [(m.message_id, m.alias, m.timestamp_sec) for m in alice.messages] == [
        ("om_1", alias_for("oc_chat", "om_1"), s.BASE_SEC + 1),
        ("om_4", alias_for("oc_chat", "om_4"), s.BASE_SEC + 4),
    ]
    assert (bob.message_count, bob.messages) == (1, ())
    assert [m.message_id for m in newest.messages] == ["om_4"]
    assert newest.message_count == 4
    assert (none.message_count, none.messages) == (4, ())
    assert (stranger.message_count, stranger.messages) == (0, ())


async def test_member_ids_are_canonical_without_aliasing(bus: Bus, nats_url: str, database_url: str) -> None:
    cfg = config(database_url, chats={"default": {"alias_message_ids": False}, "feishu:oc_chat": {}})
    async with watching(bus) as updates, pipeline(bus, nats_url, cfg):
        await publish(bus, s.message("om_1", "hello", sender=ALICE))
        await updates.until(lambda: "hello" in "".join(updates.xml("oc_chat")))
        found = await member(bus, "ou_alice")
    assert [(m.message_id, m.alias) for m in found.messages] == [("om_1", None)]


async def test_migration_gives_rows_stored_before_it_their_author(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        await migrate(engine, MIGRATIONS, "0003")
        rows = [s.message("om_1", "hi", sender=ALICE), s.edit("om_1", "hi!"), s.delete("om_1")]
        async with engine.begin() as conn:
            for event in rows:
                await conn.execute(
                    text(
                        "INSERT INTO events (platform, chat_id, dedup_key, kind, message_id, received_at_ms, "
                        "timestamp_sec, payload) VALUES ('feishu', 'oc_chat', :dedup, :kind, :message, "
                        ":received, :ts, :payload)"
                    ),
                    {
                        "dedup": event.dedup_key,
                        "kind": event.kind,
                        "message": "om_1",
                        "received": event.received_at_ms,
                        "ts": event.timestamp_sec,
                        "payload": encode(event).decode(),
                    },
                )
        await migrate(engine, MIGRATIONS)
        async with engine.connect() as conn:
            found = (await conn.execute(text("SELECT kind, sender_id FROM events ORDER BY id"))).all()
    finally:
        await engine.dispose()
    assert [tuple(row) for row in found] == [("message", "ou_alice"), ("edit", None), ("delete", None)]
