"""The maintainer gate of the shell tools (SPEC §4.6), decided once per wake-up.

The shell tools (``tools.SHELL_TOOLS``) are exposed only when the chat has them on (``shell_enabled``) and
a message from a configured maintainer id arrived after the bot's last action and within
``maintainer_window_sec`` before the wake-up started. The bot's last action is its latest own message or a
step that sent or reacted; a silent ``end_turn`` or a ``no_action`` probe does not move it, so the window
is what bounds those.

Decisions:

- Only ``sender_id`` and the trusted set (configuration's ``maintainers``) are read. Display names, text,
  mentions and memories never open the gate, so a member who takes a maintainer's name cannot.
- Deleted messages, the bot's own messages and non-message segments never open it.
- Any maintainer message in the window opens it, not only a direct address: a call by name cannot be told
  apart deterministically, so the rule is deliberately broader. A mention or reply only selects which
  maintainer message is logged as the opener.
- A continuation (an open chain, or a redone pending step) reuses the decision its chain persisted on every
  step (``TurnRecord.shell_tools_exposed``): a maintainer message arriving mid-chain or during the probe
  cannot open it, and an open one stays open until the chain closes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from larkbot.canonical.context import Segment

GateOutcome = Literal["open", "closed", "reused", "disabled"]


@dataclass(frozen=True, slots=True)
class GateSettings:
    shell_enabled: bool = False
    maintainers: frozenset[str] = frozenset()
    window_ms: int = 600_000


@dataclass(frozen=True, slots=True)
class GateDecision:
    outcome: GateOutcome
    exposed: bool
    #: The maintainer message that opened it (``open`` only; logged, never shown to the model).
    maintainer_id: str | None = None
    message_id: str | None = None


def _opens(segment: Segment, settings: GateSettings, since_ms: int) -> bool:
    return (
        segment.node_type == "message"
        and not segment.is_deleted
        and not segment.is_myself
        and not segment.is_self_sent
        and segment.sender_id is not None
        and segment.sender_id in settings.maintainers
        and segment.received_at_ms > since_ms
    )


def decide(
    segments: tuple[Segment, ...], *, last_action_ms: int, started_ms: int, settings: GateSettings
) -> GateDecision:
    """The gate of a wake-up that starts a new chain, from the context it started with."""
    if not settings.shell_enabled:
        return GateDecision("disabled", False)
    # A message exactly at the window's start is in it; one at the last action is not after it.
    since = max(last_action_ms, started_ms - settings.window_ms - 1)
    found = [s for s in segments if _opens(s, settings, since)]
    if not found:
        return GateDecision("closed", False)
    addressed = [s for s in found if s.mentions_me or s.replies_to_me]
    opener = (addressed or found)[-1]
    return GateDecision("open", True, opener.sender_id, opener.message_id)


def reuse(exposed: bool) -> GateDecision:
    """The decision a continuing chain persisted."""
    return GateDecision("reused", exposed)


__all__ = ["GateDecision", "GateOutcome", "GateSettings", "decide", "reuse"]
