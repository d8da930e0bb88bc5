"""Applying context updates, gap detection, external input and participation signals."""

from __future__ import annotations

import pytest

from larkbot.canonical.context import AppendOp, ContextUpdate, ReplaceOp, ResetOp
from larkbot.canonical.names import Platform
from larkbot.driver.wake.core.context import ChatContext, Gap, apply_update, is_external, new_external
from larkbot.driver.wake.core.participation import bot_loop_brake, participation
from larkbot.testkit.driver.synthetic import segment

T0 = 1_700_000_000_000


def _update(seq: int, base: int, *ops: AppendOp | ReplaceOp | ResetOp) -> ContextUpdate:
    return ContextUpdate(platform=Platform.FEISHU, chat_id="oc_1", seq=seq, base_seq=base, cursor=0, ops=ops)


def test_updates_apply_in_sequence_and_gaps_are_detected() -> None:
    ctx = apply_update(ChatContext(), _update(1, 0, AppendOp(segments=(segment(1), segment(2)))), 4000)
    ctx = apply_update(ctx, _update(3, 1, ReplaceOp(segment=segment(1, text="edited"))), 4000)
    assert ctx.segments[0].xml.endswith(">edited</message>")
    assert ctx.seq == 3
    with pytest.raises(Gap):
        apply_update(ctx, _update(5, 4, AppendOp(segments=(segment(3),))), 4000)
    with pytest.raises(Gap):
        apply_update(ctx, _update(4, 3, ReplaceOp(segment=segment(9))), 4000)
    reset = apply_update(ctx, _update(4, 3, ResetOp(segments=(segment(2),))), 4000)
    assert [s.segment_id for s in reset.segments] == ["om_2"]


@pytest.mark.parametrize(
    ("flags", "external"),
    [
        ({}, True),
        ({"myself": True}, False),
        ({"self_sent": True}, False),
        ({"bot": True}, True),
        ({"node_type": "runtime"}, True),
    ],
)
def test_what_counts_as_external_input(flags: dict[str, object], external: bool) -> None:
    assert is_external(segment(1, **flags)) is external  # type: ignore[arg-type]


def test_new_external_only_after_the_watermark() -> None:
    before = ChatContext(segments=(segment(1, at_ms=T0),))
    after = ChatContext(
        segments=(
            segment(1, at_ms=T0),
            segment(2, at_ms=T0 + 1),
            segment(3, at_ms=T0 + 2, myself=True),
            segment(4, at_ms=T0 - 5),
        )
    )
    assert [s.segment_id for s in new_external(before, after, T0)] == ["om_2"]


def test_participation_signals() -> None:
    now = T0 + 1_000_000
    segs = (
        segment(1, at_ms=now - 700_000, myself=True),
        segment(2, at_ms=now - 300_000, myself=True),
        segment(3, at_ms=now - 200_000),
        segment(4, at_ms=now - 100_000, myself=True),
        segment(5, at_ms=now - 50_000, bot=True, sender="ou_bot"),
    )
    stats = participation(segs, now)
    assert stats.recent_self_messages_10m == 2
    assert stats.seconds_since_last_self_message == 100
    assert stats.consecutive_bot_exchanges == 2
    assert participation(segs[:4], now).consecutive_bot_exchanges == 0  # no other bot in the streak
    assert participation((), now).seconds_since_last_self_message is None


def test_bot_loop_brake_after_two_rounds() -> None:
    chat = [segment(1, at_ms=T0)]
    for i in range(2, 7):
        chat.append(segment(i, at_ms=T0 + i, myself=i % 2 == 1, bot=i % 2 == 0, sender=f"b{i % 2}"))
    # human, bot, me, bot, me, bot: the newest input is a bot's, streak of 5.
    assert bot_loop_brake(tuple(chat), T0 + 5, T0 + 10, cap=4)
    assert not bot_loop_brake(tuple(chat[:3]), T0 + 1, T0 + 10, cap=4)
    human_last = (*chat, segment(9, at_ms=T0 + 9))
    assert not bot_loop_brake(human_last, T0 + 5, T0 + 10, cap=4)


def test_blocked_senders_are_never_external_input() -> None:
    blocked = frozenset({"ou_spam"})
    assert not is_external(segment(1, sender="ou_spam"), blocked)
    assert is_external(segment(1, sender="ou_alice"), blocked)
    assert is_external(segment(1, node_type="runtime"), blocked)  # runtime events have no sender
    # New input of a blocked human and of bots: the blocked message does not keep the brake off.
    chat = [segment(1, at_ms=T0), segment(2, at_ms=T0 + 2, sender="ou_spam")]
    for i in range(3, 8):
        chat.append(segment(i, at_ms=T0 + i, myself=i % 2 == 0, bot=i % 2 == 1, sender=f"b{i % 2}"))
    assert not bot_loop_brake(tuple(chat), T0 + 1, T0 + 10, cap=4)
    assert bot_loop_brake(tuple(chat), T0 + 1, T0 + 10, cap=4, blocked=blocked)
