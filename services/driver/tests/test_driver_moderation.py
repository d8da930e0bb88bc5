"""``ban_spammer``: the tool list, the pure decisions and texts, and scenarios on the real bus — the
refusals (the bot itself, a maintainer, an established member), a ban whose announcement the model sends,
and the deletions coming back as in-place changes that wake nobody."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from larkbot.canonical.actions import (
    ActionError,
    ActionResult,
    MessageDeletion,
    ModerateAction,
    ModeratedMessage,
    ModerationReport,
)
from larkbot.canonical.llm import LLMReply, LLMRequest, TextPart, ToolResultMessage
from larkbot.driver.moderation.core import moderation
from larkbot.driver.tools.core import tools
from larkbot.runtime.bus import Bus
from larkbot.testkit.driver.harness import CHAT_ID, World, decide, end_turn, world
from larkbot.testkit.driver.synthetic import response, segment, tool_call

SPAMMER = "ou_spam"
MAINTAINER = "ou_maint"
REGULAR = "ou_regular"


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}"


def moderations(outcome: str) -> float:
    return REGISTRY.get_sample_value("larkbot_driver_moderation_actions_total", {"outcome": outcome}) or 0.0


def results(request: LLMRequest) -> list[str]:
    return [
        "".join(p.text for p in m.parts if isinstance(p, TextPart))
        for m in request.messages
        if isinstance(m, ToolResultMessage)
    ]


@asynccontextmanager
async def moderated(bus: Bus, nats_url: str, db: str, **chat: object) -> AsyncIterator[World]:
    """A world whose chat enables ban_spammer (unless told otherwise) and whose configuration names a
    maintainer."""
    async with world(bus, nats_url, db, replicas=(), **{"ban_spammer_enabled": True, **chat}) as w:
        w.config = w.config.model_copy(update={"maintainers": (MAINTAINER,)})
        await w.start_replica("a")
        await w.balanced()
        yield w


# -- the tool list --------------------------------------------------------------------------------------
def test_ban_spammer_is_a_work_tool_of_normal_steps_where_enabled() -> None:
    names = [t.name for t in tools.exposed("normal", ban_spammer=True)]
    assert names == [t.name for t in tools.exposed("normal")] + [tools.BAN_SPAMMER]
    assert names[-1] == tools.BAN_SPAMMER
    with_memory = [t.name for t in tools.exposed("normal", memory=True, ban_spammer=True)]
    assert with_memory == [t.name for t in tools.exposed("normal", memory=True)] + [tools.BAN_SPAMMER]
    assert tools.BAN_SPAMMER not in [t.name for t in tools.exposed("normal")]
    assert tools.BAN_SPAMMER not in [t.name for t in tools.exposed("wrap_up", ban_spammer=True)]
    assert tools.BAN_SPAMMER not in [t.name for t in tools.exposed("react_only", ban_spammer=True)]
    assert tools.BAN_SPAMMER in tools.WORK_TOOLS
    assert isinstance(tools.validate(tools.BAN_SPAMMER, '{"message_id": "m1"}'), tools.Invalid)
    assert tools.validate(tools.BAN_SPAMMER, '{"message_id": "m1", "reason": "spam"}') == {
        "message_id": "m1",
        "reason": "spam",
    }


# -- decisions and texts --------------------------------------------------------------------------------
def report(*outcomes: str, banned: bool = True) -> ModerationReport:
    def one(n: int, outcome: str) -> MessageDeletion:
        if outcome == "deleted":
            return MessageDeletion(message_id=str(n), outcome="deleted")
        error = ActionError(code="too_old", message="older than 48 h", retryable=False)
        return MessageDeletion(message_id=str(n), outcome=outcome, error=error)  # type: ignore[arg-type]

    ban_error = None if banned else ActionError(code="not_member", message="left", retryable=False)
    return ModerationReport(
        banned=banned, ban_error=ban_error, deletions=tuple(one(n, o) for n, o in enumerate(outcomes))
    )


def done(r: ModerationReport) -> ActionResult:
    return ActionResult(idempotency_key="k", ok=True, outcome="done", moderation=r)


def test_outcome_follows_what_the_ingress_reports() -> None:
    forbidden = ActionResult(
        idempotency_key="k",
        ok=False,
        outcome="failed",
        error=ActionError(code="forbidden", message="not an admin", retryable=False),
    )
    unavailable = forbidden.model_copy(
        update={"error": ActionError(code="unavailable", message="down", retryable=True)}
    )
    assert moderation.outcome(done(report("deleted", "deleted"))) == "banned"
    assert moderation.outcome(done(report())) == "banned"
    assert moderation.outcome(done(report("deleted", "skipped"))) == "partial"
    assert moderation.outcome(done(report("deleted", banned=False))) == "failed"
    assert moderation.outcome(forbidden) == "refused_permission"
    assert moderation.outcome(unavailable) == "failed"


def test_refusals_in_order_and_the_established_threshold() -> None:
    target = moderation.Target("m1", "ou_x")
    none: frozenset[str] = frozenset()
    assert moderation.refusal_before_count(target, own_message=True, bot_id=None, maintainers=none) == (
        "refused_self"
    )
    assert moderation.refusal_before_count(target, own_message=False, bot_id="ou_x", maintainers=none) == (
        "refused_self"
    )
    assert (
        moderation.refusal_before_count(
            target, own_message=False, bot_id="ou_bot", maintainers=frozenset({"ou_x"})
        )
        == "refused_maintainer"
    )
    assert moderation.refusal_before_count(target, own_message=False, bot_id=None, maintainers=none) is None
    assert not moderation.is_established(9)
    assert moderation.is_established(10)


def test_announcements_name_no_one_and_say_what_happened() -> None:
    assert moderation.announcement("telegram", "5001", report("deleted", "deleted")) == (
        "已封禁 [spam 账号](tg://user?id=5001)，并删除其 2 条消息。"
    )
    assert moderation.announcement("telegram", "5001", report()) == "已封禁 [spam 账号](tg://user?id=5001)。"
    assert moderation.announcement("telegram", "5001", report("deleted", "skipped", "skipped")) == (
        "已封禁 [spam 账号](tg://user?id=5001)。已删除其 1 条消息，另有 2 条未能删除。"
    )
    assert moderation.announcement("telegram", "5001", report("failed")) == (
        "已封禁 [spam 账号](tg://user?id=5001)。其 1 条消息未能删除。"
    )
    assert moderation.announcement("feishu", "ou_x", report("deleted")) == (
        "已将一个 spam 账号移出本群，并撤回其 1 条消息。"
    )
    assert "ou_x" not in (moderation.announcement("feishu", "ou_x", report("deleted", "failed")) or "")
    assert moderation.announcement("feishu", "ou_x", report("deleted", banned=False)) is None


def test_partial_result_lists_what_was_not_deleted_by_the_ids_the_model_reads() -> None:
    found, text = moderation.result_text(
        "telegram",
        moderation.Target("m7", "5001"),
        done(report("deleted", "skipped")),
        {"0": "m7", "1": "m8"},
    )
    assert found == "partial"
    assert text.splitlines() == [
        "banned the author of m7 (uid 5001).",
        "deleted 1 of 2 known messages: m7.",
        "not deleted: m8 (too_old: older than 48 h)",
        "Announce it now: call send_message with only `text`, set to exactly:",
        "已封禁 [spam 账号](tg://user?id=5001)。已删除其 1 条消息，另有 1 条未能删除。",
    ]


# -- scenarios ------------------------------------------------------------------------------------------
async def send_the_announcement(request: LLMRequest) -> LLMReply:
    """The model sends exactly the last line of the ban's result."""
    text = results(request)[-1].splitlines()[-1]
    return response(tool_call(tools.SEND, "send", text=text), request_id=request.request_id)


