"""What one ``llm.generate`` call did: the record the metrics (``metrics.record``) and the benchmark read."""

from __future__ import annotations

from dataclasses import dataclass, field

from larkbot.canonical.llm import Usage


@dataclass(slots=True)
class Outcome:
    """What one call did, for metrics and benchmarks."""

    model: str
    purpose: str
    outcome: str
    total_s: float = 0.0
    provider_s: list[float] = field(default_factory=list)
    waited_s: float = 0.0
    retries: list[str] = field(default_factory=list)
    usage: Usage | None = None
    images_omitted: int = 0
    attempts: int = 0

    @property
    def overhead_s(self) -> float:
        return max(0.0, self.total_s - sum(self.provider_s) - self.waited_s)
