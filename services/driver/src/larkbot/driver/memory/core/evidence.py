"""Whether cited messages can back a memory about a person (SPEC §7). Pure: the executor gathers what is
known of each cited message (from the live context, else ``pipeline.history``) and asks :func:`check`.

A memory rests only on the person's own words: every evidence message must exist in this chat and be
written by that person — not the bot's, not another bot's, not deleted, not forwarded (the words are
someone else's), and not a message the person merely quoted or replied to. The first failing message
decides; the reason is written for the model, which can correct the call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from larkbot.canonical.context import HistoryItem, Segment

Rejection = Literal["not_found", "myself", "deleted", "bot", "forwarded", "quoted", "not_author"]


@dataclass(frozen=True, slots=True)
class Provenance:
    """What is known of one message: its author and how it came to the chat."""

    message_id: str
    sender_id: str | None
    is_myself: bool
    is_bot: bool
    is_deleted: bool
    is_forwarded: bool
    reply_to_message_id: str | None

    @classmethod
    def of_segment(cls, s: Segment) -> Provenance:
        assert s.message_id is not None
        return cls(
            s.message_id,
            s.sender_id,
            s.is_myself or s.is_self_sent,
            s.is_bot,
            s.is_deleted,
            s.is_forwarded,
            s.reply_to_message_id,
        )

    @classmethod
    def of_history(cls, item: HistoryItem) -> Provenance:
        return cls(
            item.message_id,
            item.sender_id,
            item.is_myself or item.is_self_sent,
            item.is_bot,
            item.is_deleted,
            item.is_forwarded,
            item.reply_to_message_id,
        )


@dataclass(frozen=True, slots=True)
class Rejected:
    reason: Rejection
    message: str


def check(
    person: str,
    cited: Sequence[tuple[str, str | None]],
    known: Mapping[str, Provenance],
    replies: Iterable[Provenance] = (),
) -> tuple[str, ...] | Rejected:
    """The canonical evidence ids, or why they cannot back a memory about ``person``.

    ``cited``: each id as the model wrote it with its canonical id (``None``: it resolved to nothing);
    ``known``: provenance by canonical id; ``replies``: other messages known here, to tell a message the
    person quoted or replied to from one they had nothing to do with."""
    replied_by_person = {p.reply_to_message_id for p in (*replies, *known.values()) if p.sender_id == person}
    out: list[str] = []
    for shown, canonical in cited:
        found = known.get(canonical) if canonical is not None else None
        if found is None:
            return Rejected("not_found", f"no message {shown!r} in this chat")
        if found.is_myself:
            return Rejected("myself", f"{shown} is your own message, not {person}'s")
        if found.is_deleted:
            return Rejected("deleted", f"{shown} was deleted")
        if found.is_bot:
            return Rejected("bot", f"{shown} was written by a bot")
        if found.sender_id != person:
            author = found.sender_id or "someone else"
            if found.message_id in replied_by_person:
                return Rejected(
                    "quoted", f"{shown} is a message {person} quoted or replied to; its words are {author}'s"
                )
            return Rejected("not_author", f"{shown} was written by {author}, not by {person}")
        if found.is_forwarded:
            return Rejected("forwarded", f"{shown} is a forwarded message: its words are not {person}'s own")
        if found.message_id not in out:
            out.append(found.message_id)
    return tuple(out)