async def test_refusals_leave_the_platform_untouched(bus: Bus, nats_url: str, db: str) -> None:
    async with moderated(bus, nats_url, db) as w:
        mine = segment(1, sender="ou_bot", name="Lark", at_ms=w.t0, myself=True, text="hello all")
        boss = segment(2, sender=MAINTAINER, name="Mia", at_ms=w.t0 + 10, text="buy my course")
        # Ten distinct messages, one of them deleted since: established.
        regular = [
            segment(n, sender=REGULAR, name="Rex", at_ms=w.t0 + 10 * n, deleted=n == 3) for n in range(3, 13)
        ]
        await w.pipeline.append(mine, boss, *regular)
        before = {o: moderations(o) for o in ("refused_self", "refused_maintainer", "refused_established")}
        failed_before = moderations("failed")
        w.probe_answers.append(decide("send_message", "spam?"))
        w.primary_answers.extend(
            [
                response(
                    tool_call(tools.BAN_SPAMMER, "b1", message_id="m1", reason="r"),
                    tool_call(tools.BAN_SPAMMER, "b2", message_id="m2", reason="r"),
                    tool_call(tools.BAN_SPAMMER, "b3", message_id="m12", reason="r"),
                    tool_call(tools.BAN_SPAMMER, "b4", message_id="m99", reason="r"),
                ),
                end_turn(),
            ]
        )
        await w.say(20, 500, mentions_me=True)
        await w.tick(2000)
        assert w.platform.moderations == []
        assert not any(isinstance(r, ModerateAction) for r in w.platform.requests)
        own, boss_result, established, unknown = results(w.requests("primary")[1])
        assert own == "refused: m1 is your own message; nothing was done."
        assert boss_result.startswith(f"refused: the author of m2 (uid {MAINTAINER}) is a maintainer")
        assert established.startswith(f"refused: the author of m12 (uid {REGULAR}) has 10 messages")
        assert unknown == "error: no message with id 'm99'; nothing was done."
        for outcome, count in before.items():
            assert moderations(outcome) == count + 1
        assert moderations("failed") == failed_before + 1
        follow_up = [m for m in w.requests("primary")[1].messages if isinstance(m, ToolResultMessage)]
        assert all(m.is_error and m.requires_follow_up for m in follow_up)


