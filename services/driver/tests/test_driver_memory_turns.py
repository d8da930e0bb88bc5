"""Memory through the real driver on the real bus and a real database: the tools in primary turns, the
late-binding block across a restart, evidence rules against the context, isolation between chats,
identity by uid, and scheduled consolidation through the ``memory`` endpoint."""

from __future__ import annotations

from pathlib import Path

import pytest

from larkbot.canonical.llm import LLMRequest, TextPart, ToolResultMessage, UserMessage
from larkbot.driver.memory.core.memory import NewMemory
from larkbot.driver.tools.core import tools
from larkbot.driver.wake.runner import direct_with
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import ChatSettings
from larkbot.testkit.driver.harness import CHAT_ID, world
from larkbot.testkit.driver.synthetic import response, tool_call

DAY_MS = 86_400_000


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}"


def late_binding(request: LLMRequest) -> str:
    last = request.messages[-1]
    assert isinstance(last, UserMessage)
    part = last.parts[0]
    assert isinstance(part, TextPart)
    return part.text


def results(request: LLMRequest) -> list[str]:
    out = []
    for m in request.messages:
        if isinstance(m, ToolResultMessage):
            out.append("".join(p.text for p in m.parts if isinstance(p, TextPart)))
    return out


def save(call_id: str, evidence: str, person: str = "ou_alice", **extra: object) -> object:
    args: dict[str, object] = {
        "person": person,
        "content": extra.pop("content", "is allergic to peanuts"),
        "evidence_message_ids": [evidence],
        "importance": extra.pop("importance", "high"),
        "scope": extra.pop("scope", "group"),
        **extra,
    }
    return tool_call(tools.MEMORY_SAVE, call_id, **args)


async def test_a_fact_saved_in_one_week_is_used_in_a_later_one_after_a_restart(
    bus: Bus, nats_url: str, db: str
) -> None:
    async with world(bus, nats_url, db, probe_enabled=False) as w:
        w.primary_answers.extend(
            [
                response(save("s1", "m1")),  # type: ignore[arg-type]
                response(tool_call(tools.SEND, "s2", text="noted")),
            ]
        )
        await w.say(1, 0, text="I'm allergic to peanuts, remember that", mentions_me=True)
        await w.tick(1000)
        assert [d.text for d in w.platform.delivered] == ["noted"]
        week1 = w.requests("primary")
        assert results(week1[1]) == ["saved memory 1 (high, group)"]
        assert "<memory>" not in late_binding(week1[0])

        await w.stop_replica("a")
        await w.start_replica("a")
        await w.balanced()

        later = 7 * DAY_MS
        w.primary_answers.extend(
            [
                response(tool_call(tools.MEMORY_SEARCH, "q1", query="PEANUTS")),
                response(tool_call(tools.SEND, "s3", text="skip the satay")),
            ]
        )
        await w.say(2, later, text="what should I avoid at dinner?", mentions_me=True)
        await w.tick(later + 1000)
        assert [d.text for d in w.platform.delivered] == ["noted", "skip the satay"]
        week2 = w.requests("primary")[2:]
        fact = '<fact id="1" uid="ou_alice">is allergic to peanuts</fact>'
        assert fact in late_binding(week2[0])
        # The cached prefix does not depend on what is remembered.
        assert week2[0].system == week1[0].system
        assert [t.name for t in week2[0].tools] == [t.name for t in week1[0].tools]
        assert all(fact not in str(m) for m in week2[0].messages[:-1])
        found = results(week2[1])[-1]
        assert 'uid="ou_alice"' in found
        assert "is allergic to peanuts" in found

        (memory,) = await w.driver.memories.for_person("feishu", "ou_alice")  # type: ignore[union-attr]
        assert memory.evidence == ("om_1",)  # canonical, not the alias the model wrote
        assert (memory.chat_id, memory.scope, memory.importance) == (CHAT_ID, "group", "high")


async def test_saves_resting_on_words_that_are_not_the_persons_own_are_rejected(
    bus: Bus, nats_url: str, db: str
) -> None:
    async with world(bus, nats_url, db, probe_enabled=False, max_work_tool_calls=10) as w:
        await w.say(1, 0, sender="ou_bob", name="Bob", text="I love jazz")
        await w.say(2, 10, text="me too?", reply_to="om_1")
        await w.say(3, 20, text="I run marathons", forwarded=True)
        await w.say(4, 30, sender="ou_helper", name="Helper", text="Alice likes golf", bot=True)
        await w.say(5, 40, deleted=True)
        await w.say(6, 50, sender="ou_carol", name="Carol", text="Alice is a vegan")
        await w.say(7, 60, text="I speak Finnish", mentions_me=True)
        w.primary_answers.extend(
            [
                response(
                    save("c1", "m1", content="loves jazz"),  # type: ignore[arg-type]
                    save("c2", "m3", content="runs marathons"),  # type: ignore[arg-type]
                    save("c3", "m4", content="likes golf"),  # type: ignore[arg-type]
                    save("c4", "m5", content="something deleted"),  # type: ignore[arg-type]
                    save("c5", "m6", content="is a vegan"),  # type: ignore[arg-type]
                    save("c6", "m99", content="invented"),  # type: ignore[arg-type]
                    save("c7", "m7", content="speaks Finnish", scope="global"),  # type: ignore[arg-type]
                    save("c8", "m7", content="speaks Finnish"),  # type: ignore[arg-type]
                ),
                response(tool_call(tools.END, "e")),
            ]
        )
        await w.tick(1000)
        shown = results(w.requests("primary")[1])[-8:]
        assert shown == [
            "not saved: m1 is a message ou_alice quoted or replied to; its words are ou_bob's",
            "not saved: m3 is a forwarded message: its words are not ou_alice's own",
            "not saved: m4 was written by a bot",
            "not saved: m5 was deleted",
            "not saved: m6 was written by ou_carol, not by ou_alice",
            "not saved: no message 'm99' in this chat",
            "not saved: scope global is not enabled in this deployment; use group",
            "saved memory 1 (high, group)",
        ]
        memories = await w.driver.memories.for_person("feishu", "ou_alice")  # type: ignore[union-attr]
        assert [m.content for m in memories] == ["speaks Finnish"]


