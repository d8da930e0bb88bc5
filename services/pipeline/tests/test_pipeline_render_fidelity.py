"""What real groups send beyond plain messages, rendered: replies and pins whose target is outside the
context, forum topics, forwards, and notices (issue classes 3–5 and the service kinds of class 1)."""

from __future__ import annotations

from collections.abc import Sequence

from larkbot.canonical.content import AttachmentType, Content
from larkbot.canonical.events import (
    CanonicalEvent,
    ChatNotice,
    ForwardInfo,
    MessagePinned,
    QuotedMessage,
    TopicChanged,
)
from larkbot.canonical.names import Platform
from larkbot.pipeline.core import Projection, RenderParams
from larkbot.testkit.pipeline import synthetic as s

ALICE = s.person("5", "Alice")
BOB = s.person("6", "Bob")
BOT = s.person("42", "Lark", is_bot=True)
TG = RenderParams(Platform.TELEGRAM, "-100", bot_user_id="42", deployment_utc_offset_min=480)
T = 't="01-02 11:04:05"'
TS = 't="01-02 11:04:45"'


def tg_message(message_id: str, text: str = "x", **fields: object) -> CanonicalEvent:
    event = s.message(message_id, text, sender=ALICE, chat="-100", platform=Platform.TELEGRAM)
    return event.model_copy(update=fields)


def tg_service(action: object, dedup: str = "svc") -> CanonicalEvent:
    return s.service(action, chat="-100", platform=Platform.TELEGRAM, dedup=dedup)  # type: ignore[arg-type]


def rendered(events: Sequence[CanonicalEvent], params: RenderParams = TG) -> Projection:
    projection = Projection(params)
    for event in events:
        projection.apply(event)
    return projection


def xmls(events: Sequence[CanonicalEvent], params: RenderParams = TG) -> list[str]:
    return [segment.xml for segment in rendered(events, params).segments]


def test_a_reply_to_a_message_outside_the_context_shows_the_embedded_target() -> None:
    target = QuotedMessage(sender=BOB, content=Content.from_text("the plan <v2>"))
    photo = QuotedMessage(sender=BOT, attachments=(AttachmentType.PHOTO,))
    (first, second) = rendered(
        [
            tg_message("9", "agreed", reply_to_message_id="3", reply_target=target),
            tg_message("10", "nice", reply_to_message_id="4", reply_target=photo),
        ]
    ).segments
    assert first.xml == (
        f'<message id="9" sender="Alice" uid="5" {T}><in-reply-to id="3" sender="Bob">the plan &lt;v2&gt;'
        "</in-reply-to>\nagreed</message>"
    )
    assert not first.replies_to_me
    assert '<in-reply-to id="4" sender="Lark">[photo]</in-reply-to>' in second.xml
    assert second.replies_to_me


def test_the_contexts_own_copy_of_a_reply_target_wins_over_the_embedded_one() -> None:
    stale = QuotedMessage(sender=s.person("6", "Bobby"), content=Content.from_text("old text"))
    xml = xmls(
        [
            tg_message("3", "current text", sender=BOB),
            tg_message("9", "re", reply_to_message_id="3", reply_target=stale),
        ]
    )[1]
    assert '<in-reply-to id="3" sender="Bob">current text</in-reply-to>' in xml


def test_a_pin_shows_what_was_pinned() -> None:
    embedded = QuotedMessage(sender=BOB, content=Content.from_text("rules: be kind"))
    xml = xmls(
        [
            tg_message("3", "in the window"),
            tg_service(MessagePinned(actor=BOB, message_id="3"), "p1"),
            tg_service(MessagePinned(actor=BOB, message_id="1", pinned=embedded), "p2"),
            tg_service(MessagePinned(message_id="2"), "p3"),
        ]
    )
    assert xml[1:] == [
        f'<event type="message_pinned" {TS} actor="Bob" uid="6" message_id="3" sender="Alice">'
        "in the window</event>",
        f'<event type="message_pinned" {TS} actor="Bob" uid="6" message_id="1" sender="Bob">'
        "rules: be kind</event>",
        f'<event type="message_pinned" {TS} message_id="2"/>',
    ]


