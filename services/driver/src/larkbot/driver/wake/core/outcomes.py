"""What the model is told when a platform action did not simply succeed (pure): what is known, plainly.

The ingress has already retried what can be retried (the same ledger record on Telegram, the same
``uuid`` on Feishu) until the turn's deadline, and the driver has asked again while an outcome was open,
so a result that reaches the model is settled as far as anyone can know. Three cases, each its own words:

- ``unknown`` — the platform may have done it: its answer was lost, or an earlier attempt was still
  running when the deadline came. The model must not repeat it (a repeat under a new key could post the
  message twice); the result needs no follow-up.
- ``failed``, retryable — the platform failed every attempt (a 5xx, a rate limit, no connection): nothing
  was done. A new attempt is the model's choice, in a later turn.
- ``failed``, ``budget_spent`` — the operator's platform budget (a chat's messages per minute, the
  platform's API calls per day or month) is spent: nothing was done, and the bot cannot speak there
  until it resets; the model is told so, and when.
- ``failed``, final — the platform refused it (the bot was removed, the target is gone, …): nothing was
  done, and repeating it cannot help; the platform's reason is quoted, shortened.

A long text goes out as several messages; parts already delivered are named by the ids the chat shows, so
the model knows what the members see. Texts are deterministic for a given result: they become part of the
cached prompt prefix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, assert_never

from larkbot.canonical.actions import BUDGET_SPENT, ActionResult

PLATFORM_NAMES = {"feishu": "Feishu", "telegram": "Telegram"}
#: The platform's own reason, at most this long, for a final refusal.
REASON_CHARS = 160

_NOT_DONE = {"send_message": "not sent", "delete_message": "not recalled"}


#: How an action that did not simply succeed settled: the closed set :func:`settled_text` words.
Settlement = Literal["unknown", "deadline", "budget", "exhausted", "refused"]


def settlement(result: ActionResult) -> Settlement:
    """``unknown``: it may have happened; ``deadline``: it never ran; ``budget``: a platform budget is
    spent; ``exhausted``: every attempt failed for now (the error is retryable); ``refused``: the platform
    said no for good."""
    error = result.error
    if result.outcome == "unknown":
        return "unknown"
    if error is not None and error.code == "deadline":
        return "deadline"
    if error is not None and error.code == BUDGET_SPENT:
        return "budget"
    if error is not None and error.retryable:
        return "exhausted"
    return "refused"


def settled_text(result: ActionResult, kind: str, platform: str, delivered: Sequence[str] = ()) -> str:
    """The tool result for ``result`` (``ok`` false) of an action of ``kind``; ``delivered``: the ids the
    chat shows for parts of a send that were delivered before it stopped."""
    name = PLATFORM_NAMES.get(platform, platform)
    error = result.error
    code = error.code if error is not None else "failed"
    shown = _delivered(delivered)
    head = f"{_NOT_DONE.get(kind, 'not done')}: "
    rest = (
        f"{shown}, the rest was not"
        if shown
        else ("nothing was delivered" if kind == "send_message" else "nothing changed")
    )
    settled = settlement(result)
    match settled:
        case "unknown":
            if code == "in_progress":
                why = f"{name} was still working on an earlier attempt when the turn's deadline came"
            else:
                why = f"{name}'s answer was lost"
            known = f"; {shown}" if shown else ""
            return f"delivery unknown: {why}, so it may or may not have happened{known}; do not repeat it"
        case "deadline":
            return f"{head}the turn's deadline passed before it could run; {rest}"
        case "budget":
            after = error.retry_after_s if error is not None else None
            when = f"it allows more in about {_duration(after)}" if after else "it resets later"
            return (
                f"{head}the speaking budget for {name} is spent ({error.message if error else code}); "
                f"{rest}. You cannot speak here now: {when}. Stay silent until then — do not try again "
                "in this turn"
            )
        case "exhausted":
            after = error.retry_after_s if error is not None else None
            wait = f", asking to wait {after:g} s" if after else ""
            return f"{head}{name} kept failing ({code}{wait}) until the retries ran out; {rest}"
        case "refused":
            reason = error.message.strip()[:REASON_CHARS] if error is not None else ""
            return f"{head}{name} refused it ({code}{': ' + reason if reason else ''}); {rest}"
        case _:
            assert_never(settled)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    return f"{round(seconds / 3600)} h"


def _delivered(ids: Sequence[str]) -> str:
    if not ids:
        return ""
    if len(ids) == 1:
        return f"the first part was delivered (id {ids[0]})"
    return f"the first {len(ids)} parts were delivered (ids {', '.join(ids)})"
