"""Contact names: which source wins, and when the contact API is asked again. Pure (wall-clock seconds
are passed in).

The receive event carries no sender name (SPEC §8). Names come from, in order of authority:

1. the **contact API** (``GET /contact/v3/users/:open_id``) — and the bot's own name from bot info: the
   person's name in the directory;
2. names a **payload** discloses — mentions and member lists;
3. nothing: the open_id is shown.

The rule (:func:`merge`): a contact answer with a name replaces any name (a rename in the directory is a
real rename); a payload name is taken only for an id that has no name yet — it never replaces a name, not
even another payload's, so names seen in different mentions cannot alternate; a failed lookup never
erases a name. Every process and replica applies this one function to the one shared table, so a name,
once known, is the same everywhere and after a restart.

The contact API is asked for an id it never answered for, and again ``ttl_s`` after its last answer
(:func:`needs_lookup`); an answer without a name (the user is outside the app's contact scope) counts as
an answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Source(StrEnum):
    CONTACT = "contact"
    PAYLOAD = "payload"


@dataclass(frozen=True, slots=True)
class NameEntry:
    open_id: str
    #: The name to show, ``None`` while nothing named the id.
    name: str | None
    #: Where ``name`` came from (``None`` with no name).
    source: Source | None
    #: Unix time of the contact API's last answer for this id, found or not; ``None`` if never asked.
    checked_at: float | None

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "open_id": self.open_id,
                "name": self.name,
                "source": self.source.value if self.source else None,
                "checked_at": self.checked_at,
            },
            ensure_ascii=False,
        ).encode()

    @classmethod
    def from_json(cls, data: bytes) -> NameEntry:
        """Raises ``ValueError`` for anything this module did not write."""
        raw: Any = json.loads(data)
        if not isinstance(raw, dict) or not isinstance(raw.get("open_id"), str):
            raise ValueError("not a name entry")
        name, source, checked = raw.get("name"), raw.get("source"), raw.get("checked_at")
        if not (name is None or isinstance(name, str)) or not (
            checked is None or isinstance(checked, int | float)
        ):
            raise ValueError("not a name entry")
        entry = cls(raw["open_id"], name, Source(source) if source is not None else None, checked)
        if (entry.name is None) != (entry.source is None):
            raise ValueError("a name entry's name and source go together")
        return entry


def contact_answer(open_id: str, name: str | None, now: float) -> NameEntry:
    return NameEntry(open_id, name, Source.CONTACT if name else None, now)


def payload_name(open_id: str, name: str) -> NameEntry:
    return NameEntry(open_id, name, Source.PAYLOAD, None)


def merge(current: NameEntry | None, incoming: NameEntry) -> NameEntry | None:
    """The entry after learning ``incoming`` (a contact answer or a payload name), or ``None`` when it
    changes nothing."""
    if incoming.source is Source.PAYLOAD:
        if current is not None and current.name is not None:
            return None
        checked = current.checked_at if current is not None else None
        return NameEntry(incoming.open_id, incoming.name, Source.PAYLOAD, checked)
    if incoming.name is None and current is not None:
        merged = NameEntry(current.open_id, current.name, current.source, incoming.checked_at)
    else:
        merged = incoming
    return None if merged == current else merged


def needs_lookup(entry: NameEntry | None, now: float, ttl_s: float) -> bool:
    return entry is None or entry.checked_at is None or now - entry.checked_at >= ttl_s
