"""What the driver knows of its models' sizes: each endpoint's context window — configured, or learnt from
the model's refusals — and the calibration of estimates against the input tokens the provider reports,
learnt per endpoint as answers arrive. :meth:`Sizing.limits` turns them and a chat's settings into that
chat's limits.

A ``context_length`` refusal teaches the window (:meth:`Sizing.refused`): the window the provider stated,
else a window just below the refused request (its size in the model's tokens, as stated or calibrated,
less ``LEARNT_MARGIN``). A learnt window only ever shrinks, and lives as long as the process: a replica
that restarts learns it again from the first refusal. Configure ``context_window_tokens`` to avoid that
refusal altogether.
"""

from __future__ import annotations

from functools import lru_cache

from larkbot.canonical.llm import LLMError, LLMResponse
from larkbot.driver.compaction.core.compaction import compaction_system
from larkbot.driver.tools.core import tools
from larkbot.runtime.config import ChatSettings, LlmSettings

from .. import metrics
from .core import prompt
from .core.estimate import Calibration, text_tokens
from .core.limits import Limits, Windows, limits
from .core.probe import DECIDE_SPEC

#: A refusal that states no window: the window is taken this much below the refused request's size.
LEARNT_MARGIN = 0.15


class Sizing:
    def __init__(self, llm: LlmSettings) -> None:
        self.llm = llm
        self.probe_endpoint = llm.probe or "probe"
        self.primary_endpoint = llm.primary or "primary"
        self.calibrations: dict[str, Calibration] = {}
        #: Windows learnt from refusals, in the model's tokens (smaller than any configured one).
        self.learnt: dict[str, int] = {}

    def endpoint(self, purpose: str, platform: str, chat_id: str) -> str:
        """The endpoint of a chat's model call for ``purpose``: the first rule of ``llm.routes`` that
        matches, else the purpose's own — compaction that of the chat's primary and memory that of its
        compaction, unless configured. Counted by purpose, endpoint and what decided it."""
        chosen, by = self._choose(purpose, platform, chat_id)
        metrics.LLM_ROUTES.labels(purpose, chosen, by).inc()
        return chosen

    def routed(self, purpose: str, platform: str, chat_id: str) -> str:
        """:meth:`endpoint` without counting a decision (sizing a chat's requests is not a call)."""
        return self._choose(purpose, platform, chat_id)[0]

    def _choose(self, purpose: str, platform: str, chat_id: str) -> tuple[str, str]:
        routed = self.llm.route(purpose, platform, chat_id)
        if routed is not None:
            return routed, "rule"
        match purpose:
            case "probe":
                return self.probe_endpoint, "default"
            case "primary":
                return self.primary_endpoint, "default"
            case "compaction" if self.llm.compaction is not None:
                return self.llm.compaction, "default"
            case "compaction":
                return self._choose("primary", platform, chat_id)
            case "memory" if self.llm.memory is not None:
                return self.llm.memory, "default"
            case "memory":
                return self._choose("compaction", platform, chat_id)
        raise ValueError(f"the driver makes no {purpose} calls")

    def observe(self, endpoint: str, estimated: int, reply: LLMResponse) -> None:
        """Learn from a reply how the endpoint's tokens relate to the estimate of its request."""
        current = self.calibrations.get(endpoint, Calibration())
        self.calibrations[endpoint] = current.observe(estimated, reply.usage.input_tokens)

    def refused(self, endpoint: str, estimated: int, error: LLMError) -> None:
        """Learn from a ``context_length`` refusal of a request estimated at ``estimated`` (see the module
        docstring)."""
        calibration = self.calibrations.get(endpoint, Calibration())
        if error.input_tokens is not None:
            calibration = calibration.observe(estimated, error.input_tokens)
            self.calibrations[endpoint] = calibration
        if error.window_tokens is not None:
            window = error.window_tokens
        else:
            refused = error.input_tokens or round(estimated * calibration.factor)
            window = int(refused * (1 - LEARNT_MARGIN)) + self._output_tokens(endpoint)
        current = self.known_window(endpoint)
        if current is None or window < current:
            self.learnt[endpoint] = max(1, window)

    def known_window(self, endpoint: str) -> int | None:
        """The endpoint's window in its own tokens: the smaller of the configured and the learnt one."""
        config = self.llm.endpoints.get(endpoint)
        known = [
            w for w in (config.context_window_tokens if config else None, self.learnt.get(endpoint)) if w
        ]
        return min(known) if known else None

    def _output_tokens(self, endpoint: str) -> int:
        config = self.llm.endpoints.get(endpoint)
        return config.default_max_output_tokens if config is not None else 0

    def window(self, endpoint: str, output_tokens: int | None = None) -> int | None:
        """The endpoint's window for input, in estimate units (``None``: not known), less the output a
        request may ask for (``output_tokens``, else the endpoint's default limit)."""
        window = self.known_window(endpoint)
        if window is None:
            return None
        room = window - (output_tokens or self._output_tokens(endpoint))
        return max(1, self.calibrations.get(endpoint, Calibration()).to_estimate(room))

    def limits(
        self, settings: ChatSettings, name: str, platform: str, chat_id: str, personas: tuple[str, ...]
    ) -> Limits:
        primary_fixed, probe_fixed, compaction_fixed = fixed_tokens(
            name, platform, personas, settings.memory_enabled, settings.summary_max_est_tokens
        )
        return limits(
            settings,
            Windows(
                primary=self.window(self.routed("primary", platform, chat_id)),
                probe=self.window(self.routed("probe", platform, chat_id)),
                # A compaction request asks for up to the summary's size of output.
                compaction=self.window(
                    self.routed("compaction", platform, chat_id), settings.summary_max_est_tokens
                ),
            ),
            primary_fixed_tokens=primary_fixed,
            probe_fixed_tokens=probe_fixed,
            compaction_fixed_tokens=compaction_fixed,
        )


@lru_cache(maxsize=1024)
def fixed_tokens(
    name: str, platform: str, personas: tuple[str, ...], memory: bool, summary_max_est_tokens: int
) -> tuple[int, int, int]:
    """The estimated tokens of what every primary, probe and compaction request of a chat holds whatever
    its history: the system prompts, and the tools' specifications. Asked at every wake-up, the same for
    every wake-up of a chat (the prompts are byte-stable): counted once per persona and chat settings."""
    system = prompt.system_prompt(name, platform, personas, memory=memory)
    primary = text_tokens(system) + sum(
        text_tokens(t.parameters_json) + text_tokens(t.description) for t in tools.SPECS.values()
    )
    probe = text_tokens(prompt.probe_system_prompt(name, platform, personas)) + text_tokens(
        DECIDE_SPEC.parameters_json
    )
    compaction = text_tokens(compaction_system(name, platform, summary_max_est_tokens))
    return primary, probe, compaction