async def test_a_ban_reports_deletions_the_model_announces_and_the_deletions_wake_nobody(
    bus: Bus, nats_url: str, db: str
) -> None:
    async with moderated(bus, nats_url, db) as w:
        # Nine distinct messages (the first deleted already): not established yet.
        spam = [
            segment(n, sender=SPAMMER, name="Crypto King", at_ms=w.t0 + 10 * n, deleted=n == 1)
            for n in range(1, 10)
        ]
        await w.pipeline.append(*spam)
        banned_before = moderations("banned")
        w.probe_answers.append(decide("send_message", "spam"))
        w.primary_answers.extend(
            [
                response(tool_call(tools.BAN_SPAMMER, "ban", message_id="m9", reason="crypto pitch x9")),
                send_the_announcement,
            ]
        )
        await w.say(10, 500, sender="ou_alice", name="Alice", mentions_me=True, text="kick him please")
        await w.tick(2000)

        [action] = w.platform.moderations
        assert action.user_id == SPAMMER
        assert action.chat_id == CHAT_ID
        assert action.messages == tuple(
            ModeratedMessage(message_id=f"om_{n}", timestamp_sec=(w.t0 + 10 * n) / 1000) for n in range(2, 10)
        )
        [ban_result] = results(w.requests("primary")[1])
        assert ban_result.splitlines()[:2] == [
            f"banned the author of m9 (uid {SPAMMER}).",
            "deleted 8 of 8 known messages: m2, m3, m4, m5, m6, m7, m8, m9.",
        ]
        announcement = "已将一个 spam 账号移出本群，并撤回其 8 条消息。"
        assert ban_result.splitlines()[-1] == announcement
        assert "Crypto King" not in ban_result
        assert w.platform.sent_in(CHAT_ID) == [announcement]
        assert moderations("banned") == banned_before + 1

        # The deletions replaced the messages in place; they are not input and wake nobody.
        probes = len(w.requests("probe"))
        await w.synced()
        assert all(s.is_deleted for s in w.chat.context.segments if s.sender_id == SPAMMER)
        await w.tick(60_000)
        assert len(w.requests("probe")) == probes
        assert len(w.requests("primary")) == 2


async def test_the_tool_is_not_offered_where_the_chat_leaves_it_off(bus: Bus, nats_url: str, db: str) -> None:
    async with moderated(bus, nats_url, db, ban_spammer_enabled=False) as w:
        await w.pipeline.append(segment(1, sender=SPAMMER, at_ms=w.t0))
        w.probe_answers.append(decide("send_message", "spam"))
        w.primary_answers.extend(
            [response(tool_call(tools.BAN_SPAMMER, "ban", message_id="m1", reason="spam")), end_turn()]
        )
        await w.say(2, 500, mentions_me=True)
        await w.tick(2000)
        first = w.requests("primary")[0]
        assert tools.BAN_SPAMMER not in {t.name for t in first.tools}
        assert results(w.requests("primary")[1]) == ["error: unknown tool 'ban_spammer'"]
        assert w.platform.moderations == []
