"""Content kinds beyond text and media: cards keep their visible text, system messages their filled
template, shared cards name what was shared, ``at`` elements resolve by open_id, and placeholder kinds
arrive JSON-wrapped or not."""

from __future__ import annotations

import json

import pytest

from larkbot.canonical.content import Mention, Text
from larkbot.ingress_feishu.core.cards import card_lines, card_title, system_text
from larkbot.ingress_feishu.core.content import MentionRef, parse_content
from larkbot.ingress_feishu.core.errors import MalformedPayload

BOB = "ou_3c5a9f2b7e1d4c8a6b0e9f1d2c3b4a5e"


def parse(message_type: str, content: object, **kwargs: object) -> str:
    raw = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    parsed, _ = parse_content(message_type, raw, kwargs.pop("mentions", {}), "$.c", "e", **kwargs)  # type: ignore[arg-type]
    return parsed.plain_text()


def test_a_card_keeps_its_visible_text_and_skips_what_a_reader_does_not_see() -> None:
    card = {
        "i18n_header": {"en_us": {"title": {"tag": "plain_text", "content": "Alert"}}},
        "i18n_elements": {
            "en_us": [
                {"tag": "div", "text": {"tag": "lark_md", "content": "disk <at id=ou_1>Ann</at> 91%"}},
                {
                    "tag": "action",
                    "actions": [
                        {
                            "tag": "button",
                            "text": {"tag": "plain_text", "content": "Ack"},
                            "value": {"secret": "x"},
                            "confirm": {"title": {"tag": "plain_text", "content": "Sure?"}},
                        }
                    ],
                },
            ],
            "zh_cn": [{"tag": "markdown", "content": "磁盘"}],
        },
        "card_link": {"url": "https://example.org"},
    }
    assert card_title(card) == "Alert"
    assert card_lines(card) == ["disk @Ann 91%", "Ack"]
    assert parse("interactive", card) == "[card: Alert]\ndisk @Ann 91%\nAck"
    assert parse("interactive", {"elements": []}) == "[card]"


INVITE = {"template": "{from_user} invited {to_chatters}.", "from_user": ["A"], "to_chatters": ["B", "C"]}
RENAME = {"template": "{from_user} renamed the group to {group_name}.", "from_user": ["A"]}


@pytest.mark.parametrize(
    ("content", "text"),
    [
        (INVITE, "A invited B, C."),
        ({"template": "{divider_text}", "divider_text": {"text": "2026-01-01"}}, "2026-01-01"),
        (RENAME, "A renamed the group to …."),
        ({"divider_text": {}}, ""),
    ],
)
def test_a_system_message_is_its_template_filled(content: dict[str, object], text: str) -> None:
    assert system_text(content) == text


def test_shared_cards_name_what_the_caller_knows() -> None:
    names = {BOB: "Bob Li", "oc_1": "Dinner crew"}
    assert parse("share_user", {"user_id": BOB}, names=names) == "[shared contact: Bob Li]"
    assert parse("share_chat", {"chat_id": "oc_1"}, names=names) == "[shared group: Dinner crew]"
    assert parse("share_chat", {"chat_id": "oc_2"}, names=names) == "[shared group]"


def test_placeholder_kinds_arrive_json_wrapped_or_as_the_plain_string() -> None:
    wrapped = parse("merge_forward", {"content": "Merged and Forwarded Message"})
    plain = parse("merge_forward", "Merged and Forwarded Message")
    assert wrapped == plain == "[merged and forwarded messages]"
    with pytest.raises(MalformedPayload, match="not JSON"):
        parse("text", "hello")  # a kind that needs its content still needs JSON


def test_an_at_element_resolves_by_key_or_by_open_id() -> None:
    mentions = {"@_user_1": MentionRef(BOB, "Bob Li")}
    post = {
        "content": [
            [
                {"tag": "at", "user_id": "@_user_1", "user_name": "ignored"},
                {"tag": "at", "open_id": BOB},
                {"tag": "at", "user_id": BOB, "user_name": "Bobby"},
                {"tag": "at", "open_id": "ou_unknown", "user_name": "Zed"},
                {"tag": "at", "user_id": "all"},
            ]
        ]
    }
    content, _ = parse_content("post", json.dumps(post), mentions, "$.c", "e")
    assert content.nodes == (
        Mention(user_id=BOB, text="@Bob Li"),
        Mention(user_id=BOB, text="@Bob Li"),
        Mention(user_id=BOB, text="@Bob Li"),
        Mention(user_id="ou_unknown", text="@Zed"),
        Mention(text="@all"),
    )
    assert not any(isinstance(n, Text) for n in content.nodes)
