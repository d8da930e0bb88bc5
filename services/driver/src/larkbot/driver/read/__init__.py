"""``larkbot.driver.read``: the driver's public read API, for operator tools (the web inspector,
``larkbot audit``, ``larkbot memory``), which never import the driver's adapters, tables or migrations.

::

    async with open_reads(database_url(config, Service.DRIVER)) as reads:
        for chat in await reads.chats():
            ...

A library over the driver's database, not a request to the driver on the bus: the inspector must work
while the driver is down (that is when one looks), and the reads are the driver's own code, shipped in
the same release as its migrations, so they always read the schema those create. :func:`open_reads`'s
engine refuses writes (SQLite ``query_only``, PostgreSQL read-only transactions); nothing here migrates.
Every read returns frozen records — the driver's own, re-exported here (a request's
:class:`CacheBreak` among them), and :class:`WakeDetail`,
:class:`ShownRequest` and :class:`PersonMemory` — never database rows.

Errors: :class:`DriverNotReady` (a :class:`~larkbot.canonical.errors.RetryableError`), when the database
does not answer or the driver has not created its tables yet.

The one write an operator makes, forgetting a person, is :func:`larkbot.driver.forget.forget_person`.
"""

from larkbot.driver.audit.audit import ChatActivity
from larkbot.driver.audit.core.audit import ContextRange, Tokens, WakeAudit
from larkbot.driver.audit.core.cachebreak import CacheBreak
from larkbot.driver.audit.core.requestlog import Block, RecordedRequest, SharedPrefix
from larkbot.driver.compaction.core.compaction import Summary
from larkbot.driver.memory.core.memory import Memory, MemoryPatch, PatchChange
from larkbot.driver.memory.memories import MemoryStats
from larkbot.driver.wake.core.records import ProbeRecord, TurnRecord

from ._errors import DriverNotReady
from ._reads import DriverReads, open_reads
from ._records import PersonMemory, ShownRequest, WakeDetail

__all__ = [
    "Block",
    "CacheBreak",
    "ChatActivity",
    "ContextRange",
    "DriverNotReady",
    "DriverReads",
    "Memory",
    "MemoryPatch",
    "MemoryStats",
    "PatchChange",
    "PersonMemory",
    "ProbeRecord",
    "RecordedRequest",
    "SharedPrefix",
    "ShownRequest",
    "Summary",
    "Tokens",
    "TurnRecord",
    "WakeAudit",
    "WakeDetail",
    "open_reads",
]
