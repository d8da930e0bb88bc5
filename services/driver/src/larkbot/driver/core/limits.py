"""The size limits of one chat's requests, in estimate units, from its settings and the models' windows.

Settings name estimates (``max_context_est_tokens`` …); a model's ``context_window_tokens`` is in its own
tokens. A window becomes an estimate-unit limit through the model's :class:`~.estimate.Calibration`,
less the output it may write (``default_max_output_tokens``). Where a window is known, every threshold
below is also bounded by it, so a small local model compacts early instead of overflowing.

- ``request_limit``: the largest primary request (``None``: no window configured);
- ``trigger``: compaction starts when the history (RC + TR after the cursor) exceeds it;
- ``target``: what compaction leaves of the history, and what a trimmed history keeps at most;
- ``compaction_input_cap``: how much one compaction request may summarize (the previous summary and the
  instructions not counted); beyond it the cursor moves only as far as was summarized;
- ``probe_budget``: the probe's window.
"""

from __future__ import annotations

from dataclasses import dataclass

from larkbot.runtime.config import ChatSettings

#: Headroom of the compaction input over ``max_context_est_tokens`` (the guide's "+20K").
COMPACTION_HEADROOM_TOKENS = 20_000
#: The late-binding message, the tool definitions' growth and a safety margin, not counted elsewhere.
RESERVE_TOKENS = 1_000


@dataclass(frozen=True, slots=True)
class Windows:
    """Models' context windows in estimate units, output reserved (``None``: not configured)."""

    primary: int | None = None
    probe: int | None = None
    compaction: int | None = None


@dataclass(frozen=True, slots=True)
class Limits:
    request_limit: int | None
    trigger: int
    target: int
    compaction_input_cap: int
    probe_budget: int


def limits(
    settings: ChatSettings,
    windows: Windows,
    *,
    primary_fixed_tokens: int,
    probe_fixed_tokens: int,
    compaction_fixed_tokens: int,
) -> Limits:
    """``*_fixed_tokens``: what every request of that kind carries besides the history (system prompt,
    tools)."""
    summary = settings.summary_max_est_tokens
    trigger = settings.max_context_est_tokens
    request_limit = None
    if windows.primary is not None:
        request_limit = windows.primary
        room = windows.primary - primary_fixed_tokens - summary - RESERVE_TOKENS
        trigger = max(1, min(trigger, room))
    target = max(1, min(settings.working_window_est_tokens, trigger // 2))
    cap = settings.max_context_est_tokens + COMPACTION_HEADROOM_TOKENS
    if windows.compaction is not None:
        cap = min(cap, windows.compaction - compaction_fixed_tokens - summary - RESERVE_TOKENS)
    probe = settings.probe_context_est_tokens
    if windows.probe is not None:
        room = windows.probe - probe_fixed_tokens - settings.probe_summary_max_est_tokens - RESERVE_TOKENS
        probe = min(probe, room)
    return Limits(
        request_limit=request_limit,
        trigger=trigger,
        target=target,
        compaction_input_cap=max(1, cap),
        probe_budget=max(1, probe),
    )
