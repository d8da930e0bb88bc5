"""Table-driven tests of ``reduce`` and of the ops a projection emits per event."""

from __future__ import annotations

from larkbot.canonical.context import AppendOp, ReplaceOp
from larkbot.canonical.events import ChatRenamed
from larkbot.canonical.names import Platform
from larkbot.pipeline.core import IC, MessageNode, Projection, RenderParams, reduce, replay
from larkbot.pipeline.errors import BeforeCursor
from larkbot.testkit.pipeline import synthetic as s

PARAMS = RenderParams(Platform.FEISHU, "oc_chat", bot_user_id="ou_bot", deployment_utc_offset_min=480)
BOT = s.person("ou_bot", "Lark", is_bot=True)


def test_first_arrival_of_a_message_id_wins() -> None:
    ic = IC()
    reduce(ic, s.message("om_1", "first"), 1)
    change = reduce(ic, s.message("om_1", "second", dedup="other-key"), 2)
    assert change.empty
    node = ic.nodes[0]
    assert isinstance(node, MessageNode)
    assert node.content.plain_text() == "first"
    assert len(ic.nodes) == 1


def test_a_later_self_sent_copy_only_ors_the_flag() -> None:
    projection = Projection(PARAMS)
    projection.apply(s.message("om_1", "from platform", sender=BOT))
    ops = projection.apply(s.message("om_1", "synthetic", sender=BOT, self_sent=True, dedup="self:om_1"))
    assert [type(op) for op in ops] == [ReplaceOp]
    (segment,) = projection.segments
    assert segment.is_self_sent
    assert ">from platform</message>" in segment.xml


def test_authoritative_echo_replaces_synthetic_payload_but_keeps_its_place() -> None:
    projection = Projection(PARAMS)
    projection.apply(
        s.message("om_1", "draft", sender=BOT, self_sent=True, received_ms=1_000, dedup="self:om_1")
    )
    projection.apply(s.message("om_2", "someone else"), 2)
    ops = projection.apply(s.message("om_1", "final text", sender=BOT, received_ms=9_000), 3)
    assert [type(op) for op in ops] == [ReplaceOp]
    first, _second = projection.segments
    assert ">final text</message>" in first.xml
    assert first.received_at_ms == 1_000
    assert first.event_seq == 1
    assert first.is_self_sent
    assert first.segment_id == "msg:om_1"
    # Only the first echo is authoritative: a second copy changes nothing.
    assert projection.apply(s.message("om_1", "again", sender=BOT, dedup="x"), 4) == []


def test_edits_and_deletes_mutate_in_place_and_unknown_targets_are_ignored() -> None:
    """Unknown targets of a delete, and of an edit that names no sender (nobody to show it from)."""
    projection = Projection(PARAMS)
    projection.apply(s.message("om_1", "v1"))
    assert projection.apply(s.edit("om_404", "nope")) == []
    assert projection.apply(s.delete("om_404")) == []
    (op,) = projection.apply(s.edit("om_1", "v2"))
    assert isinstance(op, ReplaceOp)
    assert op.segment.segment_id == "msg:om_1"
    assert ">v2<" in op.segment.xml
    (op,) = projection.apply(s.delete("om_1", "om_404"))
    assert isinstance(op, ReplaceOp)
    assert op.segment.is_deleted
    assert projection.apply(s.edit("om_1", "v3", dedup="late-edit")) == []
    assert projection.apply(s.delete("om_1", dedup="again")) == []


def test_an_unseen_edited_message_then_its_original_the_first_arrival_wins() -> None:
    """The edit is the first the context hears of om_1: it becomes the message, with the newest text. The
    original arriving afterwards (a late re-push) repeats the id and changes nothing, so the model never
    sees the stale text and replay (same order of record) gives the same context; later edits and the
    delete apply to the node as to any message."""
    alice = s.person("ou_alice", "Alice")
    edit = s.edit("om_1", "v2", sender=alice, sent_at=s.BASE_SEC, at=s.BASE_SEC + 60)
    events = [
        (3, edit),
        (5, s.message("om_1", "v1", sender=alice, received_ms=(s.BASE_SEC + 90) * 1000)),
        (6, s.message("om_1", "v1", sender=alice, dedup="another-copy")),
        (8, s.edit("om_1", "v3", sender=alice, sent_at=s.BASE_SEC, at=s.BASE_SEC + 70, dedup="e3")),
    ]
    projection = Projection(PARAMS)
    ops = [projection.apply(event, seq) for seq, event in events]
    assert [[type(op) for op in o] for o in ops] == [[AppendOp], [], [], [ReplaceOp]]
    (segment,) = projection.segments
    assert segment.event_seq == 3
    assert segment.xml == (
        '<message id="om_1" sender="Alice" uid="ou_alice" t="01-02 11:04:05" edited="01-02 11:05:15">'
        "v3</message>"
    )
    replayed = replay(events, PARAMS)
    assert replayed.ic == projection.ic
    assert replayed.segments == projection.segments
    (op,) = projection.apply(s.delete("om_1"), 9)
    assert isinstance(op, ReplaceOp)
    assert op.segment.is_deleted


def test_reactions_service_and_runtime_append() -> None:
    projection = Projection(PARAMS)
    projection.apply(s.message("om_1", "x"))
    for event in (s.reaction("om_1", "👍"), s.service(ChatRenamed(to_title="T")), s.runtime("done")):
        (op,) = projection.apply(event)
        assert isinstance(op, AppendOp)
        assert len(op.segments) == 1
    assert [seg.node_type for seg in projection.segments] == ["message", "event", "event", "runtime"]
    assert projection.title == "T"


def test_rename_appends_a_name_change_node_in_the_same_op() -> None:
    projection = Projection(PARAMS)
    projection.apply(s.message("om_1", "x", sender=s.person("ou_a", "A")))
    (op,) = projection.apply(s.message("om_2", "y", sender=s.person("ou_a", "B")))
    assert isinstance(op, AppendOp)
    assert [seg.segment_id for seg in op.segments] == ["evt:2:rename", "msg:om_2"]
    assert {seg.event_seq for seg in op.segments} == {2}


def test_old_messages_keep_their_sender_snapshot() -> None:
    projection = Projection(PARAMS)
    projection.apply(s.message("om_1", "x", sender=s.person("ou_a", "Old")))
    projection.apply(s.message("om_2", "y", sender=s.person("ou_a", "New")))
    assert 'sender="Old"' in projection.segments[0].xml


def test_events_at_or_before_the_cursor_are_refused() -> None:
    projection = Projection(PARAMS, cursor=10)
    projection.apply(s.message("om_1", "x"))
    assert projection.segments[0].event_seq == 11
    try:
        projection.apply(s.message("om_2", "y"), 5)
    except BeforeCursor:
        pass
    else:  # pragma: no cover - the assertion below reports it
        raise AssertionError("an event before the cursor entered the context")


def test_rerender_with_new_identity_marks_the_bots_messages() -> None:
    projection = Projection(RenderParams(Platform.FEISHU, "oc_chat", deployment_utc_offset_min=480))
    projection.apply(s.message("om_1", "hi", sender=BOT))
    assert 'myself="true"' not in projection.xml()
    reset = projection.rerender(PARAMS)
    assert 'myself="true"' in reset.segments[0].xml
    assert projection.segments == reset.segments
