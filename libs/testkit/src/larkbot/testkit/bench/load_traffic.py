"""What the members of ``make bench-load``'s chats do, and when (pure: no I/O, no clock).

A Poisson process over all chats at ``per_chat_per_min`` acts per chat per minute; each act goes to a
chat drawn uniformly and is one of :data:`MIX`'s kinds: a plain text message, a message mentioning the
bot (the only ones it is asked to answer), a photo, a reaction to an earlier message of the chat, or an
edit of one. Feishu delivers no edit event, so on Feishu that share is a recall (the other change a
member makes to what was said). A reaction or edit in a chat with no message yet is a text message
instead. The first half of the chats are Telegram groups, the rest Feishu groups. The same arguments give
the same acts.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, Literal

__all__ = ["MIX", "Act", "Kind", "Platform", "plan", "split"]

Kind = Literal["text", "mention", "media", "reaction", "edit"]
Platform = Literal["telegram", "feishu"]

#: The share of each kind of act; a busy group's day: mostly talk, some of it to the bot, photos,
#: reactions and second thoughts.
MIX: Final[dict[Kind, float]] = {
    "text": 0.55,
    "mention": 0.10,
    "media": 0.08,
    "reaction": 0.17,
    "edit": 0.10,
}
#: Members per chat (who sends, who reacts).
MEMBERS: Final = 5


@dataclass(frozen=True, slots=True)
class Act:
    """One member's act at ``at_s`` seconds into the run, in chat ``chat`` of ``platform`` (its index among
    that platform's chats). ``n`` is the chat's message it creates (text, mention, media: numbered from
    1) or acts on (reaction, edit; on Feishu the edit is a recall)."""

    at_s: float
    platform: Platform
    chat: int
    kind: Kind
    n: int
    user: int


def split(chats: int) -> tuple[int, int]:
    """(Telegram chats, Feishu chats) of a run of ``chats``."""
    telegram = (chats + 1) // 2
    return telegram, chats - telegram


def plan(chats: int, seconds: float, per_chat_per_min: float, seed: int = 27) -> Iterator[Act]:
    """The acts of a run of ``seconds``, in time order."""
    rng = random.Random(seed)
    telegram, _feishu = split(chats)
    rate_per_s = chats * per_chat_per_min / 60
    kinds = list(MIX)
    weights = [MIX[k] for k in kinds]
    sent = [0] * chats  # messages created per chat
    live: list[list[int]] = [[] for _ in range(chats)]  # messages not recalled, per chat
    at = 0.0
    while True:
        at += rng.expovariate(rate_per_s)
        if at >= seconds:
            return
        index = rng.randrange(chats)
        platform: Platform = "telegram" if index < telegram else "feishu"
        chat = index if platform == "telegram" else index - telegram
        kind: Kind = rng.choices(kinds, weights)[0]
        user = rng.randrange(MEMBERS)
        if kind in ("reaction", "edit") and not live[index]:
            kind = "text"
        if kind in ("reaction", "edit"):
            target = rng.choice(live[index])
            if kind == "edit" and platform == "feishu":
                live[index].remove(target)
            yield Act(at, platform, chat, kind, target, user)
            continue
        sent[index] += 1
        live[index].append(sent[index])
        yield Act(at, platform, chat, kind, sent[index], user)
