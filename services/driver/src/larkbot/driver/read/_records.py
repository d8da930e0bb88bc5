"""The records the read API returns that are views of several stores at once (every other record it
returns is the driver's own, re-exported by the package)."""

from __future__ import annotations

from dataclasses import dataclass

from larkbot.driver.audit.core.audit import WakeAudit
from larkbot.driver.audit.core.cachebreak import CacheBreak
from larkbot.driver.audit.core.requestlog import RecordedRequest, SharedPrefix
from larkbot.driver.memory.core.memory import Memory, MemoryPatch
from larkbot.driver.wake.core.records import ProbeRecord, TurnRecord


@dataclass(frozen=True, slots=True)
class ShownRequest:
    """A model request as sent, and what of it matched the same chat's previous request of its kind that
    reached the model (``previous_id`` is that request's id; ``None``: there was none). A primary request
    that reached the model and failed to extend that one names its break (``core.cachebreak``, the
    classifier behind ``larkbot_driver_prompt_cache_breaks_total``)."""

    request: RecordedRequest
    previous_id: str | None
    prefix: SharedPrefix
    cache_break: CacheBreak | None


@dataclass(frozen=True, slots=True)
class WakeDetail:
    """One wake-up: its audit record, the probe and primary responses it stored, its model requests."""

    audit: WakeAudit
    probes: tuple[ProbeRecord, ...]
    steps: tuple[TurnRecord, ...]
    requests: tuple[ShownRequest, ...]


@dataclass(frozen=True, slots=True)
class PersonMemory:
    """A memory of one person as it is now, with the patches that made it so (oldest first)."""

    memory: Memory
    patches: tuple[MemoryPatch, ...]
