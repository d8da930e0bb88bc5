"""Clipping of segments too large for the model (``core.clip``): bounded, marked, well-formed, stable."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from hypothesis import given
from hypothesis import strategies as st

from larkbot.canonical.llm import ImagePart
from larkbot.driver.wake.core.clip import clip_segment, clip_xml
from larkbot.driver.wake.core.context import ChatContext, apply_update
from larkbot.driver.wake.core.estimate import segment_tokens
from larkbot.testkit.driver.synthetic import segment

LONG = '<message id="m1" sender="Alice" t="01-02 03:04:05">' + ("word &amp; " * 20_000) + "tail?</message>"


def test_fitting_xml_is_untouched() -> None:
    assert clip_xml('<message id="m1">hi</message>', 100) == '<message id="m1">hi</message>'


def test_long_message_keeps_head_and_tail_around_a_marker() -> None:
    clipped = clip_xml(LONG, 3000)
    root = ET.fromstring(clipped)
    assert root.tag == "message"
    assert root.attrib["sender"] == "Alice"
    assert clipped.startswith('<message id="m1" sender="Alice" t="01-02 03:04:05">word &amp; ')
    assert clipped.endswith("tail?</message>")
    marker = root.find("clipped")
    assert marker is not None
    omitted = int(marker.attrib["omitted-chars"])
    # Nothing was closed or re-opened here: kept + omitted is the whole.
    assert len(clipped) - len(f'<clipped omitted-chars="{omitted}"/>') + omitted == len(LONG)
    assert len(clipped) <= 3000 + 60
    assert "&am<" not in clipped
    assert "&amp<" not in clipped


def test_elements_open_at_the_cuts_are_closed_and_reopened() -> None:
    xml = (
        '<message id="m1"><in-reply-to id="m0">short</in-reply-to><b>'
        + "bold " * 2000
        + "</b><i>"
        + "italic " * 2000
        + '</i>\n<image file-id="m1:0">a cat</image></message>'
    )
    clipped = clip_xml(xml, 2000)
    root = ET.fromstring(clipped)  # well-formed
    assert [child.tag for child in root] == ["in-reply-to", "b", "clipped", "i", "image"]
    image = root.find("image")
    assert image is not None
    assert image.attrib["file-id"] == "m1:0"


@given(
    st.lists(
        st.one_of(
            st.text(alphabet='ab<>&" \n漢字', min_size=1, max_size=40).map(
                lambda t: t.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            ),
            st.sampled_from(["<b>", "</b>", "<i>", "</i>", '<mention uid="ou_1">', "</mention>", "<br/>"]),
        ),
        max_size=200,
    ),
    st.integers(min_value=20, max_value=400),
    st.integers(min_value=0, max_value=600),
)
def test_any_clipped_message_is_well_formed(pieces: list[str], limit: int, name_length: int) -> None:
    # Balance the random tags so the input is well-formed, as the renderer's output always is.
    body: list[str] = []
    stack: list[str] = []
    for piece in pieces:
        if piece.startswith("</"):
            if stack and stack[-1] == piece[2:-1]:
                body.append(piece)
                stack.pop()
        elif piece.startswith("<") and not piece.endswith("/>"):
            body.append(piece)
            stack.append(piece[1:].split()[0].rstrip(">"))
        else:
            body.append(piece)
    body.extend(f"</{name}>" for name in reversed(stack))
    xml = f'<message id="m1" sender="{"n" * name_length}">{"".join(body)}</message>'
    clipped = clip_xml(xml, limit)
    root = ET.fromstring(clipped)
    assert root.tag == "message"
    assert clip_xml(xml, limit) == clipped  # deterministic
    if len(xml) <= limit:
        assert clipped == xml
    else:
        assert "<clipped omitted-chars=" in clipped


def test_clip_segment_respects_the_cap_and_keeps_flags_and_images() -> None:
    big = segment(1, text="z" * 100_000, mentions_me=True).model_copy(
        update={"image_parts": (ImagePart(blob_key="k", mime="image/webp"),)}
    )
    clipped = clip_segment(big, 2000)
    assert segment_tokens(clipped) <= 2000 + 50
    assert clipped.mentions_me
    assert clipped.segment_id == "om_1"
    assert clipped.image_parts == big.image_parts
    small = segment(2)
    assert clip_segment(small, 2000) is small


@pytest.mark.parametrize("op", ["append", "replace"])
def test_segments_are_clipped_as_they_enter_the_context(op: str) -> None:
    from larkbot.canonical.context import AppendOp, ContextUpdate, ReplaceOp
    from larkbot.canonical.names import Platform

    def update(seq: int, base: int, *ops: AppendOp | ReplaceOp) -> ContextUpdate:
        return ContextUpdate(
            platform=Platform.FEISHU, chat_id="oc", seq=seq, base_seq=base, ops=ops, cursor=0
        )

    ctx = apply_update(ChatContext(), update(1, 0, AppendOp(segments=(segment(1),))), 1000)
    big = segment(1 if op == "replace" else 2, text="q" * 50_000)
    change = ReplaceOp(segment=big) if op == "replace" else AppendOp(segments=(big,))
    ctx = apply_update(ctx, update(2, 1, change), 1000)
    assert max(segment_tokens(s) for s in ctx.segments) <= 1050
    assert "<clipped" in ctx.segments[-1].xml
