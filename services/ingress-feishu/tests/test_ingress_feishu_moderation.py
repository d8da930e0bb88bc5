"""``moderate`` (ban_spammer) against the fake Feishu over real HTTP and a real bus: the calls made on the
wire, the per-message report, and the ``delete`` events of confirmed recalls."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from prometheus_client import REGISTRY

from larkbot.canonical.actions import ModerateAction, ModeratedMessage
from larkbot.canonical.events import DeleteEvent
from larkbot.canonical.names import Platform, Service
from larkbot.ingress_feishu.app import FeishuIngress, IngressFeishuService
from larkbot.ingress_feishu.fake.samples import ALICE, BOT, CAROL, CHAT
from larkbot.ingress_feishu.fake.server import FakeFeishu
from larkbot.runtime.bus import Bus
from larkbot.runtime.service import built
from larkbot.testkit.ingress_feishu.service import configured

from .test_ingress_feishu_actions import OPTIONS, act, feishu_config, stream_events

SPAMMER = CAROL
SPAM = ("om_spam_one_0000000000000000000001", "om_spam_two_0000000000000000000002")
GONE = "om_spam_gone_000000000000000000003"  # recalled by someone else before the ban


@pytest.fixture
async def fake() -> AsyncIterator[FakeFeishu]:
    async with FakeFeishu() as server:
        for message_id in (*SPAM, GONE):
            server.message_chats[message_id] = CHAT
        server.recalled.append(GONE)
        yield server


@pytest.fixture
async def service(fake: FakeFeishu, bus: Bus, nats_url: str) -> AsyncIterator[FeishuIngress]:
    config = feishu_config(fake)
    recipe = IngressFeishuService(config, OPTIONS)
    async with built(Service.INGRESS_FEISHU, recipe, config, nats_url=nats_url) as up:
        yield configured(up)


def moderate(key: str) -> ModerateAction:
    return ModerateAction(
        platform=Platform.FEISHU,
        idempotency_key=key,
        chat_id=CHAT,
        user_id=SPAMMER,
        messages=tuple(
            ModeratedMessage(message_id=m, timestamp_sec=1_800_000_000 + n)
            for n, m in enumerate((*SPAM, GONE))
        ),
    )


def counted(name: str, outcome: str) -> float:
    return (
        REGISTRY.get_sample_value(f"larkbot_ingress_feishu_moderation_{name}_total", {"outcome": outcome})
        or 0.0
    )


async def test_a_ban_removes_the_member_then_recalls_each_message(
    service: FeishuIngress, fake: FakeFeishu, bus: Bus
) -> None:
    fake.managed_chats.add(CHAT)
    bans, deleted, failed = (
        counted("bans", "banned"),
        counted("deletions", "deleted"),
        counted("deletions", "failed"),
    )
    result = await act(bus, moderate("mod-1"))

    assert (result.ok, result.outcome) == (True, "done"), result
    [removal] = fake.routed("chat.members.delete")
    assert (removal.method, removal.path) == ("DELETE", f"/open-apis/im/v1/chats/{CHAT}/members")
    assert removal.query == {"member_id_type": "open_id"}
    assert removal.json() == {"id_list": [SPAMMER]}
    recalls = fake.routed("message.recall")
    assert [(r.method, r.path) for r in recalls] == [
        ("DELETE", f"/open-apis/im/v1/messages/{m}") for m in (*SPAM, GONE)
    ]
    assert recalls[0].at > removal.at  # recalls only after the removal
    assert fake.removed_members == [(CHAT, SPAMMER)]
    assert fake.recalled == [GONE, *SPAM]

    report = result.moderation
    assert report is not None
    assert report.banned
    assert [(d.message_id, d.outcome) for d in report.deletions] == [
        (SPAM[0], "deleted"),
        (SPAM[1], "deleted"),
        (GONE, "failed"),
    ]
    assert report.deletions[2].error is not None
    assert report.deletions[2].error.code == "not_found"

    # Confirmed recalls only, as the delete events Feishu itself would push, by the bot.
    deletes = [e for e in await stream_events(bus) if isinstance(e, DeleteEvent)]
    assert [(d.dedup_key, d.message_ids, d.actor_id) for d in deletes] == [
        (f"recall:{m}", (m,), BOT) for m in SPAM
    ]
    assert counted("bans", "banned") == bans + 1
    assert counted("deletions", "deleted") == deleted + 2
    assert counted("deletions", "failed") == failed + 1

    # The same request again (a lost answer): the first report, nothing done twice.
    again = await act(bus, moderate("mod-1"))
    assert again.outcome == "duplicate"
    assert again.moderation == report
    assert len(fake.routed("chat.members.delete")) == 1
    assert len(fake.routed("message.recall")) == 3


async def test_a_bot_that_may_not_remove_members_changes_nothing(
    service: FeishuIngress, fake: FakeFeishu, bus: Bus
) -> None:
    refused = counted("bans", "refused_permission")
    result = await act(bus, moderate("mod-2"))
    assert (result.ok, result.outcome, result.moderation) == (False, "failed", None)
    assert result.error is not None
    assert result.error.code == "forbidden"
    assert "230027" in result.error.message
    assert len(fake.routed("chat.members.delete")) == 1
    assert fake.routed("message.recall") == []
    assert fake.removed_members == []
    assert not [e for e in await stream_events(bus) if isinstance(e, DeleteEvent)]
    assert counted("bans", "refused_permission") == refused + 1


async def test_a_member_who_already_left_is_not_banned_and_nothing_is_recalled(
    service: FeishuIngress, fake: FakeFeishu, bus: Bus
) -> None:
    fake.managed_chats.add(CHAT)
    fake.members[CHAT] = {ALICE, BOT}
    result = await act(bus, moderate("mod-3"))
    report = result.moderation
    assert result.outcome == "done"
    assert report is not None
    assert not report.banned
    assert report.ban_error is not None
    assert report.ban_error.code == "not_member"
    assert {(d.outcome, d.error.code if d.error else None) for d in report.deletions} == {
        ("skipped", "not_banned")
    }
    assert fake.routed("message.recall") == []
    assert fake.removed_members == []
