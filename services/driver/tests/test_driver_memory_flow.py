"""The pure side of memory in the driver: evidence rules, the late-binding block, the tool list,
consolidation answers and the wake-up flow's recall (through the scripted ports)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from larkbot.canonical.context import HistoryItem
from larkbot.canonical.llm import TextPart, UserMessage
from larkbot.driver.memory.core.consolidation import (
    InvalidAnswer,
    backoff_ms,
    consolidation_message,
    merged_evidence,
    read_notes,
)
from larkbot.driver.memory.core.evidence import Provenance, Rejected, check
from larkbot.driver.memory.core.memory import Memory
from larkbot.driver.memory.core.recall import RecallLimits, memory_block, people_in
from larkbot.driver.tools.core import tools
from larkbot.driver.wake.core.budget import TurnBudget
from larkbot.driver.wake.core.prompt import system_prompt
from larkbot.driver.wake.core.scheduler import Wake
from larkbot.driver.wake.core.wake import WakeDone, WakeInput
from larkbot.testkit.driver.scripted import DEFAULT_WAKE_SETTINGS, ScriptedPorts, wake_input
from larkbot.testkit.driver.synthetic import response, segment, tool_call

T0 = 1_800_000_000_000


def mem(
    memory_id: int,
    person: str = "ou_alice",
    content: str = "likes oolong tea",
    *,
    importance: str = "high",
    scope: str = "group",
    chat_id: str = "oc_1",
    enabled: bool = True,
) -> Memory:
    return Memory(
        id=memory_id,
        platform="feishu",
        person_id=person,
        content=content,
        evidence=(f"om_{memory_id}",),
        chat_id=chat_id,
        scope=scope,  # type: ignore[arg-type]
        importance=importance,  # type: ignore[arg-type]
        enabled=enabled,
        origin="tool",
        supersedes=(),
        related_to=(),
        created_at_ms=T0 + memory_id,
        updated_at_ms=T0 + memory_id,
    )


def prov(
    message_id: str,
    sender: str | None = "ou_alice",
    *,
    myself: bool = False,
    bot: bool = False,
    deleted: bool = False,
    forwarded: bool = False,
    reply_to: str | None = None,
) -> Provenance:
    return Provenance(message_id, sender, myself, bot, deleted, forwarded, reply_to)


# -- evidence -------------------------------------------------------------------------------------------
KNOWN = {
    p.message_id: p
    for p in (
        prov("om_1"),
        prov("om_2", "ou_bob"),
        prov("om_3", reply_to="om_2"),  # Alice replies to (quotes) Bob's message
        prov("om_4", forwarded=True),
        prov("om_5", "ou_helper", bot=True),
        prov("om_6", deleted=True),
        prov("om_7", "ou_lark", myself=True),
        prov("om_8", "ou_carol"),
    )
}


@pytest.mark.parametrize(
    ("cited", "reason"),
    [
        ("om_2", "quoted"),
        ("om_4", "forwarded"),
        ("om_5", "bot"),
        ("om_6", "deleted"),
        ("om_7", "myself"),
        ("om_8", "not_author"),
        ("om_404", "not_found"),
    ],
)
def test_evidence_that_is_not_the_persons_own_words_is_rejected(cited: str, reason: str) -> None:
    canonical = cited if cited in KNOWN else None
    result = check("ou_alice", [("om_1", "om_1"), (f"m{cited[3:]}", canonical)], KNOWN)
    assert isinstance(result, Rejected)
    assert result.reason == reason
    assert f"m{cited[3:]}" in result.message  # names the id as the model wrote it


def test_evidence_of_the_persons_own_messages_is_accepted_in_canonical_form() -> None:
    assert check("ou_alice", [("m1", "om_1"), ("m3", "om_3"), ("om_1", "om_1")], KNOWN) == ("om_1", "om_3")


def test_provenance_comes_from_segments_and_history_items() -> None:
    seg = segment(9, sender="ou_dan", bot=True).model_copy(
        update={"is_forwarded": True, "reply_to_message_id": "om_1", "is_deleted": True}
    )
    assert Provenance.of_segment(seg) == prov(
        "om_9", "ou_dan", bot=True, deleted=True, forwarded=True, reply_to="om_1"
    )
    item = HistoryItem(message_id="om_10", xml="<message/>", sender_id="ou_eve", is_self_sent=True)
    assert Provenance.of_history(item) == prov("om_10", "ou_eve", myself=True)


# -- recall ---------------------------------------------------------------------------------------------
def test_people_in_the_window_are_humans_most_recent_first() -> None:
    shown = (
        segment(1, sender="ou_alice"),
        segment(2, sender="ou_bob"),
        segment(3, sender="ou_helper", bot=True),
        segment(4, sender="ou_lark", myself=True),
        segment(5, sender="ou_alice"),
        segment(6, sender="ou_carol").model_copy(update={"is_deleted": True}),
        segment(7, node_type="runtime"),
    )
    assert people_in(shown) == ("ou_alice", "ou_bob")


def test_the_memory_block_is_bounded_escaped_and_in_stable_order() -> None:
    memories = [mem(3, "ou_bob", "<b>&"), mem(1, "ou_alice"), mem(2, "ou_alice", "plays go")]
    block = memory_block(memories, RecallLimits(10, 10_000))
    assert block == (
        "<memory>\n"
        '<fact id="1" uid="ou_alice">likes oolong tea</fact>\n'
        '<fact id="2" uid="ou_alice">plays go</fact>\n'
        '<fact id="3" uid="ou_bob">&lt;b&gt;&amp;</fact>\n'
        "</memory>"
    )
    # The same memories in another relevance order render the same bytes.
    assert memory_block(list(reversed(memories)), RecallLimits(10, 10_000)) == block
    # Count bound: the first (most relevant) ones are kept.
    assert memory_block(memories, RecallLimits(1, 10_000)) == (
        '<memory>\n<fact id="3" uid="ou_bob">&lt;b&gt;&amp;</fact>\n</memory>'
    )
    # Character bound: a line that does not fit is left out, later shorter ones still fit.
    long = mem(4, "ou_bob", "x" * 300)
    block = memory_block([long, mem(1, "ou_alice")], RecallLimits(10, 100))
    assert block is not None
    assert "xxx" not in block
    assert 'id="1"' in block
    assert memory_block([], RecallLimits(10, 100)) is None


# -- tools and prompt -----------------------------------------------------------------------------------
def test_memory_tools_are_offered_in_normal_steps_of_chats_with_memory_only() -> None:
    names = [t.name for t in tools.exposed("normal", memory=True)]
    assert names[-3:] == [tools.MEMORY_SAVE, tools.MEMORY_SEARCH, tools.MEMORY_PATCH]
    assert tools.MEMORY_SAVE not in [t.name for t in tools.exposed("normal")]
    assert tools.MEMORY_SAVE not in [t.name for t in tools.exposed("wrap_up", memory=True)]
    assert tools.MEMORY_SAVE not in [t.name for t in tools.exposed("react_only", memory=True)]
    assert tools.MEMORY_TOOLS <= tools.WORK_TOOLS


def test_memory_patch_has_no_way_to_change_content() -> None:
    args = json.dumps({"id": 3, "content": "something else"})
    result = tools.validate(tools.MEMORY_PATCH, args)
    assert isinstance(result, tools.Invalid)
    saved = tools.validate(
        tools.MEMORY_SAVE,
        json.dumps(
            {
                "person": "ou_a",
                "content": "x",
                "evidence_message_ids": ["m1"],
                "importance": "urgent",
                "scope": "group",
            }
        ),
    )
    assert isinstance(saved, tools.Invalid)


# -- the wake-up's recall -------------------------------------------------------------------------------
def _inputs(memory: RecallLimits | None) -> WakeInput:
    settings = replace(DEFAULT_WAKE_SETTINGS, probe_enabled=False, budget=TurnBudget(min_model_call_ms=0))
    return wake_input(Wake("debounced", T0, 0, None), settings=settings, chat_id="oc_1", memory=memory)


def _late_binding(ports: ScriptedPorts, index: int) -> str:
    last = ports.calls[index].messages[-1]
    assert isinstance(last, UserMessage)
    part = last.parts[0]
    assert isinstance(part, TextPart)
    return part.text


async def test_a_wake_up_shows_the_high_memories_of_the_people_in_the_window_late() -> None:
    ports = ScriptedPorts(
        script=lambda call: response(tool_call(tools.END)),
        now_ms=T0,
        segments=[
            segment(1, sender="ou_alice", at_ms=T0 - 2000),
            segment(2, sender="ou_bob", at_ms=T0 - 1000),
        ],
    )
    ports.memories = {"ou_alice": [mem(1)], "ou_bob": [mem(2, "ou_bob", "is a night owl")]}
    outcome = await ports.run(_inputs(RecallLimits(10, 2000)))
    assert outcome == WakeDone("activation")
    assert ports.memory_loads == [("ou_bob", "ou_alice")]
    text = _late_binding(ports, 0)
    assert '<fact id="1" uid="ou_alice">likes oolong tea</fact>\n<fact id="2" uid="ou_bob">' in text
    call = ports.calls[0]
    assert tools.MEMORY_SAVE in [t.name for t in call.tools]  # type: ignore[union-attr]
    # What is remembered never reaches the system prompt or the history (the cached prefix).
    assert call.system == system_prompt("Lark", "feishu", (), memory=True)
    assert all("oolong" not in str(m) for m in call.messages[:-1])

    # Other memories, another request: the system prompt's bytes are the same.
    again = ScriptedPorts(script=ports.script, now_ms=T0, segments=list(ports.segments))
    again.memories = {"ou_alice": [mem(7, content="moved to Osaka")]}
    await again.run(_inputs(RecallLimits(10, 2000)))
    assert again.calls[0].system == call.system
    assert "Osaka" in _late_binding(again, 0)


async def test_memory_off_loads_nothing_and_offers_no_memory_tools() -> None:
    ports = ScriptedPorts(
        script=lambda call: response(tool_call(tools.END)), now_ms=T0, segments=[segment(1, at_ms=T0 - 1000)]
    )
    ports.memories = {"ou_alice": [mem(1)]}
    await ports.run(_inputs(None))
    assert ports.memory_loads == []
    assert "<memory>" not in _late_binding(ports, 0)
    assert tools.MEMORY_SAVE not in [t.name for t in ports.calls[0].tools]  # type: ignore[union-attr]
    assert ports.calls[0].system == system_prompt("Lark", "feishu", ())


# -- consolidation --------------------------------------------------------------------------------------
BATCH = [
    mem(1, importance="normal"),
    mem(2, content="drinks it cold", importance="normal"),
    mem(3, importance="normal"),
]


def test_consolidation_notes_cover_the_batch_and_cite_the_union_of_its_evidence() -> None:
    text = 'Here: {"notes": [{"content": " likes  oolong tea, cold ", "covers": [2, 1]}]}'
    (note,) = read_notes(text, BATCH)
    assert note.content == "likes oolong tea, cold"
    assert note.covers == (1, 2)
    assert merged_evidence(note, BATCH) == ("om_1", "om_2")
    shown = consolidation_message(BATCH).parts[0]
    assert isinstance(shown, TextPart)
    assert '<note id="2" evidence="om_2">drinks it cold</note>' in shown.text


@pytest.mark.parametrize(
    "answer",
    [
        "no json at all",
        '{"notes": "x"}',
        '{"notes": [{"content": "", "covers": [1]}]}',
        '{"notes": [{"content": "a", "covers": []}]}',
        '{"notes": [{"content": "a", "covers": [9]}]}',
        '{"notes": [{"content": "a", "covers": [1]}, {"content": "b", "covers": [1, 2]}]}',
        '{"notes": [{"content": "a", "covers": [true]}]}',
        '{"notes": [{"content": "' + "x" * 501 + '", "covers": [1]}]}',
    ],
)
def test_an_answer_that_cannot_be_applied_is_refused_whole(answer: str) -> None:
    with pytest.raises(InvalidAnswer):
        read_notes(answer, BATCH)


def test_consolidation_backs_off_doubling_up_to_the_maximum() -> None:
    assert [backoff_ms(n, 600, 3000) for n in (1, 2, 3, 4)] == [600_000, 1_200_000, 2_400_000, 3_000_000]
