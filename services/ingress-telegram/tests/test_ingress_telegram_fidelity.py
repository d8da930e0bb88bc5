"""What a real group sends beyond text, through the pure adapter: a group's upgrade to a supergroup, the
bot's own arrival, forum topics for sends, and the whole fixture corpus (the golden files pin each
update; these tests pin what spans several)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from larkbot.canonical.errors import ContractError
from larkbot.canonical.events import BotAdded, ChatNotice, MessageEvent, ReactionEvent, ServiceEvent
from larkbot.ingress_telegram.core import TelegramAdapter

FIXTURES = Path(__file__).parent / "fixtures" / "updates"
BOT = "7000000001"
GROUP, SUPERGROUP = "-4000000001", "-1004000000001"
FORUM = "-1009876543210"


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    return data


def in_chat(name: str, chat: dict[str, Any], update_id: int, message_id: int | None = None) -> dict[str, Any]:
    update = load(name)
    update["update_id"] = update_id
    body = update["message"]
    body["chat"] = chat
    if message_id is not None:
        body["message_id"] = message_id
    return update


SUPER = {"id": int(SUPERGROUP), "title": "LarkBot Small Group", "type": "supergroup"}


def test_a_group_upgraded_to_a_supergroup_continues_under_its_configured_id() -> None:
    adapter = TelegramAdapter(BOT, frozenset({GROUP}), 0)
    before = adapter.adapt(
        in_chat("message_text_plain", {"id": int(GROUP), "type": "group", "title": "G"}, 1, 5), 1
    )
    upgrade = adapter.adapt(load("service_migrate_to_chat_id"), 2)
    echo = adapter.adapt(load("service_migrate_from_chat_id"), 3)
    after = adapter.adapt(in_chat("message_text_plain", SUPER, 4, 5), 4)
    reaction = load("message_reaction")
    reaction["message_reaction"]["chat"] = SUPER
    reacted = adapter.adapt(reaction, 5)
    stale = adapter.adapt(
        in_chat("message_text_plain", {"id": int(GROUP), "type": "group", "title": "G"}, 6), 6
    )

    assert upgrade.migration == (GROUP, SUPERGROUP)
    (notice,) = upgrade.events
    assert isinstance(notice, ServiceEvent)
    assert isinstance(notice.action, ChatNotice)
    assert (notice.chat_id, notice.action.type) == (GROUP, "migrated_to_supergroup")
    assert (echo.events, echo.dropped, echo.migration) == ((), "migrated_from_group", None)
    # The group's message 5 and the supergroup's message 5 stay two messages of the one chat.
    (old,), (new,) = before.events, after.events
    assert isinstance(old, MessageEvent)
    assert isinstance(new, MessageEvent)
    assert (old.chat_id, old.message_id, old.dedup_key) == (GROUP, "5", f"{GROUP}:5")
    assert (new.chat_id, new.message_id, new.dedup_key) == (GROUP, "s5", f"{GROUP}:s5")
    assert {e.chat_id for e in reacted.events} == {GROUP}
    assert all(isinstance(e, ReactionEvent) and e.message_id.startswith("s") for e in reacted.events)
    assert (stale.events, stale.dropped) == ((), "chat_migrated")
    assert adapter.migrations.platform_chat(GROUP) == SUPERGROUP
    sent = {**load("message_text_plain")["message"], "chat": SUPER, "message_id": 77,
            "from": load("message_from_bot_itself")["message"]["from"]}  # fmt: skip
    self_sent = adapter.adapt_message(sent, 7)
    assert (self_sent.chat_id, self_sent.message_id, self_sent.is_self_sent) == (GROUP, "s77", True)


def test_upgrades_known_from_earlier_runs_apply_from_the_first_update() -> None:
    adapter = TelegramAdapter(BOT, frozenset({GROUP}), 0, migrations=[(GROUP, SUPERGROUP)])
    (event,) = adapter.adapt(in_chat("message_text_plain", SUPER, 1, 9), 1).events
    assert (event.chat_id, event.dedup_key) == (GROUP, f"{GROUP}:s9")


def test_a_configured_supergroup_is_a_chat_of_its_own() -> None:
    adapter = TelegramAdapter(BOT, frozenset({GROUP, SUPERGROUP}), 0, migrations=[(GROUP, SUPERGROUP)])
    (event,) = adapter.adapt(in_chat("message_text_plain", SUPER, 1, 9), 1).events
    assert (event.chat_id, event.dedup_key) == (SUPERGROUP, f"{SUPERGROUP}:9")


def test_the_bot_joining_is_one_bot_added_not_a_member_join_as_well() -> None:
    adapter = TelegramAdapter(BOT, None, 0)
    service = adapter.adapt(load("service_new_chat_members_bot_only"), 1)
    member = adapter.adapt(load("my_chat_member_added"), 2)
    assert (service.events, service.dropped) == ((), "bot_membership_from_my_chat_member")
    (added,) = member.events
    assert isinstance(added, ServiceEvent)
    assert isinstance(added.action, BotAdded)
    (with_carol,) = adapter.adapt(load("service_new_chat_members_bot_and_user"), 3).events
    assert isinstance(with_carol, ServiceEvent)
    assert [m.display_name for m in with_carol.action.members] == ["Carol"]  # type: ignore[union-attr]
    assert (
        adapter.adapt(load("service_left_chat_member_bot"), 4).dropped == "bot_membership_from_my_chat_member"
    )


def test_sends_go_to_the_topic_of_their_target_or_of_the_latest_message_from_others() -> None:
    adapter = TelegramAdapter(BOT, None, 0)
    (in_topic,) = adapter.adapt(load("message_forum_topic"), 1).events
    assert isinstance(in_topic, MessageEvent)
    assert in_topic.thread_id == "35"
    assert adapter.threads.for_send(FORUM, None) == "35"
    (general,) = adapter.adapt(load("message_forum_general"), 2).events
    assert adapter.threads.for_send(FORUM, None) is None
    assert adapter.threads.for_send(FORUM, in_topic.message_id) == "35"
    assert adapter.threads.for_send(FORUM, general.message_id) is None
    # The bot's own messages do not move the conversation it is answering.
    mine = {**load("message_forum_topic")["message"], "message_id": 99, "message_thread_id": 88,
            "from": load("message_from_bot_itself")["message"]["from"]}  # fmt: skip
    adapter.adapt_message(mine, 3)
    assert adapter.threads.for_send(FORUM, None) is None
    assert adapter.threads.for_send(FORUM, "99") == "88"
    # Outside forums nothing is remembered and sends name no topic.
    adapter.adapt(load("message_reply_thread_not_topic"), 4)
    assert adapter.threads.for_send("-1001234567890", None) is None


def test_every_real_shaped_update_becomes_events_or_a_deliberate_drop() -> None:
    """The corpus holds every kind of the Bot API's Message object: only a kind newer than the adapter
    and malformed payloads are refused."""
    adapter = TelegramAdapter(BOT, None, 0)
    refused = []
    for path in sorted(FIXTURES.glob("*.json")):
        try:
            adapter.adapt(json.loads(path.read_text(encoding="utf-8")), 1)
        except ContractError:
            refused.append(path.stem)
    assert all(name.startswith(("malformed_", "unsupported_")) for name in refused), refused