async def test_memories_stay_in_their_chat_and_follow_the_uid_not_the_name(
    bus: Bus, nats_url: str, db: str
) -> None:
    other = "oc_other"
    async with world(bus, nats_url, db, chats=(CHAT_ID, other), probe_enabled=False) as w:
        w.primary_answers.extend([response(save("s1", "m1")), response(tool_call(tools.END, "e"))])  # type: ignore[arg-type]
        await w.say(1, 0, text="I'm allergic to peanuts", mentions_me=True)
        await w.tick(1000)

        # In another group the memory is neither shown nor found.
        w.queue("primary", other).extend(
            [
                response(tool_call(tools.MEMORY_SEARCH, "q", query="peanuts", person="ou_alice")),
                response(tool_call(tools.MEMORY_PATCH, "p", id=1, enabled=False)),
                response(tool_call(tools.END, "e")),
            ]
        )
        await w.say(2, 5000, chat_id=other, text="hi all", mentions_me=True)
        await w.tick(6000)
        in_other = w.requests("primary", other)
        assert "<memory>" not in late_binding(in_other[0])
        assert results(in_other[1])[-1] == "no memories found"
        assert results(in_other[2])[-1] == "error: no memory 1 usable here"

        # Back in the first chat: Alice renamed keeps hers; Bob calling himself Alice gets none.
        await w.say(3, 10_000, sender="ou_bob", name="Alice", text="it's me, Alice", mentions_me=True)
        await w.tick(11_000)
        shown = late_binding(w.requests("primary")[-1])
        assert shown.count("<fact ") == 1  # the real Alice's, from her message still in the window
        assert 'uid="ou_bob"' not in shown
        await w.say(4, 12_000, name="Alicia", text="new name, same me", mentions_me=True)
        await w.tick(13_000)
        shown = late_binding(w.requests("primary")[-1])
        assert '<fact id="1" uid="ou_alice">is allergic to peanuts</fact>' in shown
        assert 'uid="ou_bob"' not in shown
        (memory,) = await w.driver.memories.for_person("feishu", "ou_alice")  # type: ignore[union-attr]
        assert memory.enabled  # the other chat's patch changed nothing


def test_a_direct_chat_is_configured_or_a_telegram_private_chat() -> None:
    plain = ChatSettings()
    assert direct_with("feishu", "oc_1", ChatSettings(direct_with="ou_alice")) == "ou_alice"
    assert direct_with("feishu", "oc_1", plain) is None
    assert direct_with("telegram", "123456", plain) == "123456"
    assert direct_with("telegram", "-100123456", plain) is None


def normal(person: str, content: str, evidence: str) -> NewMemory:
    return NewMemory(
        platform="feishu",
        person_id=person,
        content=content,
        evidence=(evidence,),
        chat_id=CHAT_ID,
        scope="group",
        importance="normal",
    )


async def test_consolidation_merges_normal_memories_and_disables_the_originals(
    bus: Bus, nats_url: str, db: str
) -> None:
    async with world(bus, nats_url, db, memory={"consolidation_min_count": 3}) as w:
        store = w.driver.memories
        assert store is not None
        for n, content in enumerate(["likes tea", "drinks it cold", "prefers oolong"], start=1):
            await store.save(normal("ou_alice", content, f"om_{n}"), now_ms=w.clock.now_ms())
        for n in range(2):
            await store.save(normal("ou_bob", f"fact {n}", f"om_b{n}"), now_ms=w.clock.now_ms())
        w.queue("memory").append(
            response(text='{"notes": [{"content": "likes cold oolong tea", "covers": [1, 2, 3]}]}')
        )
        consolidator = w.driver.consolidator
        assert consolidator is not None
        assert await consolidator.maintain() == {"merged": 1}  # Bob has too few to merge
        (request,) = w.llm.by_purpose("memory")
        assert "ou_alice" in request.system
        memories = {m.id: m for m in await store.for_person("feishu", "ou_alice")}
        assert [memories[i].enabled for i in (1, 2, 3)] == [False, False, False]
        merged = memories[max(memories)]
        assert (merged.content, merged.importance, merged.origin) == (
            "likes cold oolong tea",
            "high",
            "consolidation",
        )
        assert merged.evidence == ("om_1", "om_2", "om_3")
        assert merged.supersedes == (1, 2, 3)
        assert [m.content for m in memories.values()][:3] == ["likes tea", "drinks it cold", "prefers oolong"]

        # A failure is isolated to its group and backs off.
        for n in range(2, 4):
            await store.save(normal("ou_bob", f"fact {n}", f"om_b{n}"), now_ms=w.clock.now_ms())
        w.queue("memory").append(response(text="I cannot do that"))
        assert await consolidator.maintain() == {"failed": 1}
        assert await consolidator.maintain() == {"backing_off": 1}
        assert len(w.llm.by_purpose("memory")) == 2
        bob = await store.for_person("feishu", "ou_bob")
        assert all(m.enabled and m.importance == "normal" for m in bob)
