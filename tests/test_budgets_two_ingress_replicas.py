"""A Telegram group's messages-per-minute budget holds across two ingress-telegram processes (issue 28):
two replicas of the service against the fake Bot API on the real bus, twenty sends racing through the
``actions.telegram`` queue group for the group's five."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.harness.world import world

from larkbot.canonical.actions import BUDGET_SPENT, ActionResult, SendMessageAction
from larkbot.canonical.names import Platform, actions_subject
from larkbot.runtime.bus import Bus
from larkbot.testkit.botscript import BotScript
from larkbot.testkit.stack import until

GROUP = -1001000002828
BUDGET = 5
SENDS = 20
WAIT_S = 60.0


async def test_a_groups_minute_budget_holds_across_two_ingress_processes(
    tmp_path: Path, bus: Bus, nats_url: str
) -> None:
    chats: dict[str, dict[str, Any]] = {f"telegram:{GROUP}": {"messages_per_minute": BUDGET}}
    async with world(
        tmp_path,
        bus,
        nats_url,
        BotScript(),
        chats,
        services=("ingress-telegram",),
        replicas={"ingress-telegram": 2},
    ) as w:
        replicas = ("ingress-telegram", "ingress-telegram-r2")
        # Ready for the operations endpoint may come before the link to the Bot API is up.
        await until(
            lambda: all("telegram ready as" in w.stack.log_text(name) for name in replicas),
            "both replicas linked to the Bot API",
        )

        async def send(n: int) -> ActionResult:
            action = SendMessageAction(
                platform=Platform.TELEGRAM, idempotency_key=f"race-{n}", chat_id=str(GROUP), text=f"reply {n}"
            )
            return await bus.request(actions_subject("telegram"), action, ActionResult, timeout_s=WAIT_S)

        async with asyncio.timeout(WAIT_S * 2):
            results = await asyncio.gather(*(send(n) for n in range(SENDS)))
        sent = [m for m in w.telegram.sent if m["chat"]["id"] == GROUP]
        refused_by = {name: w.stack.log_text(name).count("send refused in chat") for name in replicas}
        served_by = {
            name: await w.stack.scrape(name, "larkbot_telegram_actions_total", kind="send_message")
            for name in replicas
        }
    assert sum(r.ok for r in results) == BUDGET
    assert len(sent) == BUDGET
    codes = {r.error.code for r in results if r.error is not None}
    assert codes == {BUDGET_SPENT}
    assert sum(refused_by.values()) == SENDS - BUDGET
    # Both processes took part (the queue group spread the twenty requests between them; which of them
    # served the five that were sent and which refused is the race's): the budget held between them.
    assert sum(served_by.values()) == SENDS
    assert all(served_by.values()), served_by
