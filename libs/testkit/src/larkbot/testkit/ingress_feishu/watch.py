"""Conditions over ingress-feishu's contact-name table: its observer's reports
(``larkbot.ingress_feishu.adapters.contacts.ContactsObserver``) — the mirror caught up with the bucket,
no lookup left in flight."""

from __future__ import annotations

from larkbot.canonical.names import KV_FEISHU_CONTACT_NAMES
from larkbot.runtime.bus import Bus

from ..conditions import DEFAULT_TIMEOUT_S, Conditions


class ContactsWatch:
    """The observer of one :class:`~larkbot.ingress_feishu.adapters.contacts.Contacts` table."""

    def __init__(self) -> None:
        self.conditions = Conditions()
        #: The newest bucket revision the table's mirror reported taking in.
        self.revision = 0
        #: Contact lookups running or waiting, as last reported.
        self.in_flight = 0

    def mirrored(self, revision: int) -> None:
        self.revision = max(self.revision, revision)
        self.conditions.changed()

    def lookups(self, in_flight: int) -> None:
        self.in_flight = in_flight
        self.conditions.changed()

    async def settled(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        """Return once no contact lookup is running or waiting."""
        await self.conditions.until(lambda: self.in_flight == 0, timeout_s)

    async def caught_up(self, bus: Bus, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        """Return once the mirror holds everything written to the bucket (read on ``bus``) before the
        call."""
        status = await bus.js.stream_info(f"KV_{KV_FEISHU_CONTACT_NAMES}")
        last = status.state.last_seq
        await self.conditions.until(lambda: self.revision >= last, timeout_s)
