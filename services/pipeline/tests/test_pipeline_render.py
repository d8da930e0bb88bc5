"""Golden fixtures: the rendered XML of every element kind, pinned byte for byte."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from larkbot.canonical.content import (
    Attachment,
    AttachmentType,
    Blockquote,
    Bold,
    Code,
    CustomEmoji,
    Inline,
    Italic,
    Link,
    Mention,
    Pre,
    Spoiler,
    Strikethrough,
    Text,
    Underline,
)
from larkbot.canonical.context import AppendOp
from larkbot.canonical.events import (
    BotAdded,
    BotRemoved,
    CanonicalEvent,
    ChatPhotoChanged,
    ChatRenamed,
    ForwardInfo,
    MemberLeft,
    MembersJoined,
    MessageEvent,
    MessagePinned,
    Sender,
)
from larkbot.canonical.names import Platform
from larkbot.pipeline.core import Projection, RenderParams, alias_for
from larkbot.pipeline.core.timefmt import format_time
from larkbot.testkit.pipeline import synthetic as s

ALICE = s.person("ou_alice", "Alice")
BOT = s.person("ou_bot", "Lark", is_bot=True)
FEISHU = RenderParams(Platform.FEISHU, "oc_chat", bot_user_id="ou_bot", deployment_utc_offset_min=480)
TELEGRAM = RenderParams(
    Platform.TELEGRAM, "-100", bot_user_id="42", bot_username="larkbot", deployment_utc_offset_min=480
)


def rendered(events: Sequence[CanonicalEvent], params: RenderParams = FEISHU) -> list[str]:
    projection = Projection(params)
    for event in events:
        projection.apply(event)
    return [segment.xml for segment in projection.segments]


def last(events: Sequence[CanonicalEvent], params: RenderParams = FEISHU) -> str:
    return rendered(events, params)[-1]


T = 't="01-02 11:04:05"'


@pytest.mark.parametrize(
    ("nodes", "body"),
    [
        ((Text(text="plain"),), "plain"),
        ((Bold(children=(Text(text="b"),)),), "<b>b</b>"),
        ((Italic(children=(Text(text="i"),)),), "<i>i</i>"),
        ((Underline(children=(Text(text="u"),)),), "<u>u</u>"),
        ((Strikethrough(children=(Text(text="s"),)),), "<s>s</s>"),
        ((Spoiler(children=(Text(text="x"),)),), "<spoiler>x</spoiler>"),
        ((Code(text="a<b"),), "<code>a&lt;b</code>"),
        ((Pre(text="x = 1\ny = 2", lang="py"),), '<pre lang="py">x = 1\ny = 2</pre>'),
        ((Pre(text="raw"),), "<pre>raw</pre>"),
        (
            (Link(url="https://e.x/?a=1&b=2", children=(Text(text="site"),)),),
            '<a href="https://e.x/?a=1&amp;b=2">site</a>',
        ),
        ((Link(url="https://e.x", children=()),), '<a href="https://e.x">https://e.x</a>'),
        ((Blockquote(children=(Text(text="q"),)),), "<blockquote>q</blockquote>"),
        ((Mention(user_id="ou_bob", text="@Bob"),), '<mention uid="ou_bob">@Bob</mention>'),
        ((Mention(user_id="ou_alice", text="@Alice"),), "<mention>@Alice</mention>"),
        ((Mention(text="@all"),), "<mention>@all</mention>"),
        ((CustomEmoji(alt="😀", pack="cats", emoji_id="e1"),), '<custom-emoji pack="cats">😀</custom-emoji>'),
        ((CustomEmoji(alt="[smile]"),), "<custom-emoji>[smile]</custom-emoji>"),
        (
            (Bold(children=(Italic(children=(Text(text="both"),)), Text(text="!"))),),
            "<b><i>both</i>!</b>",
        ),
    ],
)
def test_inline_elements(nodes: tuple[object, ...], body: str) -> None:
    xml = last([s.message("om_1", nodes=nodes, sender=ALICE)])  # type: ignore[arg-type]
    assert xml == f'<message id="om_1" sender="Alice" uid="ou_alice" {T}>{body}</message>'


def tg(message_id: str, sender: Sender, *nodes: Inline, at: float = s.BASE_SEC) -> MessageEvent:
    return s.message(message_id, nodes=nodes, sender=sender, chat="-100", platform=Platform.TELEGRAM, at=at)


EVE = s.person("5", "Eve", username="eve_5")
XAVIER_A = s.person("1001", "Xavier", username="xav")
XAVIER_B = s.person("1002", "Xavier")


def test_telegram_renders_uid_by_the_feishu_rules() -> None:
    """Two members of one name told apart; ``text_mention`` carries its user; a self-mention omits it."""
    assert rendered(
        [
            tg("7", EVE, Mention(user_id="1001", text="Xavier"), Text(text=" hi")),
            tg("8", XAVIER_A, Text(text="a")),
            tg("9", XAVIER_B, Text(text="b")),
            tg("10", EVE, Mention(user_id="5", text="me"), Text(text="+"), Mention(user_id="1002", text="X")),
            tg("11", s.person("-1009", ""), Text(text="anonymous")),
        ],
        TELEGRAM,
    ) == [
        f'<message id="7" sender="Eve" uid="5" {T}><mention uid="1001">Xavier</mention> hi</message>',
        f'<message id="8" sender="Xavier" uid="1001" {T}>a</message>',
        f'<message id="9" sender="Xavier" uid="1002" {T}>b</message>',
        f'<message id="10" sender="Eve" uid="5" {T}><mention>me</mention>+<mention uid="1002">X</mention>'
        "</message>",
        f'<message id="11" sender="-1009" {T}>anonymous</message>',
    ]


def test_telegram_events_carry_the_uid_too() -> None:
    renamed = s.person("5", "Eve Q", username="eve_5")
    xml = rendered(
        [
            tg("7", EVE, Text(text="a")),
            s.reaction("7", "👍", actor=XAVIER_A, chat="-100", platform=Platform.TELEGRAM),
            s.service(MembersJoined(actor=EVE, members=(XAVIER_B,)), chat="-100", platform=Platform.TELEGRAM),
            tg("8", renamed, Text(text="b"), at=s.BASE_SEC + 50),
        ],
        TELEGRAM,
    )
    assert xml[1:4] == [
        '<event type="reaction" t="01-02 11:04:35" emoji="👍" actor="Xavier" uid="1001" message_id="7"/>',
        '<event type="members_joined" t="01-02 11:04:45" actor="Eve" uid="5" members="Xavier"/>',
        '<event type="name_change" t="01-02 11:04:55" from_name="Eve" to_name="Eve Q" uid="5"/>',
    ]


def test_a_bare_username_mention_resolves_to_the_user_earlier_messages_showed_with_it() -> None:
    """Resolved from the chat's user table as it stood when the message arrived, and kept: a later message
    that teaches a username never rewrites an earlier segment, and a full re-render gives the same bytes."""
    projection = Projection(TELEGRAM)
    events = [
        tg("20", EVE, Mention(text="@xav"), Text(text=" are you there?")),  # nobody seen as @xav yet
        tg("21", XAVIER_A, Text(text="yes")),
        tg("22", EVE, Bold(children=(Mention(text="@XAV"),)), Text(text=" ok")),  # case-insensitive, nested
        tg("23", XAVIER_A, Mention(text="@xav"), Text(text=" is me")),  # a self-mention omits the uid
        tg("24", s.person("1001", "Xavier", username="xavier_new"), Text(text="renamed my handle")),
        tg("25", EVE, Mention(text="@xav"), Text(text=" still?")),  # no longer held by anyone seen
        tg("26", EVE, Mention(text="@xavier_new"), Text(text=" hi")),
    ]
    seen: list[str] = []
    for event in events:
        projection.apply(event)
        assert [seg.xml for seg in projection.segments[: len(seen)]] == seen
        seen = [seg.xml for seg in projection.segments]
    assert seen == [
        f'<message id="20" sender="Eve" uid="5" {T}><mention>@xav</mention> are you there?</message>',
        f'<message id="21" sender="Xavier" uid="1001" {T}>yes</message>',
        f'<message id="22" sender="Eve" uid="5" {T}><b><mention uid="1001">@XAV</mention></b> ok</message>',
        f'<message id="23" sender="Xavier" uid="1001" {T}><mention>@xav</mention> is me</message>',
        f'<message id="24" sender="Xavier" uid="1001" {T}>renamed my handle</message>',
        f'<message id="25" sender="Eve" uid="5" {T}><mention>@xav</mention> still?</message>',
        f'<message id="26" sender="Eve" uid="5" {T}><mention uid="1001">@xavier_new</mention> hi</message>',
    ]
    assert [seg.xml for seg in projection.rerender().segments] == seen


def test_a_username_taken_over_resolves_to_its_new_holder_and_edits_resolve_at_edit_time() -> None:
    projection = Projection(TELEGRAM)
    for event in [
        tg("30", XAVIER_A, Text(text="a")),
        tg("31", EVE, Mention(text="@xav"), Text(text=" x")),
        tg("32", s.person("1003", "Zed", username="Xav"), Text(text="I am @xav now")),
        tg("33", EVE, Mention(text="@xav"), Text(text=" y")),
        s.edit(
            "30",
            "",
            chat="-100",
            platform=Platform.TELEGRAM,
            sender=s.person("1001", "Xavier"),  # its username now released
            nodes=(Mention(text="@xav"),),
        ),
    ]:
        projection.apply(event)
    xml = [seg.xml for seg in projection.segments]
    assert '<mention uid="1001">@xav</mention> x' in xml[1]
    assert '<mention uid="1003">@xav</mention> y' in xml[3]
    assert xml[0] == (
        f'<message id="30" sender="Xavier" uid="1001" {T} edited="01-02 11:05:05">'
        '<mention uid="1003">@xav</mention></message>'
    )


def test_uid_is_omitted_when_the_sender_renders_as_its_id() -> None:
    xml = last([s.message("om_1", "x", sender=s.person("ou_x", ""))])
    assert xml == f'<message id="om_1" sender="ou_x" {T}>x</message>'


def test_contact_name_override_replaces_the_display_name() -> None:
    params = RenderParams(
        Platform.FEISHU, "oc_chat", contact_names={"ou_alice": "Ally"}, deployment_utc_offset_min=480
    )
    assert last([s.message("om_1", "x", sender=ALICE)], params).startswith(
        '<message id="om_1" sender="Ally" uid="ou_alice"'
    )


def test_message_flags_in_attribute_order() -> None:
    params = RenderParams(
        Platform.FEISHU,
        "oc_chat",
        bot_user_id="ou_bot",
        maintainers=frozenset({"ou_alice", "ou_bot"}),
        deployment_utc_offset_min=480,
    )
    maintainer = s.message("om_1", "a", sender=ALICE)
    other_bot = s.message("om_2", "b", sender=s.person("ou_b2", "Helper", is_bot=True))
    mine = s.message("om_3", "c", sender=BOT)
    forwarded = s.message("om_4", "d", sender=ALICE).model_copy(
        update={"forward_info": ForwardInfo(from_name="Zed <z>")}
    )
    assert rendered([maintainer, other_bot, mine, forwarded], params) == [
        f'<message id="om_1" sender="Alice" uid="ou_alice" {T} maintainer="true">a</message>',
        f'<message id="om_2" sender="Helper" uid="ou_b2" {T} bot="true">b</message>',
        f'<message id="om_3" sender="Lark" uid="ou_bot" {T} myself="true">c</message>',
        f'<message id="om_4" sender="Alice" uid="ou_alice" {T} forwarded_from="Zed &lt;z&gt;" '
        'maintainer="true">d</message>',
    ]


def test_blocked_sender_is_self_closing_without_maintainer_or_activation() -> None:
    params = RenderParams(
        Platform.FEISHU,
        "oc_chat",
        bot_user_id="ou_bot",
        maintainers=frozenset({"ou_alice"}),
        blocked_users=frozenset({"ou_alice"}),
        deployment_utc_offset_min=480,
    )
    projection = Projection(params)
    projection.apply(s.message("om_1", nodes=(Mention(user_id="ou_bot", text="@Lark"),), sender=ALICE))
    (segment,) = projection.segments
    assert segment.xml == f'<message id="om_1" sender="Alice" uid="ou_alice" {T} blocked="true"/>'
    assert not segment.mentions_me


def test_deleted_message_keeps_sender_and_time_and_loses_its_body() -> None:
    xml = rendered([s.message("om_1", "secret", sender=ALICE), s.delete("om_1")])
    assert xml == [f'<message id="om_1" sender="Alice" uid="ou_alice" {T} deleted="true"/>']


def test_edited_and_late_delivery_timestamps() -> None:
    late = s.message("om_1", "old news", sender=ALICE, received_ms=(s.BASE_SEC + 3600) * 1000)
    on_time = s.message("om_2", "fresh", sender=ALICE, received_ms=(s.BASE_SEC + 120) * 1000)
    assert rendered([late, on_time, s.edit("om_2", "fresher", at=s.BASE_SEC + 61)]) == [
        f'<message id="om_1" sender="Alice" uid="ou_alice" {T} received="01-02 12:04:05">old news</message>',
        f'<message id="om_2" sender="Alice" uid="ou_alice" {T} edited="01-02 11:05:06">fresher</message>',
    ]


def test_offset_suffix_only_when_the_event_offset_differs_from_the_deployment() -> None:
    assert format_time(s.BASE_SEC, 480, 480) == "01-02 11:04:05"
    assert format_time(s.BASE_SEC, 0, 480) == "01-02 03:04:05+00:00"
    assert format_time(s.BASE_SEC, -330, 480) == "01-01 21:34:05-05:30"
    assert format_time(s.BASE_SEC + 0.999, 480, 480) == "01-02 11:04:05"
    xml = last([s.message("om_1", "x", sender=ALICE, offset=60)])
    assert 't="01-02 04:04:05+01:00"' in xml


def test_chat_offset_setting_overrides_the_ingress_offset() -> None:
    params = RenderParams(Platform.FEISHU, "oc_chat", deployment_utc_offset_min=480, chat_utc_offset_min=540)
    assert 't="01-02 12:04:05+09:00"' in last([s.message("om_1", "x", offset=480)], params)


def test_reply_with_sender_preview_and_quote() -> None:
    events = [
        s.message("om_1", "  the original\nmessage text  ", sender=ALICE),
        s.message("om_2", "answer", sender=BOT, reply_to="om_1", quote="original"),
        s.message("om_3", "to nowhere", sender=ALICE, reply_to="om_gone"),
    ]
    projection = Projection(FEISHU)
    for event in events:
        projection.apply(event)
    first, second, third = projection.segments
    assert second.xml == (
        f'<message id="om_2" sender="Lark" uid="ou_bot" {T} myself="true">'
        '<in-reply-to id="om_1" sender="Alice" quoted="original">the original message text</in-reply-to>\n'
        "answer</message>"
    )
    assert third.xml == (
        f'<message id="om_3" sender="Alice" uid="ou_alice" {T}>'
        '<in-reply-to id="om_gone"/>\nto nowhere</message>'
    )
    projection.apply(s.message("om_4", "thanks", sender=ALICE, reply_to="om_2"))
    assert projection.segments[-1].replies_to_me
    assert not third.replies_to_me
    assert not first.replies_to_me


def test_reply_preview_is_a_snapshot_not_updated_by_later_edits() -> None:
    xml = rendered(
        [
            s.message("om_1", "before", sender=ALICE),
            s.message("om_2", "re", reply_to="om_1"),
            s.edit("om_1", "after"),
        ]
    )
    assert ">before</in-reply-to>" in xml[1]


def test_long_preview_is_clipped() -> None:
    xml = last([s.message("om_1", "x" * 200, sender=ALICE), s.message("om_2", "re", reply_to="om_1")])
    assert ">" + "x" * 79 + "…</in-reply-to>" in xml


def test_attachments_with_alt_text_thumbnail_or_metadata_only() -> None:
    photo = s.photo("img_1", width=800, height=600, thumbnail_key="th_1")
    photo_no_alt = s.photo("img_2", thumbnail_key="th_2")
    sticker = Attachment(
        type=AttachmentType.STICKER,
        file_id="st",
        sticker_pack="cats",
        sticker_emoji="😺",
        width=512,
        height=512,
    )
    animation = Attachment(type=AttachmentType.ANIMATION, file_id="an", mime="video/mp4", duration_s=2.5)
    document = Attachment(type=AttachmentType.DOCUMENT, file_id="doc", mime="application/pdf", name='a"b.pdf')
    event = s.message(
        "om_1", "look", sender=ALICE, attachments=(photo, photo_no_alt, sticker, animation, document)
    )
    projection = Projection(FEISHU, alt_texts={"th_1": "A cat <on> a mat"})
    projection.apply(event)
    (segment,) = projection.segments
    assert segment.xml == (
        f'<message id="om_1" sender="Alice" uid="ou_alice" {T}>look\n'
        '<image mime="image/jpeg" size="800x600" file-id="om_1:0">A cat &lt;on&gt; a mat</image>\n'
        '<image mime="image/jpeg" file-id="om_1:1"/>\n'
        '<sticker size="512x512" pack="cats" file-id="om_1:2">😺</sticker>\n'
        '<animation mime="video/mp4" duration="2.5s" file-id="om_1:3"/>\n'
        '<attachment type="document" mime="application/pdf" name="a&quot;b.pdf" file-id="om_1:4"/>'
        "</message>"
    )
    assert [part.blob_key for part in segment.image_parts] == ["th_2"]


def test_aliases_replace_every_message_id() -> None:
    params = RenderParams(Platform.FEISHU, "oc_chat", alias_message_ids=True, deployment_utc_offset_min=480)
    a1, a2 = alias_for("oc_chat", "om_1"), alias_for("oc_chat", "om_2")
    assert a1 == "mrgdttvgl0"
    assert len(a2) == 10
    assert a2.startswith("m")
    xml = rendered(
        [
            s.message("om_1", "x", sender=ALICE, attachments=(s.photo(),)),
            s.message("om_2", "y", sender=ALICE, reply_to="om_1"),
            s.reaction("om_1", "👍"),
            s.service(MessagePinned(message_id="om_2")),
            s.delete("om_2"),
        ],
        params,
    )
    assert xml == [
        f'<message id="{a1}" sender="Alice" uid="ou_alice" {T}>x\n'
        f'<image mime="image/jpeg" file-id="{a1}:0"/></message>',
        f'<message id="{a2}" sender="Alice" uid="ou_alice" {T} deleted="true"/>',
        f'<event type="reaction" t="01-02 11:04:35" emoji="👍" actor="Bob" uid="ou_bob" message_id="{a1}"/>',
        f'<event type="message_pinned" t="01-02 11:04:45" message_id="{a2}" sender="Alice">y</event>',
    ]


def test_alias_collision_keeps_the_first_and_shows_the_later_canonical_id() -> None:
    projection = Projection(RenderParams(Platform.FEISHU, "c", alias_message_ids=True))
    # A real 46-bit collision is not findable in a test; make "om_b"'s alias already owned by "om_a".
    projection._renderer.aliases._by_alias[alias_for("c", "om_b")] = "om_a"
    projection.apply(s.message("om_a", "a", chat="c"))
    projection.apply(s.message("om_b", "b", chat="c", reply_to="om_b"))
    assert projection.segments[0].xml.startswith(f'<message id="{alias_for("c", "om_a")}"')
    assert projection.segments[1].xml.startswith('<message id="om_b"')
    assert '<in-reply-to id="om_b"' in projection.segments[1].xml
    assert projection.resolve_alias(alias_for("c", "om_b")) == "om_a"


def test_system_events() -> None:
    carol = s.person("ou_carol", "Carol")
    xml = rendered(
        [
            s.service(MembersJoined(actor=ALICE, members=(carol, s.person("ou_dan", "Dan")))),
            s.service(MemberLeft(members=(carol,))),
            s.service(ChatRenamed(actor=ALICE, from_title="Old", to_title="New & improved")),
            s.service(ChatRenamed(to_title="Newer")),
            s.service(ChatPhotoChanged(actor=ALICE)),
            s.service(MessagePinned(message_id="om_9")),
            s.service(BotAdded(actor=ALICE)),
            s.service(BotRemoved()),
            s.reaction("om_9", "👍", removed=True),
        ]
    )
    t = 't="01-02 11:04:45"'
    assert xml == [
        f'<event type="members_joined" {t} actor="Alice" uid="ou_alice" members="Carol, Dan"/>',
        f'<event type="member_left" {t} members="Carol"/>',
        f'<event type="chat_renamed" {t} actor="Alice" uid="ou_alice" from="Old" to="New &amp; improved"/>',
        f'<event type="chat_renamed" {t} to="Newer"/>',
        f'<event type="chat_photo_changed" {t} actor="Alice" uid="ou_alice"/>',
        f'<event type="message_pinned" {t} message_id="om_9"/>',
        f'<event type="bot_added" {t} actor="Alice" uid="ou_alice"/>',
        f'<event type="bot_removed" {t}/>',
        '<event type="reaction" t="01-02 11:04:35" emoji="👍" actor="Bob" uid="ou_bob" message_id="om_9" '
        'removed="true"/>',
    ]


def test_name_change_precedes_the_renamed_senders_message() -> None:
    xml = rendered(
        [s.message("om_1", "a", sender=ALICE), s.message("om_2", "b", sender=s.person("ou_alice", "Ali"))]
    )
    assert xml[1:] == [
        f'<event type="name_change" {T} from_name="Alice" to_name="Ali" uid="ou_alice"/>',
        f'<message id="om_2" sender="Ali" uid="ou_alice" {T}>b</message>',
    ]
    assert xml[0].startswith('<message id="om_1" sender="Alice"')


def test_runtime_event_with_attributes_and_text() -> None:
    xml = last(
        [
            s.runtime(
                "task_completed",
                attributes=(("task_id", "t1"), ("t", "clash"), ("bad name", "v")),
                text="exit 0",
            )
        ]
    )
    assert xml == (
        '<runtime-event type="task_completed" t="01-02 11:04:55" task_id="t1" x-t="clash" bad_name="v">'
        "exit 0</runtime-event>"
    )
    assert last([s.runtime("tick")]) == '<runtime-event type="tick" t="01-02 11:04:55"/>'


def test_activation_flags_mentions_and_replies() -> None:
    projection = Projection(FEISHU)
    projection.apply(s.message("om_1", nodes=(Bold(children=(Mention(user_id="ou_bot", text="@Lark"),)),)))
    projection.apply(s.message("om_2", nodes=(Mention(user_id="ou_other", text="@O"),)))
    assert [seg.mentions_me for seg in projection.segments] == [True, False]
    telegram = Projection(TELEGRAM)
    telegram.apply(s.message("1", nodes=(Mention(text="@LarkBot"),), chat="-100", platform=Platform.TELEGRAM))
    assert telegram.segments[0].mentions_me


def test_myself_from_self_sent_flag_even_without_a_known_bot_id() -> None:
    params = RenderParams(Platform.FEISHU, "oc_chat", deployment_utc_offset_min=480)
    projection = Projection(params)
    projection.apply(s.message("om_1", "mine", sender=BOT, self_sent=True))
    (segment,) = projection.segments
    assert 'myself="true"' in segment.xml
    assert segment.is_myself
    assert segment.is_self_sent


def test_message_provenance_travels_beside_the_xml() -> None:
    params = RenderParams(
        Platform.FEISHU,
        "oc_chat",
        bot_user_id="ou_bot",
        blocked_users=frozenset({"ou_mallory"}),
        alias_message_ids=True,
        deployment_utc_offset_min=480,
    )
    helper = s.person("ou_b2", "Helper", is_bot=True)
    mallory = s.person("ou_mallory", "Mallory")
    forwarded = s.message("om_fwd", "news", sender=ALICE).model_copy(
        update={"forward_info": ForwardInfo(from_chat_id="-100", from_chat_title="News", from_name="Ed")}
    )
    projection = Projection(params)
    for event in [
        s.message("om_plain", "mine to remember", sender=ALICE),
        forwarded,
        s.message("om_reply", "agreed", sender=s.person("ou_bob", "Bob"), reply_to="om_plain", quote="mine"),
        s.message("om_gone", "oops", sender=ALICE, reply_to="om_plain"),
        s.delete("om_gone"),
        s.message("om_mine", "noted", sender=BOT),
        s.message("om_helper", "beep", sender=helper),
        s.message("om_blocked", "spam", sender=mallory, reply_to="om_404"),
        s.reaction("om_plain", "👍"),
    ]:
        projection.apply(event)
    by_id = {seg.message_id: seg for seg in projection.segments if seg.message_id is not None}
    provenance = {
        mid: (
            seg.sender_id,
            seg.is_myself,
            seg.is_bot,
            seg.is_deleted,
            seg.is_forwarded,
            seg.reply_to_message_id,
        )
        for mid, seg in by_id.items()
    }
    assert provenance == {
        "om_plain": ("ou_alice", False, False, False, False, None),
        "om_fwd": ("ou_alice", False, False, False, True, None),
        "om_reply": ("ou_bob", False, False, False, False, "om_plain"),
        "om_gone": ("ou_alice", False, False, True, False, "om_plain"),
        "om_mine": ("ou_bot", True, True, False, False, None),
        "om_helper": ("ou_b2", False, True, False, False, None),
        "om_blocked": ("ou_mallory", False, False, False, False, "om_404"),
    }
    # The XML shows the alias of the reply target; the field carries its canonical id.
    assert f'<in-reply-to id="{alias_for("oc_chat", "om_plain")}"' in by_id["om_reply"].xml
    assert 'forwarded_from="News (Ed)"' in by_id["om_fwd"].xml
    assert by_id["om_gone"].xml.endswith('deleted="true"/>')
    assert by_id["om_blocked"].xml.endswith('blocked="true"/>')
    (reaction,) = (seg for seg in projection.segments if seg.node_type == "event")
    assert (reaction.is_forwarded, reaction.reply_to_message_id) == (False, None)


@pytest.mark.parametrize(("params", "chat", "ids"), [(FEISHU, "oc_chat", "om_"), (TELEGRAM, "-100", "")])
def test_a_message_arriving_after_a_later_one_carries_received_whatever_the_delay(
    params: RenderParams, chat: str, ids: str
) -> None:
    """Feishu re-pushed A after B and C (an ingress restart), 30 s late: arrival order stays, and A says
    when it was received so the times going backwards are explained. Same-second disorder shows nothing."""

    def at(message_id: str, sent: float, received: float) -> MessageEvent:
        return s.message(
            ids + message_id,
            message_id,
            sender=ALICE,
            chat=chat,
            platform=params.platform,
            at=s.BASE_SEC + sent,
            received_ms=int((s.BASE_SEC + received) * 1000),
        )

    uid = ' uid="ou_alice"'
    assert rendered(
        [at("B", 10, 10.2), at("C", 20.7, 21), at("A", 0, 30), at("D", 20.1, 31), at("E", 25, 32)], params
    ) == [
        f'<message id="{ids}B" sender="Alice"{uid} t="01-02 11:04:15">B</message>',
        f'<message id="{ids}C" sender="Alice"{uid} t="01-02 11:04:25">C</message>',
        f'<message id="{ids}A" sender="Alice"{uid} {T} received="01-02 11:04:35">A</message>',
        f'<message id="{ids}D" sender="Alice"{uid} t="01-02 11:04:25">D</message>',
        f'<message id="{ids}E" sender="Alice"{uid} t="01-02 11:04:30">E</message>',
    ]


@pytest.mark.parametrize(("params", "chat", "ids"), [(FEISHU, "oc_chat", "om_"), (TELEGRAM, "-100", "")])
def test_an_edit_of_a_message_never_seen_renders_as_that_message_marked_edited(
    params: RenderParams, chat: str, ids: str
) -> None:
    platform = params.platform
    bob = s.person("ou_bob", "Bob")
    projection = Projection(params)
    after = s.message(ids + "2", "after", sender=bob, chat=chat, platform=platform, at=s.BASE_SEC + 600)
    projection.apply(after)
    (op,) = projection.apply(
        s.edit(
            ids + "1",
            "fixed typo",
            chat=chat,
            platform=platform,
            sender=ALICE,
            sent_at=s.BASE_SEC,
            at=s.BASE_SEC + 900,
            received_ms=(s.BASE_SEC + 901) * 1000,
        )
    )
    assert isinstance(op, AppendOp)
    (segment,) = op.segments
    assert segment.xml == (
        f'<message id="{ids}1" sender="Alice" uid="ou_alice" {T} received="01-02 11:19:06" '
        'edited="01-02 11:19:05">fixed typo</message>'
    )
    assert (segment.segment_id, segment.sender_id) == (f"msg:{ids}1", "ou_alice")
    # Without the send time the edit's own time stands for it.
    (op,) = projection.apply(
        s.edit(ids + "3", "v2", chat=chat, platform=platform, sender=bob, at=s.BASE_SEC + 960)
    )
    assert isinstance(op, AppendOp)
    assert op.segments[0].xml == (
        f'<message id="{ids}3" sender="Bob" uid="ou_bob" t="01-02 11:20:05" edited="01-02 11:20:05">'
        "v2</message>"
    )
