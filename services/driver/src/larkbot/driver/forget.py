"""The operator's one write into the driver's tables: forgetting a person (``larkbot memory forget``).

It runs in the operator's process, through the driver's own store, so it works while the driver is down
(the one deletion there is must not wait for a healthy service), and it never migrates: a database the
driver has not created yet raises :class:`~larkbot.driver.read.DriverNotReady`. A forget is one
transaction: the driver, running or not, sees the person's memories either all there or all gone.
"""

from __future__ import annotations

from larkbot.runtime.db import create_engine

from .memory.memories import MemoryStore
from .read import DriverNotReady
from .read._errors import not_ready_on_failure


async def forget_person(database_url: str, platform: str, person_id: str, *, now_ms: int) -> int:
    """Delete every memory of ``person_id`` on ``platform`` (with their patches, search rows and
    consolidation state) in one transaction, and log the forget as the operator's, without content.
    Returns how many memories were deleted."""
    engine = create_engine(database_url)
    try:
        with not_ready_on_failure():
            return await MemoryStore(engine).forget(platform, person_id, actor="operator", now_ms=now_ms)
    finally:
        await engine.dispose()


__all__ = ["DriverNotReady", "forget_person"]
