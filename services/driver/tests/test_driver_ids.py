"""Resolving rendered ids, mentions and attachments from the live context."""

from __future__ import annotations

from larkbot.canonical.context import Segment
from larkbot.driver.wake.core.ids import alias_table, mentioned_uids
from larkbot.testkit.driver.synthetic import segment


def _with_xml(n: int, xml: str) -> Segment:
    return segment(n).model_copy(update={"xml": xml})


def test_alias_table_maps_aliases_and_canonical_ids() -> None:
    table = alias_table((segment(1), segment(2), segment(3, node_type="runtime")))
    assert table == {"om_1": "om_1", "m1": "om_1", "om_2": "om_2", "m2": "om_2"}


def test_mentioned_uids_in_order_without_duplicates() -> None:
    b = '<mention uid="ou_b">@B</mention>'
    text = f'hi {b} and <mention uid="ou_a">@A</mention> {b}'
    assert mentioned_uids(text) == ("ou_b", "ou_a")
