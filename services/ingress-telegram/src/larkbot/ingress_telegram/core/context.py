"""What every event of one update shares: the chat it is recorded under, clocks, and the message ids.

A group upgraded to a supergroup continues as the chat it was configured as (:mod:`.memory`): its
updates arrive under the supergroup's id, are recorded under the group's, and the supergroup's message
ids get the prefix :data:`MIGRATED_PREFIX` — the two chats number their messages independently, so the
group's ``5`` and the supergroup's ``5`` must stay two messages of the one chat.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from larkbot.canonical.events import ChatType
from larkbot.canonical.names import Platform

from .errors import MalformedUpdate
from .payload import Obj

#: Message ids of a supergroup that continues a migrated group: ``s<id>``.
MIGRATED_PREFIX: Final = "s"
_CHAT_TYPES: Final = frozenset({"private", "group", "supergroup", "channel"})


@dataclass(frozen=True, slots=True)
class UpdateContext:
    chat_id: str
    chat_type: ChatType | None
    received_at_ms: int
    utc_offset_min: int
    event_id: str | None
    #: ``MIGRATED_PREFIX`` for a supergroup recorded under the group it continues, else ``""``.
    id_prefix: str = ""

    def message_id(self, platform_id: int) -> str:
        return f"{self.id_prefix}{platform_id}"

    def fields(self, dedup_key: str, timestamp_sec: float) -> dict[str, Any]:
        return {
            "platform": Platform.TELEGRAM,
            "chat_id": self.chat_id,
            "chat_type": self.chat_type,
            "dedup_key": dedup_key,
            "event_id": self.event_id,
            "received_at_ms": self.received_at_ms,
            "timestamp_sec": timestamp_sec,
            "utc_offset_min": self.utc_offset_min,
        }


def chat_type(chat: Obj) -> ChatType | None:
    kind = chat.str_("type")
    if kind not in _CHAT_TYPES:
        raise MalformedUpdate(f"{chat.path}.type", "unknown chat type")
    return kind  # type: ignore[return-value]


def platform_message_id(message_id: str) -> int:
    """The Bot API's id of a canonical message id (``s5`` → 5)."""
    return int(message_id.removeprefix(MIGRATED_PREFIX))
