"""XML-injection fuzz: user text anywhere never yields an extra element or attribute, and reads back."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from hypothesis import given, settings
from hypothesis import strategies as st

from larkbot.canonical.content import (
    Attachment,
    AttachmentType,
    Blockquote,
    Bold,
    Code,
    Content,
    CustomEmoji,
    Link,
    Mention,
    Pre,
    Text,
)
from larkbot.canonical.events import CanonicalEvent, ChatRenamed, ForwardInfo, MembersJoined
from larkbot.canonical.names import Platform
from larkbot.pipeline.core import Projection, RenderParams
from larkbot.pipeline.core.xml import attr, text
from larkbot.testkit.pipeline import synthetic as s

PARAMS = RenderParams(Platform.FEISHU, "oc_chat", bot_user_id="ou_bot", deployment_utc_offset_min=480)
MARKUP = [
    "<",
    ">",
    "&",
    '"',
    "'",
    "]]>",
    "<![CDATA[",
    "<message>",
    "</message>",
    '" bot="true',
    "' x='1",
    "&amp;",
    "&#60;",
    "<!--",
    "-->",
    "<?xml?>",
    "\x00",
    "\x1b",
    "\r\n",
    "\t",
    "\ud800",
    "\ufffe",
    "<b>",
]
SURROGATE = re.compile("[\ud800-\udfff]")
ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")

user_text = (
    st.lists(
        st.one_of(st.sampled_from(MARKUP), st.text(st.characters(exclude_categories=()), max_size=8)),
        min_size=1,
        max_size=6,
    )
    .map("".join)
    .filter(lambda value: value.strip() != "")
)
# Wire models refuse lone surrogates (they cannot be decoded from JSON either); the escaping functions
# themselves are fuzzed with them below.
model_text = user_text.map(lambda value: SURROGATE.sub("", value)).filter(lambda value: value.strip() != "")


def events_with(u: str) -> list[CanonicalEvent]:
    """Every user-controlled field of every event kind carries ``u``."""
    who = s.person("ou_u", u)
    attachment = Attachment(
        type=AttachmentType.DOCUMENT, file_id="f", mime=u, name=u, sticker_pack=u, sticker_emoji=u
    )
    rich = (
        Text(text=u),
        Bold(children=(Text(text=u),)),
        Code(text=u),
        Pre(text=u, lang=u),
        Link(url=u, children=(Text(text=u),)),
        Mention(user_id="ou_x", text=u),
        Blockquote(children=(Text(text=u),)),
        CustomEmoji(alt=u, pack=u),
    )
    first = s.message("om_1", u, sender=who)
    second = s.message("om_2", sender=who, nodes=rich, attachments=(attachment,), reply_to="om_1", quote=u)
    forwarded = s.message("om_3", u, sender=who).model_copy(update={"forward_info": ForwardInfo(from_name=u)})
    return [
        first,
        second,
        forwarded,
        s.reaction("om_1", u, actor=who),
        s.service(MembersJoined(actor=who, members=(who, who))),
        s.service(ChatRenamed(actor=who, from_title=u, to_title=u)),
        s.runtime("done", attributes=(("k", u),), text=u),
        s.message("om_4", Content.from_text(u), sender=s.person("ou_u", u + "!")),
    ]


def shape(element: ET.Element) -> list[tuple[str, tuple[str, ...]]]:
    return [(el.tag, tuple(el.attrib)) for el in element.iter()]


def render(u: str) -> list[str]:
    projection = Projection(PARAMS)
    for event in events_with(u):
        projection.apply(event)
    return [seg.xml for seg in projection.segments]


REFERENCE = [shape(ET.fromstring(x)) for x in render("plain")]


@settings(max_examples=300, deadline=None)
@given(model_text)
def test_user_text_never_creates_elements_or_attributes(u: str) -> None:
    rendered = render(u)
    assert [shape(ET.fromstring(x)) for x in rendered] == REFERENCE
    clean = ILLEGAL.sub("\ufffd", u)
    first = ET.fromstring(rendered[0])
    assert first.text == clean
    assert first.attrib["sender"] == clean
    runtime = ET.fromstring(rendered[-3])
    assert runtime.attrib["k"] == clean
    assert runtime.text == clean


@given(st.text(st.characters(exclude_categories=())))
def test_escaped_values_parse_back_to_the_sanitised_input(u: str) -> None:
    clean = ILLEGAL.sub("\ufffd", u)
    element = ET.fromstring(f'<x a="{attr(u)}">{text(u)}</x>')
    assert element.attrib["a"] == clean
    assert (element.text or "") == clean
