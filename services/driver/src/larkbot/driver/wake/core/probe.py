"""The probe gate's tool and the reading of its answer (SPEC §4.2).

The probe gets exactly one tool, ``decide``, and is forced to call it. Anything else — no call, another
tool, arguments that are not JSON or not in the schema — fails closed to ``no_action``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

from larkbot.canonical.llm import LLMResponse, ToolCallPart, ToolChoice, ToolSpec

from .records import DECISIONS, Decision

DECIDE: Final = "decide"
DECIDE_SPEC: Final = ToolSpec.of(
    DECIDE,
    "Record whether the bot should act now, and why.",
    {
        "type": "object",
        "properties": {
            "should_act": {"enum": list(DECISIONS)},
            "reason": {"type": "string", "maxLength": 500},
        },
        "required": ["should_act", "reason"],
        "additionalProperties": False,
    },
)
DECIDE_CHOICE: Final = ToolChoice(mode="tool", name=DECIDE)
MAX_REASON_CHARS: Final = 500


@dataclass(frozen=True, slots=True)
class ProbeVerdict:
    decision: Decision
    reason: str
    failed_closed: bool

    @property
    def activated(self) -> bool:
        return self.decision != "no_action"


def read_verdict(response: LLMResponse) -> ProbeVerdict:
    calls = [p for p in response.message.parts if isinstance(p, ToolCallPart) and p.name == DECIDE]
    if not calls:
        return ProbeVerdict("no_action", "probe did not call decide", True)
    try:
        args = json.loads(calls[0].arguments_json)
    except ValueError:
        return ProbeVerdict("no_action", "probe arguments were not JSON", True)
    if not isinstance(args, dict):
        return ProbeVerdict("no_action", "probe arguments were not an object", True)
    decision = args.get("should_act")
    reason = args.get("reason")
    if decision not in DECISIONS or not isinstance(reason, str):
        return ProbeVerdict("no_action", "probe decision was malformed", True)
    verdict: Decision = decision
    return ProbeVerdict(verdict, reason.strip()[:MAX_REASON_CHARS] or "(no reason given)", False)
