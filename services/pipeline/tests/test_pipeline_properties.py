"""Property tests: replay equals live, appends never rewrite the prefix, ops reproduce the segments."""

from __future__ import annotations

from xml.etree import ElementTree

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from larkbot.canonical.content import Bold, Content, Mention, Text
from larkbot.canonical.context import AppendOp, ContextOp, ReplaceOp, ResetOp, Segment
from larkbot.canonical.events import (
    CanonicalEvent,
    ChatNotice,
    ChatRenamed,
    ForwardInfo,
    MembersJoined,
    MessagePinned,
    QuotedMessage,
    TopicChanged,
)
from larkbot.canonical.names import Platform
from larkbot.pipeline.core import Projection, RenderParams, replay, replay_chat
from larkbot.testkit.pipeline import synthetic as s

PARAMS = RenderParams(
    Platform.FEISHU,
    "oc_chat",
    bot_user_id="ou_bot",
    maintainers=frozenset({"ou_u1"}),
    blocked_users=frozenset({"ou_u3"}),
    alias_message_ids=True,
    deployment_utc_offset_min=480,
)
USERS = [s.person("ou_bot", "Lark", is_bot=True, username="lark_bot")] + [
    s.person(f"ou_u{i}", f"U{i}", username=f"u{i}" if i % 2 else None) for i in range(1, 5)
]
USERNAMES = [None, "u1", "u2", "U3", "taken"]
MENTIONS = [
    (),
    (Mention(text="@u1"), Text(text=" hi")),
    (Mention(text="@U2"),),
    (Bold(children=(Mention(text="@taken"),)),),
    (Mention(user_id="ou_u4", text="U4"), Text(text=" and "), Mention(text="@lark_bot")),
]
IDS = [f"om_{i}" for i in range(8)]
EMBEDDED = [None, QuotedMessage(sender=USERS[2], content=Content.from_text("embedded"))]
FORWARDS = [None, ForwardInfo(from_name="Zed"), ForwardInfo(from_chat_id="-100", from_chat_title="News")]


@st.composite
def events(draw: st.DrawFn) -> list[CanonicalEvent]:
    out: list[CanonicalEvent] = []
    at = float(s.BASE_SEC)
    for n in range(draw(st.integers(0, 40))):
        at += draw(st.sampled_from([0, 1, 30, 400, -1, -200]))  # re-pushes arrive with earlier times
        kind = draw(
            st.sampled_from(["msg", "msg", "msg", "self", "edit", "delete", "react", "svc", "rt", "dup"])
        )
        mid = draw(st.sampled_from(IDS))
        who = draw(st.sampled_from(USERS))
        if draw(st.booleans()) and kind in ("msg", "edit"):
            who = s.person(
                who.id,
                draw(st.sampled_from(["Renamed", who.display_name])),
                is_bot=who.is_bot,
                username=draw(st.sampled_from(USERNAMES)),
            )
        late = draw(st.sampled_from([None, int(at * 1000) + 500_000]))
        event: CanonicalEvent
        if kind == "dup" and out:
            event = draw(st.sampled_from(out))
        elif kind in ("msg", "dup"):
            text = draw(st.sampled_from(["hi", "", "a <b>", "long " * 30]))
            event = s.message(
                mid,
                Content(nodes=(*draw(st.sampled_from(MENTIONS)), *Content.from_text(text).nodes)),
                sender=who,
                at=at,
                received_ms=late,
                reply_to=draw(st.sampled_from([None, *IDS])),
                attachments=draw(st.sampled_from([(), (s.photo(thumbnail_key="th"),)])),
                dedup=f"m{n}",
            ).model_copy(
                update={
                    "reply_target": draw(st.sampled_from(EMBEDDED)),
                    "thread_id": draw(st.sampled_from([None, "7", "9"])),
                    "thread_name": draw(st.sampled_from([None, "Bugs", "Ideas"])),
                    "forward_info": draw(st.sampled_from(FORWARDS)),
                }
            )
        elif kind == "self":
            event = s.message(mid, "mine", sender=USERS[0], at=at, self_sent=True, dedup=f"s{n}")
        elif kind == "edit":
            event = s.edit(
                mid,
                draw(st.sampled_from(["edited", "x"])),
                at=at,
                dedup=f"e{n}",
                sender=draw(st.sampled_from([None, who])),
                sent_at=draw(st.sampled_from([None, at - 500])),
                nodes=draw(st.sampled_from([None, MENTIONS[1]])),
            )
        elif kind == "delete":
            event = s.delete(mid, dedup=f"d{n}", at=at)
        elif kind == "react":
            event = s.reaction(mid, "👍", actor=who, at=at, dedup=f"r{n}")
        elif kind == "svc":
            action = draw(
                st.sampled_from(
                    [
                        ChatRenamed(to_title="T"),
                        MembersJoined(members=(who,)),
                        MessagePinned(actor=who, message_id=mid, pinned=EMBEDDED[1]),
                        TopicChanged(change="created", thread_id="7", name="Bugs"),
                        TopicChanged(change="edited", thread_id="7", name="Crashes"),
                        TopicChanged(change="closed", actor=who, thread_id="9"),
                        ChatNotice(type="video_chat_started", actor=who, attributes=(("k", "v"),)),
                    ]
                )
            )
            event = s.service(action, at=at, dedup=f"v{n}")
        else:
            event = s.runtime("done", attributes=(("k", "v"),), at=at, dedup=f"t{n}")
        out.append(event)
    return out