def test_messages_show_their_topic_as_named_when_they_arrived() -> None:
    events = [
        tg_service(TopicChanged(change="created", actor=ALICE, thread_id="7", name="Bugs"), "c"),
        tg_message("8", "crash on start", thread_id="7"),
        tg_message("9", "from an old topic", thread_id="3", thread_name="Ideas"),
        tg_message("10", "again", thread_id="3"),
        tg_message("11", "unknown", thread_id="5"),
        tg_service(TopicChanged(change="edited", actor=BOB, thread_id="7", name="Bugs & crashes"), "e"),
        tg_message("12", "still crashing", thread_id="7", thread_name="Bugs"),
        tg_service(TopicChanged(change="closed", actor=BOB, thread_id="7"), "x"),
        tg_service(TopicChanged(change="reopened", thread_id="5"), "r"),
        tg_service(TopicChanged(change="edited", thread_id="5", name="Help"), "e2"),
        tg_message("13", "general chat"),
    ]
    projection = rendered(events)
    xml = [segment.xml for segment in projection.segments]
    assert xml == [
        f'<event type="topic_created" {TS} actor="Alice" uid="5" topic="Bugs"/>',
        f'<message id="8" sender="Alice" uid="5" {T} topic="Bugs">crash on start</message>',
        f'<message id="9" sender="Alice" uid="5" {T} topic="Ideas">from an old topic</message>',
        f'<message id="10" sender="Alice" uid="5" {T} topic="Ideas">again</message>',
        f'<message id="11" sender="Alice" uid="5" {T} topic="#5">unknown</message>',
        f'<event type="topic_renamed" {TS} actor="Bob" uid="6" from="Bugs" to="Bugs &amp; crashes"/>',
        f'<message id="12" sender="Alice" uid="5" {T} topic="Bugs &amp; crashes">still crashing</message>',
        f'<event type="topic_closed" {TS} actor="Bob" uid="6" topic="Bugs &amp; crashes"/>',
        f'<event type="topic_reopened" {TS} topic="#5"/>',
        f'<event type="topic_renamed" {TS} to="Help"/>',
        f'<message id="13" sender="Alice" uid="5" {T}>general chat</message>',
    ]
    # A rename never rewrites what was rendered before it (prefix stability).
    assert projection.segments[1].xml == xml[1]


def test_forwards_name_the_person_or_the_chat_with_the_signature_beside_it() -> None:
    origins = [
        ForwardInfo(from_name="Carol", from_id="77"),
        ForwardInfo(from_name="Hidden Person"),
        ForwardInfo(from_chat_id="-1009", from_chat_title="News", from_name="Jane"),
        ForwardInfo(from_chat_id="-1009", from_chat_title="News"),
        ForwardInfo(from_chat_id="-1008"),
        ForwardInfo(),
    ]
    xml = xmls([tg_message(str(i), forward_info=o) for i, o in enumerate(origins)])
    assert [x.split("forwarded_from=")[1].split(">")[0] for x in xml] == [
        '"Carol"',
        '"Hidden Person"',
        '"News (Jane)"',
        '"News"',
        '"-1008"',
        '"hidden"',
    ]


def test_notices_render_their_type_people_attributes_and_text_escaped() -> None:
    notice = ChatNotice(
        type="video_chat_participants_invited",
        actor=ALICE,
        members=(BOB, BOT),
        attributes=(("t", "clash"), ("bad key", 'a"b'), ("duration", "1h")),
        text="Alice <b>invited</b> Bob",
    )
    (xml,) = xmls([tg_service(notice)])
    assert xml == (
        f'<event type="video_chat_participants_invited" {TS} actor="Alice" uid="5" members="Bob, Lark" '
        'x-t="clash" bad_key="a&quot;b" duration="1h">Alice &lt;b&gt;invited&lt;/b&gt; Bob</event>'
    )
    assert xmls([tg_service(ChatNotice(type="video_chat_started"))]) == [
        f'<event type="video_chat_started" {TS}/>'
    ]
