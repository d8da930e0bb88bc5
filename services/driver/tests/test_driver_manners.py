"""The chat's manners on their own (``manners.core``): the share of voice over segments, the quiet-hours
window in a chat's offset across midnight, the talk levels and the gate's decision."""

from __future__ import annotations

import pytest

from larkbot.canonical.context import Segment
from larkbot.driver.manners.core.manners import Manners, assess, decide, guidance
from larkbot.driver.manners.core.quiet import QuietHours, in_quiet_hours, local_minute
from larkbot.driver.manners.core.share import Share, VoiceLimits, share_of_voice
from larkbot.driver.manners.settings import manners_of
from larkbot.runtime.config import TALK_LEVELS, ChatSettings
from larkbot.testkit.driver.synthetic import segment

#: 2027-01-15 08:00:00 UTC: 16:00 at +08:00.
T0 = 1_800_000_000_000
MINUTE = 60_000
LIMITS = VoiceLimits(window_messages=10, window_ms=10 * MINUTE, soft_share=0.2, hard_share=0.3)


def _chat(pattern: str, *, step_ms: int = 1000, end_ms: int = T0) -> tuple[Segment, ...]:
    """One message per character, the last at ``end_ms``: ``b`` the bot's, ``h`` a human's, ``x`` a
    deleted one, ``e`` an event."""
    start = end_ms - (len(pattern) - 1) * step_ms
    out = []
    for n, kind in enumerate(pattern, start=1):
        at = start + (n - 1) * step_ms
        if kind == "e":
            out.append(segment(n, at_ms=at).model_copy(update={"node_type": "event"}))
        else:
            out.append(segment(n, at_ms=at, myself=kind == "b", deleted=kind == "x"))
    return tuple(out)


@pytest.mark.parametrize(
    ("pattern", "step_ms", "own", "counted"),
    [
        ("", 1000, 0, 0),
        ("hb", 1000, 1, 2),  # a quiet chat: 1 of the window's 10, not 1 of 2
        ("hbhbhbhbhb", 1000, 5, 10),
        ("bbbbb" + "hhhhhhhhhh", 1000, 0, 10),  # only the last ten count
        ("bbhbhh", 5 * MINUTE, 1, 3),  # only the last ten minutes count
        ("bxbxbx", 1000, 3, 3),  # deleted messages count for nobody
        ("bebebe", 1000, 3, 3),  # events are not messages
    ],
)
def test_the_share_counts_the_bots_messages_among_the_recent_ones(
    pattern: str, step_ms: int, own: int, counted: int
) -> None:
    share = share_of_voice(_chat(pattern, step_ms=step_ms), T0, LIMITS)
    assert (share.own, share.counted) == (own, counted)
    assert share.value == own / 10


@pytest.mark.parametrize(
    ("own", "limit", "adding", "over", "reaches"),
    [
        (2, 0.2, 0, False, True),
        (1, 0.2, 0, False, False),
        (3, 0.3, 0, False, True),  # exactly the limit, never above it by rounding
        (2, 0.3, 1, False, False),
        (3, 0.3, 1, True, True),
        (7, 0.7, 0, False, True),
    ],
)
def test_share_limits_compare_exactly(own: int, limit: float, adding: int, over: bool, reaches: bool) -> None:
    share = Share(own, 10, 10)
    assert share.over(limit, adding=adding) is over
    assert share.reaches(limit) is reaches


