"""The size limits of one chat's requests, in estimate units, from its settings and the models' windows.

Settings name estimates (``max_context_est_tokens`` …); a model's window is in its own tokens: the
configured ``context_window_tokens``, or what the driver learnt from the model's refusals, whichever is
smaller (``adapters.sizing``). A window becomes an estimate-unit limit through the model's
:class:`~.estimate.Calibration`, less the output it may write (``default_max_output_tokens``). Where a
window is known, every threshold below is also bounded by it, so a small local model compacts early
instead of overflowing.

- ``request_limit``: the largest primary request (``None``: no window known);
- ``trigger``: compaction starts when the history (RC + TR after the cursor) exceeds it;
- ``target``: what compaction leaves of the history, and what a trimmed history keeps at most;
- ``compaction_input_cap``: how much one compaction request may summarize (the previous summary and the
  instructions not counted); beyond it the cursor moves only as far as was summarized;
- ``probe_budget``: the probe's window;
- ``summary_max`` / ``probe_summary_max``: the summary's size, as written and as the probe shows it.

A small window is shared, not carved up by fixed amounts: what the system prompt and the tools leave
(the *room*) goes to the history first, the summary takes at most ``SUMMARY_SHARE`` of it and the reserve
at most ``RESERVE_SHARE``. (With an 8,000-token model, fixed amounts — a 3,000-token summary and a
1,000-token reserve — left the history about 2,000 estimated tokens: a compaction every dozen messages.)
"""

from __future__ import annotations

from dataclasses import dataclass

from larkbot.runtime.config import ChatSettings

#: Headroom of the compaction input over ``max_context_est_tokens`` (the guide's "+20K").
COMPACTION_HEADROOM_TOKENS = 20_000
#: The late-binding message, the tool definitions' growth and a safety margin, not counted elsewhere.
RESERVE_TOKENS = 1_000
#: At most this share of a window's room goes to the summary, and this one to the reserve.
SUMMARY_SHARE = 0.10
RESERVE_SHARE = 0.10


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
    summary_max: int
    probe_summary_max: int


def _shares(room: int, summary: int) -> tuple[int, int]:
    """The summary's size and the reserve within ``room`` (see the module docstring)."""
    return min(summary, max(1, int(room * SUMMARY_SHARE))), min(RESERVE_TOKENS, int(room * RESERVE_SHARE))


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
        room = max(1, windows.primary - primary_fixed_tokens)
        summary, reserve = _shares(room, summary)
        trigger = max(1, min(trigger, room - summary - reserve))
    target = max(1, min(settings.working_window_est_tokens, trigger // 2))
    cap = settings.max_context_est_tokens + COMPACTION_HEADROOM_TOKENS
    if windows.compaction is not None:
        room = max(1, windows.compaction - compaction_fixed_tokens)
        _summary, reserve = _shares(room, summary)
        cap = min(cap, room - summary - reserve)
    probe = settings.probe_context_est_tokens
    probe_summary = settings.probe_summary_max_est_tokens
    if windows.probe is not None:
        room = max(1, windows.probe - probe_fixed_tokens)
        probe_summary, reserve = _shares(room, probe_summary)
        probe = min(probe, room - probe_summary - reserve)
    return Limits(
        request_limit=request_limit,
        trigger=trigger,
        target=target,
        compaction_input_cap=max(1, cap),
        probe_budget=max(1, probe),
        summary_max=summary,
        probe_summary_max=probe_summary,
    )
