"""What the driver knows of its models' sizes: each endpoint's configured context window and the
calibration of estimates against the input tokens the provider reports, learnt per endpoint as answers
arrive. :meth:`Sizing.limits` turns them and a chat's settings into that chat's limits."""

from __future__ import annotations

from larkbot.canonical.llm import LLMResponse
from larkbot.runtime.config import ChatSettings, LlmSettings

from ..core import prompt, tools
from ..core.compaction import compaction_system
from ..core.estimate import Calibration, text_tokens
from ..core.limits import Limits, Windows, limits
from ..core.probe import DECIDE_SPEC


class Sizing:
    def __init__(self, llm: LlmSettings) -> None:
        self.llm = llm
        self.probe_endpoint = llm.probe or "probe"
        self.primary_endpoint = llm.primary or "primary"
        #: Compaction runs on the primary endpoint unless one is configured for it.
        self.compaction_endpoint = llm.compaction or self.primary_endpoint
        #: Memory consolidation runs on the compaction endpoint unless one is configured for it.
        self.memory_endpoint = llm.memory or self.compaction_endpoint
        self.calibrations: dict[str, Calibration] = {}

    def observe(self, endpoint: str, estimated: int, reply: LLMResponse) -> None:
        """Learn from a reply how the endpoint's tokens relate to the estimate of its request."""
        current = self.calibrations.get(endpoint, Calibration())
        self.calibrations[endpoint] = current.observe(estimated, reply.usage.input_tokens)

    def window(self, endpoint: str, output_tokens: int | None = None) -> int | None:
        """The endpoint's window for input, in estimate units (``None``: not configured), less the
        output a request may ask for (``output_tokens``, else the endpoint's default limit)."""
        config = self.llm.endpoints.get(endpoint)
        if config is None or config.context_window_tokens is None:
            return None
        room = config.context_window_tokens - (output_tokens or config.default_max_output_tokens)
        return max(1, self.calibrations.get(endpoint, Calibration()).to_estimate(room))

    def limits(self, settings: ChatSettings, name: str, platform: str, personas: tuple[str, ...]) -> Limits:
        system = prompt.system_prompt(name, platform, personas, memory=settings.memory_enabled)
        primary_fixed = text_tokens(system) + sum(
            text_tokens(t.parameters_json) + text_tokens(t.description) for t in tools.SPECS.values()
        )
        probe_fixed = text_tokens(prompt.probe_system_prompt(name, platform, personas)) + text_tokens(
            DECIDE_SPEC.parameters_json
        )
        compaction_fixed = text_tokens(compaction_system(name, platform, settings.summary_max_est_tokens))
        return limits(
            settings,
            Windows(
                primary=self.window(self.primary_endpoint),
                probe=self.window(self.probe_endpoint),
                # A compaction request asks for up to the summary's size of output.
                compaction=self.window(self.compaction_endpoint, settings.summary_max_est_tokens),
            ),
            primary_fixed_tokens=primary_fixed,
            probe_fixed_tokens=probe_fixed,
            compaction_fixed_tokens=compaction_fixed,
        )
