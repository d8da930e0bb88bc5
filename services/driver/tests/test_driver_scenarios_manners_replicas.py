"""Scenario on the real bus with two driver replicas: two chatty groups, one driven by each replica once
the second has joined (one of them handed over mid-conversation), where the bot's share of voice is held
under its hard limit — every message it sends unasked leaves it within the limit, computed from the
rendered context on whichever replica drives the chat — while every direct address is answered."""

from __future__ import annotations

from larkbot.canonical.names import partition_of
from larkbot.driver.tools.core import tools
from larkbot.runtime.bus import Bus
from larkbot.testkit.driver.harness import PLATFORM, World, decide, world
from larkbot.testkit.driver.synthetic import response, tool_call

#: Ten messages in the window, the bot at most three of them.
VOICE = {"window_messages": 10, "window_s": 600, "soft_share": 0.2, "hard_share": 0.3}
ROUNDS = 24


def _chats() -> tuple[str, str]:
    """A chat in an even partition (replica "a" keeps it) and one in an odd one ("b" takes it)."""
    chats = [f"oc_voice{i}" for i in range(200)]
    even = next(c for c in chats if partition_of(PLATFORM.value, c) % 2 == 0)
    odd = next(c for c in chats if partition_of(PLATFORM.value, c) % 2 == 1)
    return even, odd


def _bots_share(w: World, chat_id: str) -> int:
    """The bot's messages among the chat's last ten, as the driving replica holds them."""
    messages = [s for s in w.owner(chat_id).chats[f"{PLATFORM.value}:{chat_id}"].context.segments]
    return sum(s.is_myself for s in [s for s in messages if s.node_type == "message"][-10:])


async def _round(w: World, chat_id: str, n: int) -> None:
    """Member ``n % 3`` writes message ``n`` (every sixth mentions the bot); check what the bot did."""
    mention = n % 6 == 0
    sent = len(w.platform.sent_in(chat_id))
    at = n * 10_000
    await w.say(
        n,
        at,
        chat_id=chat_id,
        sender=f"ou_{n % 3}",
        name=f"Member {n % 3}",
        text=f"chatter {n}",
        mentions_me=mention,
    )
    await w.tick(at + 2000)
    await w.synced(chat_id)
    answered = len(w.platform.sent_in(chat_id)) > sent
    if mention:
        assert answered, f"the mention {n} in {chat_id} was not answered"
    elif answered:
        assert _bots_share(w, chat_id) <= 3, f"an unasked message took {chat_id} over the hard limit"


async def test_two_replicas_hold_the_bots_share_in_chatty_groups_and_answer_every_mention(
    bus: Bus, nats_url: str, database_url: str
) -> None:
    kept, moved = _chats()
    async with world(bus, nats_url, database_url, chats=(kept, moved), share_of_voice=VOICE) as w:
        # A model that would answer everything: only the gate keeps the bot's share down.
        for chat in (kept, moved):
            w.queue("probe", chat).extend(decide("send_message", "join in") for _ in range(2 * ROUNDS))
            w.queue("primary", chat).extend(
                response(tool_call(tools.SEND, "s", text=f"me too {k}")) for k in range(2 * ROUNDS)
            )
        for n in range(1, ROUNDS // 2):
            for chat in (kept, moved):
                await _round(w, chat, n)
        assert w.owner(moved) is w.replicas["a"][0]

        await w.start_replica("b")
        await w.balanced()
        assert w.owner(kept) is w.replicas["a"][0]
        assert w.owner(moved) is w.replicas["b"][0]
        for n in range(ROUNDS // 2, ROUNDS + 1):
            for chat in (kept, moved):
                await _round(w, chat, n)

        for chat in (kept, moved):
            sent = w.platform.sent_in(chat)
            assert len(sent) >= ROUNDS // 4  # it took part, within its share
            held = len(w.requests("probe", chat)) < ROUNDS
            assert held  # and some undirected wake-ups were held before the probe
