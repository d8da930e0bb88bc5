"""``moderate`` (ban_spammer) against the fake Bot API and a real JetStream: the bot's rights first, then
the ban, then deletions of the messages younger than 48 h only — asserted on the calls Telegram received —
and the ``delete`` events of confirmed deletions."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
from prometheus_client import REGISTRY

from larkbot.canonical.actions import ModerateAction, ModeratedMessage
from larkbot.canonical.events import DeleteEvent
from larkbot.canonical.names import Platform
from larkbot.ingress_telegram.fake import FakeBotApi
from larkbot.runtime.bus import Bus

from .test_ingress_telegram_service import GROUP, act, events, service, wait_events

SPAMMER = "5001"
HOUR = 3600.0
MODERATION_CALLS = ("getChatMember", "banChatMember", "deleteMessage", "deleteMessages")


@pytest.fixture
async def fake() -> AsyncIterator[FakeBotApi]:
    server = FakeBotApi()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def moderate(key: str, now: float) -> ModerateAction:
    ages = {"601": 1 * HOUR, "602": 47 * HOUR, "603": 49 * HOUR, "604": 2 * HOUR}
    return ModerateAction(
        platform=Platform.TELEGRAM,
        idempotency_key=key,
        chat_id=GROUP,
        user_id=SPAMMER,
        messages=tuple(ModeratedMessage(message_id=m, timestamp_sec=now - age) for m, age in ages.items()),
    )


def wire(fake: FakeBotApi) -> list[tuple[str, dict[str, object]]]:
    return [(r.method, r.params) for r in fake.requests if r.method in MODERATION_CALLS]


def counted(name: str, outcome: str) -> float:
    return REGISTRY.get_sample_value(f"larkbot_telegram_moderation_{name}_total", {"outcome": outcome}) or 0.0


async def test_a_ban_deletes_only_what_telegram_still_allows(
    bus: Bus, nats_url: str, fake: FakeBotApi
) -> None:
    fake.admin(int(GROUP))
    fake.deleted.append((int(GROUP), 604))  # deleted by someone else already
    before = {o: counted("deletions", o) for o in ("deleted", "failed", "skipped")}
    async with service(nats_url, fake):
        result = await act(bus, moderate("mod-1", time.time()))
        deletes = [e for e in await wait_events(bus, 2) if isinstance(e, DeleteEvent)]
        again = await act(bus, moderate("mod-1", time.time()))
        after_repeat = wire(fake)

    assert wire(fake) == [
        ("getChatMember", {"chat_id": GROUP, "user_id": fake.bot_id}),
        ("banChatMember", {"chat_id": GROUP, "user_id": int(SPAMMER)}),
        ("deleteMessage", {"chat_id": GROUP, "message_id": 601}),
        ("deleteMessage", {"chat_id": GROUP, "message_id": 602}),
        ("deleteMessage", {"chat_id": GROUP, "message_id": 604}),
    ]  # 603 is older than 48 h: never attempted
    assert fake.banned == [(int(GROUP), int(SPAMMER))]
    assert (int(GROUP), 603) not in fake.deleted

    assert (result.ok, result.outcome) == (True, "done"), result
    report = result.moderation
    assert report is not None
    assert report.banned
    assert [(d.message_id, d.outcome, d.error.code if d.error else None) for d in report.deletions] == [
        ("601", "deleted", None),
        ("602", "deleted", None),
        ("603", "skipped", "too_old"),
        ("604", "failed", "not_found"),
    ]
    assert [(d.dedup_key, d.message_ids, d.actor_id) for d in deletes] == [
        (f"{GROUP}:delete:601", ("601",), str(fake.bot_id)),
        (f"{GROUP}:delete:602", ("602",), str(fake.bot_id)),
    ]
    assert counted("deletions", "deleted") == before["deleted"] + 2
    assert counted("deletions", "skipped") == before["skipped"] + 1
    assert counted("deletions", "failed") == before["failed"] + 1
    # The same key again: the first report, no second round on the wire.
    assert again.outcome == "duplicate"
    assert again.moderation == report
    assert after_repeat == wire(fake)


async def test_a_bot_without_the_right_to_ban_changes_nothing(
    bus: Bus, nats_url: str, fake: FakeBotApi
) -> None:
    refused = counted("bans", "refused_permission")
    async with service(nats_url, fake):
        result = await act(bus, moderate("mod-2", time.time()))
        published = await events(bus)
    assert (result.ok, result.outcome, result.moderation) == (False, "failed", None)
    assert result.error is not None
    assert result.error.code == "forbidden"
    assert wire(fake) == [("getChatMember", {"chat_id": GROUP, "user_id": fake.bot_id})]
    assert fake.banned == []
    assert published == []
    assert counted("bans", "refused_permission") == refused + 1


async def test_a_bot_that_may_ban_but_not_delete_bans_and_skips_every_message(
    bus: Bus, nats_url: str, fake: FakeBotApi
) -> None:
    fake.admin(int(GROUP), can_delete=False)
    async with service(nats_url, fake):
        result = await act(bus, moderate("mod-3", time.time()))
    report = result.moderation
    assert report is not None
    assert report.banned
    assert [d.error.code if d.error else None for d in report.deletions] == [
        "forbidden",
        "forbidden",
        "too_old",
        "forbidden",
    ]
    assert [method for method, _ in wire(fake)] == ["getChatMember", "banChatMember"]
