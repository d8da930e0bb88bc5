"""Pacing (pure, injected clock), the sent-ledger's decisions and which Bot API failures a send retries."""

from __future__ import annotations

import pytest

from larkbot.ingress_telegram.core import Limits, Pacer, Record, State, decide, is_group_chat, send_failure
from larkbot.ingress_telegram.core.ledger import STALE_PENDING_MS
from larkbot.runtime.retry import Failure

NOW = 1_700_000_000_000


def test_one_message_per_second_per_chat() -> None:
    pacer = Pacer()
    assert [pacer.reserve("1", False, 100.0) for _ in range(3)] == [100.0, 101.0, 102.0]
    assert pacer.reserve("2", False, 100.0) == pytest.approx(100.0 + 1 / 30)  # other chat: global spacing


def test_twenty_per_minute_in_a_group() -> None:
    pacer = Pacer(Limits(chat_interval_s=0.0, global_per_s=1000.0))
    slots = [pacer.reserve("-100", True, 0.0) for _ in range(21)]
    assert slots[19] < 1.0
    assert slots[20] == pytest.approx(60.0)  # the 21st waits until the first leaves the window


def test_thirty_per_second_overall() -> None:
    pacer = Pacer()
    slots = [pacer.reserve(str(chat), False, 0.0) for chat in range(31)]
    assert slots[29] < 1.0
    assert slots[30] == pytest.approx(1.0)


def test_retry_after_blocks_the_chat_or_everything() -> None:
    pacer = Pacer()
    pacer.block("5", 50.0)
    assert pacer.reserve("5", False, 10.0) == 50.0
    assert pacer.reserve("6", False, 10.0) < 11.0
    pacer.block(None, 70.0)
    assert pacer.reserve("7", False, 10.0) == 70.0


def test_group_ids_are_negative() -> None:
    assert is_group_chat("-1001234567890")
    assert not is_group_chat("111111111")


@pytest.mark.parametrize(
    ("record", "action", "confirmed"),
    [
        (None, "send", ()),
        (Record(State.DONE, ("7", "8"), 2), "duplicate", ("7", "8")),
        (Record(State.FAILED, ("7",), 2), "send", ("7",)),
        # An attempt holds the key (sending, or waiting to retry): ask again later.
        (Record(State.PENDING, ("7",), 2, NOW - 1000), "in_progress", ("7",)),
        # No attempt runs for ten minutes: the one that claimed the key died, maybe after sending.
        (Record(State.PENDING, ("7",), 2, NOW - STALE_PENDING_MS), "unknown", ("7",)),
        (Record(State.UNKNOWN, (), 1, NOW), "unknown", ()),
    ],
)
def test_ledger_decisions(record: Record | None, action: str, confirmed: tuple[str, ...]) -> None:
    decision = decide(record, NOW)
    assert (decision.action, decision.confirmed) == (action, confirmed)


def test_ledger_record_roundtrip() -> None:
    record = Record(State.FAILED, ("1", "2"), 3, 123)
    assert Record.decode(record.encode()) == record


@pytest.mark.parametrize(
    ("error_code", "failure"),
    [
        (429, Failure.RATE_LIMITED),
        (500, Failure.TRANSIENT),  # {"ok":false,"error_code":500,"description":"Internal Server Error"}
        (502, Failure.TRANSIENT),
        (400, None),
        (403, None),
        (404, None),
    ],
)
def test_which_error_answers_a_send_tries_again(error_code: int, failure: Failure | None) -> None:
    assert send_failure(error_code) is failure