def apply_ops(copy: list[Segment], ops: list[ContextOp]) -> None:
    for op in ops:
        if isinstance(op, AppendOp):
            copy.extend(op.segments)
        elif isinstance(op, ReplaceOp):
            index = next(i for i, seg in enumerate(copy) if seg.segment_id == op.segment.segment_id)
            copy[index] = op.segment
        elif isinstance(op, ResetOp):
            copy[:] = op.segments


def live(stream: list[CanonicalEvent]) -> tuple[Projection, list[tuple[int, CanonicalEvent]], list[Segment]]:
    """What the service does: the unique key drops redeliveries, each committed event gets the next id."""
    projection = Projection(PARAMS)
    committed: list[tuple[int, CanonicalEvent]] = []
    seen: set[str] = set()
    consumer: list[Segment] = []
    for event in stream:
        if event.dedup_key in seen:
            continue
        seen.add(event.dedup_key)
        seq = len(committed) * 3 + 7  # ids are increasing, not contiguous (other chats interleave)
        committed.append((seq, event))
        before = [seg.xml for seg in projection.segments]
        ops = projection.apply(event, seq)
        replaced = {op.segment.segment_id for op in ops if isinstance(op, ReplaceOp)}
        after = projection.segments
        # Append-only: every earlier segment not explicitly replaced keeps its bytes.
        for index, xml in enumerate(before):
            if after[index].segment_id not in replaced:
                assert after[index].xml == xml
        apply_ops(consumer, ops)
    return projection, committed, consumer


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events())
def test_cold_replay_equals_live(stream: list[CanonicalEvent]) -> None:
    projection, committed, consumer = live(stream)
    replayed = replay(committed, PARAMS)
    assert replayed.ic == projection.ic
    assert replayed.segments == projection.segments
    assert consumer == list(projection.segments)
    assert replay_chat(stream, PARAMS) == projection.xml()


@settings(max_examples=100, deadline=None)
@given(events(), st.integers(0, 40))
def test_replay_from_a_cursor_equals_a_live_rebuild_from_the_cursor(
    stream: list[CanonicalEvent], cut: int
) -> None:
    _, committed, _ = live(stream)
    cursor = committed[min(cut, len(committed)) - 1][0] if committed and cut else 0
    after = [(seq, event) for seq, event in committed if seq > cursor]
    rebuilt = replay(after, PARAMS, cursor=cursor)
    assert all(seg.event_seq > cursor for seg in rebuilt.segments)
    again = Projection(PARAMS, cursor=cursor)
    for seq, event in after:
        again.apply(event, seq)
    assert again.ic == rebuilt.ic
    assert again.xml() == rebuilt.xml()


@settings(max_examples=100, deadline=None)
@given(events())
def test_full_rerender_equals_incremental_rendering(stream: list[CanonicalEvent]) -> None:
    projection, _, _ = live(stream)
    incremental = projection.segments
    assert projection.rerender().segments == incremental


@settings(max_examples=100, deadline=None)
@given(events())
def test_provenance_fields_agree_with_the_rendered_attributes(stream: list[CanonicalEvent]) -> None:
    projection, _, _ = live(stream)
    for segment in projection.segments:
        if segment.node_type != "message":
            assert (segment.is_forwarded, segment.reply_to_message_id) == (False, None)
            continue
        element = ElementTree.fromstring(segment.xml)
        flags = {name for name, value in element.attrib.items() if value == "true"}
        assert ("myself" in flags) == segment.is_myself
        assert ("bot" in flags) == (segment.is_bot and not segment.is_myself)
        assert ("deleted" in flags) == segment.is_deleted
        assert ("forwarded_from" in element.attrib) == segment.is_forwarded
        reply = element.find("in-reply-to")
        if reply is not None:
            assert segment.reply_to_message_id is not None
            assert reply.get("id") == projection.shown_id(segment.reply_to_message_id)
        elif len(element) or element.text:
            assert segment.reply_to_message_id is None
