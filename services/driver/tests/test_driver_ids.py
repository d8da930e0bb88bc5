"""Resolving rendered ids, mentions and attachments from the live context."""

from __future__ import annotations

from larkbot.canonical.content import AttachmentType
from larkbot.canonical.context import Segment
from larkbot.driver.core.ids import AttachmentRef, alias_table, find_attachment, mentioned_uids
from larkbot.driver.synthetic import segment


def _with_xml(n: int, xml: str) -> Segment:
    return segment(n).model_copy(update={"xml": xml})


def test_alias_table_maps_aliases_and_canonical_ids() -> None:
    table = alias_table((segment(1), segment(2), segment(3, node_type="runtime")))
    assert table == {"om_1": "om_1", "m1": "om_1", "om_2": "om_2", "m2": "om_2"}


def test_mentioned_uids_in_order_without_duplicates() -> None:
    b = '<mention uid="ou_b">@B</mention>'
    text = f'hi {b} and <mention uid="ou_a">@A</mention> {b}'
    assert mentioned_uids(text) == ("ou_b", "ou_a")


def test_find_attachment_by_file_id() -> None:
    segs = (
        _with_xml(
            1, '<message id="m1" sender="A"><image mime="image/png" file-id="f1">a cat</image></message>'
        ),
        _with_xml(2, '<message id="m2" sender="B"><attachment type="video" file-id="f2"/></message>'),
        _with_xml(3, '<message id="m3" sender="B"><sticker pack="p" file-id="f3"/></message>'),
    )
    assert find_attachment(segs, "f1") == AttachmentRef("om_1", "f1", AttachmentType.PHOTO)
    assert find_attachment(segs, "f2") == AttachmentRef("om_2", "f2", AttachmentType.VIDEO)
    assert find_attachment(segs, "f3") == AttachmentRef("om_3", "f3", AttachmentType.STICKER)
    assert find_attachment(segs, "nope") is None
