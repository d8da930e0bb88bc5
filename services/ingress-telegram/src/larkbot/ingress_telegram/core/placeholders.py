"""Message kinds that carry no text or media of ours — polls, dice, games, places, contacts, stories,
invoices, paid media, checklists, giveaways, rich messages — as a bracketed line with what the chat shows
of them, like Feishu's cards and votes: ``[poll: Lunch? — Noodles / Rice]``, ``[dice 🎲 4]``.

The line comes first; a caption the message also has follows on the next line. Amounts are in the
currency's main unit (Telegram counts the smallest one).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from .payload import Obj
from .senders import chat_sender, user_sender

#: Currencies without minor units (ISO 4217 exponent 0) and Telegram Stars.
_NO_MINOR_UNITS: Final = frozenset(
    {"XTR", "BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX", "UYI", "VND",
     "VUV", "XAF", "XOF", "XPF"}
)  # fmt: skip
#: The fields, in the order they are checked (a giveaway-winners message has no ``giveaway``).
KINDS: Final = (
    "poll",
    "dice",
    "game",
    "venue",  # before ``location``: a venue message also carries its location
    "location",
    "contact",
    "story",
    "invoice",
    "paid_media",
    "checklist",
    "giveaway",
    "giveaway_winners",
    "rich_message",
)


def _joined(parts: list[str]) -> str:
    return " / ".join(p for p in parts if p)


def _amount(total: int, currency: str) -> str:
    if currency in _NO_MINOR_UNITS:
        return f"{total} {currency}"
    return f"{total / 100:.2f} {currency}"


def _poll(poll: Obj) -> str:
    kind = "quiz" if poll.opt_str("type") == "quiz" else "poll"
    if poll.bool_("is_closed"):
        kind += " (closed)"
    options = _joined([o.str_("text") for o in poll.objs("options")])
    return f"[{kind}: {poll.str_('question')} — {options}]"


def _checklist(checklist: Obj) -> str:
    tasks = [
        (
            "☑ "
            if t.has("completed_by_user") or t.has("completed_by_chat") or t.opt_int("completion_date")
            else "☐ "
        )
        + t.str_("text")
        for t in checklist.objs("tasks")
    ]
    return f"[checklist: {checklist.str_('title')} — {_joined(tasks)}]"


def _giveaway(body: Obj, winners: bool) -> str:
    prize = body.opt_str("prize_description")
    stars = body.opt_int("prize_star_count")
    months = body.opt_int("premium_subscription_month_count")
    what = [f"{body.int_('winner_count')} winners"]
    if stars:
        what.append(f"{stars} stars")
    if months:
        what.append(f"{months} months of Premium")
    if prize:
        what.append(prize)
    if winners:
        names = ", ".join(user_sender(u).display_name for u in body.objs("winners"))
        return f"[giveaway winners: {names} — {', '.join(what)}]"
    return f"[giveaway: {', '.join(what)}]"


def _rich_text(value: object) -> Iterator[str]:
    """Every string under a ``text`` key, in document order (rich text nests styles as objects)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _rich_text(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key == "text" or isinstance(item, dict | list):
                yield from _rich_text(item)


def _rich_message(body: Obj) -> str:
    lines = ["".join(_rich_text(block.raw)) for block in body.objs("blocks")]
    return "\n".join(line for line in lines if line) or "[rich message]"


def placeholder(msg: Obj) -> str | None:
    """The line shown for the first kind in :data:`KINDS` the message carries, or ``None``."""
    kind = next((k for k in KINDS if msg.has(k)), None)
    if kind is None:
        return None
    body = msg.obj(kind)
    if kind == "poll":
        return _poll(body)
    if kind == "dice":
        return f"[dice {body.str_('emoji')} {body.int_('value')}]"
    if kind == "game":
        return f"[game: {body.str_('title')} — {body.str_('description')}]"
    if kind == "venue":
        return f"[venue: {body.str_('title')} — {body.str_('address')}]"
    if kind == "location":
        live = "live location" if body.opt_int("live_period") else "location"
        return f"[{live}: {body.raw.get('latitude')}, {body.raw.get('longitude')}]"
    if kind == "contact":
        first, last = body.str_("first_name"), body.opt_str("last_name")
        name = f"{first} {last}" if last else first
        return f"[contact: {name}, {body.str_('phone_number')}]"
    if kind == "story":
        return f"[story from {chat_sender(body.obj('chat')).display_name}]"
    if kind == "invoice":
        price = _amount(body.int_("total_amount"), body.str_("currency"))
        return f"[invoice: {body.str_('title')} — {body.str_('description')}, {price}]"
    if kind == "paid_media":
        count = len(body.objs("paid_media"))
        return f"[paid media: {count} item{'s' if count != 1 else ''} for {body.int_('star_count')} stars]"
    if kind == "checklist":
        return _checklist(body)
    if kind in ("giveaway", "giveaway_winners"):
        return _giveaway(body, winners=kind == "giveaway_winners")
    return _rich_message(body)