@pytest.mark.parametrize(
    ("start", "end", "local", "quiet"),
    [
        ("23:00", "07:30", "22:59", False),
        ("23:00", "07:30", "23:00", True),
        ("23:00", "07:30", "00:00", True),
        ("23:00", "07:30", "03:00", True),
        ("23:00", "07:30", "07:29", True),
        ("23:00", "07:30", "07:30", False),
        ("13:00", "14:00", "13:30", True),
        ("13:00", "14:00", "14:00", False),
        ("13:00", "14:00", "00:30", False),
    ],
)
@pytest.mark.parametrize("offset", [480, -210, 0])
def test_quiet_hours_are_local_to_the_chats_offset_and_wrap_past_midnight(
    start: str, end: str, local: str, quiet: bool, offset: int
) -> None:
    def minutes(hhmm: str) -> int:
        hours, mins = hhmm.split(":")
        return int(hours) * 60 + int(mins)

    # The UTC instant whose local time at ``offset`` is ``local`` (on the day after T0's).
    day_ms = (T0 // 86_400_000 + 1) * 86_400_000
    now = day_ms + (minutes(local) - offset) * MINUTE
    assert local_minute(now, offset) == minutes(local)
    window = QuietHours(minutes(start), minutes(end))
    assert in_quiet_hours(window, now, offset) is quiet


def test_t0_in_plus_eight_is_afternoon_and_in_utc_is_morning() -> None:
    overnight = QuietHours(23 * 60, 8 * 60 + 30)
    assert local_minute(T0, 480) == 16 * 60
    assert not in_quiet_hours(overnight, T0, 480)
    assert in_quiet_hours(overnight, T0, 0)  # 08:00 UTC is before 08:30
    assert in_quiet_hours(QuietHours(15 * 60, 3 * 60), T0, 480)


@pytest.mark.parametrize(
    ("own", "quiet", "allow", "outcome", "reason"),
    [
        (0, False, "direct", "wake", None),
        (2, False, "direct", "wake", None),  # one more makes 3 of 10: at the hard limit, not above
        (3, False, "direct", "direct_only", "share_of_voice"),
        (0, True, "direct", "direct_only", "quiet_hours"),
        (0, True, "none", "suppressed", "quiet_hours"),
        (5, True, "direct", "direct_only", "quiet_hours"),  # quiet hours name the reason
    ],
)
def test_the_gate_decides_from_the_share_and_the_hours(
    own: int, quiet: bool, allow: str, outcome: str, reason: str | None
) -> None:
    manners = Manners(voice=LIMITS, quiet=QuietHours(0, 60, allow))  # type: ignore[arg-type]
    assert decide(Share(own, 10, 10), quiet, manners) == (outcome, reason)


def _new(**flags: object) -> Segment:
    return segment(99, at_ms=T0, **flags)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("new", "direct_chat", "held"),
    [
        (_new(), False, "share_of_voice"),
        (_new(mentions_me=True), False, None),
        (_new(replies_to_me=True), False, None),
        (_new(), True, None),  # every message of a direct chat addresses the bot
        (_new(node_type="runtime"), False, None),  # the bot's own task reporting
        (_new(sender="ou_spam", mentions_me=True), False, "share_of_voice"),  # blocked: not input
    ],
)
def test_over_the_hard_limit_only_a_direct_address_goes_on(
    new: Segment, direct_chat: bool, held: str | None
) -> None:
    manners = Manners(voice=LIMITS, direct_chat=direct_chat)
    chat = (*_chat("hbhbhbh", end_ms=T0 - 1000), new)
    found = assess(
        chat, since_ms=T0 - 1, now_ms=T0, utc_offset_min=480, manners=manners, blocked=frozenset({"ou_spam"})
    )
    assert found.share.own == 3
    assert found.held == held


def test_quiet_hours_with_allow_none_hold_even_a_mention() -> None:
    manners = Manners(quiet=QuietHours(15 * 60, 3 * 60, "none"))
    found = assess((_new(mentions_me=True),), since_ms=0, now_ms=T0, utc_offset_min=480, manners=manners)
    assert (found.outcome, found.held) == ("suppressed", "quiet_hours")
    assert assess((_new(),), since_ms=0, now_ms=T0, utc_offset_min=0, manners=manners).held is None


def test_the_guidance_names_the_level_the_hours_and_a_share_over_the_soft_limit() -> None:
    quiet = QuietHours(15 * 60, 3 * 60)
    plain = assess(_chat("hhhh"), since_ms=0, now_ms=T0, utc_offset_min=0, manners=Manners(voice=LIMITS))
    assert guidance(plain, Manners(voice=LIMITS)) == ()
    reserved = Manners(talk_level="reserved", voice=LIMITS, quiet=quiet)
    busy = assess(_chat("hbhbh"), since_ms=0, now_ms=T0, utc_offset_min=480, manners=reserved)
    level, hours, share = guidance(busy, reserved)
    assert "reserved" in level
    assert "15:00–03:00" in hours
    assert "2 of the last 10 (soft limit 20%, hard limit 30%)" in share
    over = Manners(talk_level="chatty", voice=LIMITS)
    held = assess(_chat("bbbh"), since_ms=0, now_ms=T0, utc_offset_min=480, manners=over)
    lines = guidance(held, over)
    assert "chatty" in lines[0]
    assert lines[-1].startswith("Over the hard limit")
    # A one-to-one chat is half the bot's by nature: no share of voice there.
    direct = Manners(voice=LIMITS, direct_chat=True)
    found = assess(_chat("bbbh"), since_ms=0, now_ms=T0, utc_offset_min=480, manners=direct)
    assert (found.outcome, guidance(found, direct)) == ("wake", ())


@pytest.mark.parametrize("level", ["reserved", "normal", "chatty"])
def test_a_chats_settings_become_its_manners(level: str) -> None:
    settings = ChatSettings.model_validate(
        {"talk_level": level, "quiet_hours": {"start": "22:30", "end": "06:00", "allow": "none"}}
    )
    manners = manners_of(settings, direct_chat=False)
    voice = TALK_LEVELS[level]
    assert manners.talk_level == level
    assert manners.voice == VoiceLimits(
        voice.window_messages, round(voice.window_s * 1000), voice.soft_share, voice.hard_share
    )
    assert manners.quiet == QuietHours(22 * 60 + 30, 6 * 60, "none")
    # A chat that names nothing has normal's limits (on by default); `share_of_voice: null` has none.
    normal = TALK_LEVELS["normal"]
    assert manners_of(ChatSettings(), direct_chat=True) == Manners(
        voice=VoiceLimits(
            normal.window_messages, round(normal.window_s * 1000), normal.soft_share, normal.hard_share
        ),
        direct_chat=True,
    )
    off = ChatSettings.model_validate({"share_of_voice": None})
    assert manners_of(off, direct_chat=False) == Manners()
