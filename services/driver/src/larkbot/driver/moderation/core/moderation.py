"""``ban_spammer``: who may be banned, what the outcome was, and what the chat is told. Pure: the adapter
(``adapters.moderation``) gathers the facts — the evidence message's persisted author, the bot's own id,
the configured maintainers, ``pipeline.member``'s count — and the ingress's report, and asks here.

Decisions:

- The target is the author of the evidence message as the pipeline persisted it, never a name or an id
  the model typed. Refused, in this order: the bot itself (its own message, or its id), a maintainer
  (configuration only), and an established member — :data:`ESTABLISHED_MESSAGES` or more distinct
  observed messages in the chat, deleted ones included, edits not adding any.
- The outcome comes from what the ingress reports, not from what was asked: ``banned`` when the member
  is banned and every known message was deleted, ``partial`` when some could not be, ``refused_permission``
  when the bot lacks the rights (nothing changed), ``failed`` otherwise (not banned).
- The announcement is exact text the model sends as it is. It names no one and quotes nothing: on
  Telegram the account is a ``tg://user?id=`` link labelled "spam 账号"; on Feishu it is plain text,
  because an ``<at>`` renders the account's own display name (no other label exists), and a spam
  account's name is often the pitch itself. A partial clean-up says so, with counts only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from larkbot.canonical.actions import ActionResult, MessageDeletion, ModerationReport

#: A member with this many distinct observed messages in the chat is established, never a spam account.
ESTABLISHED_MESSAGES: Final = 10
#: How the announcement labels the account (the guide's wording).
SPAM_LABEL: Final = "spam 账号"

Outcome = Literal[
    "banned",
    "partial",
    "refused_self",
    "refused_maintainer",
    "refused_established",
    "refused_permission",
    "failed",
]
Refusal = Literal["refused_self", "refused_maintainer", "refused_established"]


@dataclass(frozen=True, slots=True)
class Target:
    """The evidence as the model named it (``shown``) and its persisted author."""

    shown: str
    user_id: str


def refusal_before_count(
    target: Target, *, own_message: bool, bot_id: str | None, maintainers: frozenset[str]
) -> Refusal | None:
    """The refusals decided without the pipeline: the bot itself, a maintainer."""
    if own_message or target.user_id == bot_id:
        return "refused_self"
    if target.user_id in maintainers:
        return "refused_maintainer"
    return None


def is_established(message_count: int) -> bool:
    return message_count >= ESTABLISHED_MESSAGES


def outcome(result: ActionResult) -> Outcome:
    """What the ingress's answer to a ``moderate`` action means."""
    report = result.moderation
    if not result.ok or report is None:
        code = result.error.code if result.error is not None else ""
        return "refused_permission" if code == "forbidden" else "failed"
    if not report.banned:
        return "failed"
    return "banned" if all(d.outcome == "deleted" for d in report.deletions) else "partial"


def announcement(platform: str, user_id: str, report: ModerationReport) -> str | None:
    """The exact text the chat is told after a ban (``None``: there was no ban to announce)."""
    if not report.banned:
        return None
    deleted = sum(d.outcome == "deleted" for d in report.deletions)
    left = len(report.deletions) - deleted
    if platform == "telegram":
        head = f"已封禁 [{SPAM_LABEL}](tg://user?id={user_id})"
        removed = "删除"
    else:
        head = f"已将一个 {SPAM_LABEL}移出本群"
        removed = "撤回"
    if not left:
        return f"{head}，并{removed}其 {deleted} 条消息。" if deleted else f"{head}。"
    if deleted:
        return f"{head}。已{removed}其 {deleted} 条消息，另有 {left} 条未能{removed}。"
    return f"{head}。其 {left} 条消息未能{removed}。"


def _named(ids: Sequence[str], shown: Mapping[str, str]) -> str:
    return ", ".join(shown.get(i, i) for i in ids)


def _why(deletion: MessageDeletion) -> str:
    error = deletion.error
    return f"{error.code}: {error.message}" if error is not None else deletion.outcome


def refusal_text(refusal: Refusal, target: Target, message_count: int = 0) -> str:
    who = f"the author of {target.shown} (uid {target.user_id})"
    if refusal == "refused_self":
        return f"refused: {target.shown} is your own message; nothing was done."
    if refusal == "refused_maintainer":
        return f"refused: {who} is a maintainer; nothing was done. Leave member conduct to the admins."
    return (
        f"refused: {who} has {message_count} messages in this chat ({ESTABLISHED_MESSAGES} or more: an "
        "established member, not a spam account); nothing was done. Leave member conduct to the admins."
    )


def result_text(
    platform: str, target: Target, result: ActionResult, shown: Mapping[str, str]
) -> tuple[Outcome, str]:
    """The tool result for the model: what actually happened and, after a ban, the announcement to
    send. ``shown`` maps canonical message ids to the ids the model reads (aliases)."""
    found = outcome(result)
    who = f"the author of {target.shown} (uid {target.user_id})"
    report = result.moderation
    if report is None:
        error = result.error
        detail = f"{error.code}: {error.message}" if error is not None else result.outcome
        if found == "refused_permission":
            return found, (
                f"refused: the bot lacks the rights to ban in this chat ({detail}); nothing was done. "
                "Do not announce a ban."
            )
        return found, f"failed: {who} was not banned ({detail}); nothing was done. Do not announce a ban."
    deleted = [d.message_id for d in report.deletions if d.outcome == "deleted"]
    kept = [d for d in report.deletions if d.outcome != "deleted"]
    lines: list[str] = []
    if not report.banned:
        error = report.ban_error
        detail = f"{error.code}: {error.message}" if error is not None else "not banned"
        lines.append(f"failed: {who} was not banned ({detail}).")
    else:
        lines.append(f"banned {who}.")
    if report.deletions:
        lines.append(
            f"deleted {len(deleted)} of {len(report.deletions)} known messages"
            + (f": {_named(deleted, shown)}." if deleted else ".")
        )
    for deletion in kept:
        lines.append(f"not deleted: {shown.get(deletion.message_id, deletion.message_id)} ({_why(deletion)})")
    text = announcement(platform, target.user_id, report)
    if text is None:
        lines.append("Do not announce a ban.")
    else:
        lines.append("Announce it now: call send_message with only `text`, set to exactly:")
        lines.append(text)
    return found, "\n".join(lines)
