"""The audit trail's record of one wake-up (docs/driver.md "Audit trail"): what the wake-up saw (the
rendered context's range and hash), what the probe decided, what the primary did and spent, and how it
ended. :class:`AuditDraft` gathers it from what the ports see; :meth:`AuditDraft.record` freezes it.

The draft also gathers the wake-up's model requests and the messages it sent (``core.requestlog``),
written beside the record (:meth:`AuditDraft.request_log`).

The primary's own rows (``driver_turn_responses``, ``driver_probe_responses``) carry the same ``wake_id``;
the record links to them by it and copies none of their content. "Content" in the record is the probe's
reason, the one free text the model wrote into it: without ``store_content`` it is kept as
``sha256:<hex>``. The rendered context is only ever kept as a hash.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field

from larkbot.canonical.context import Segment
from larkbot.canonical.llm import LLMRequest, Usage
from larkbot.driver.wake.core.records import ProbeRecord, TurnRecord

from .requestlog import LoggedRequest, SentMessage, WakeRequests

#: The probe decision of a wake-up whose probe call failed (no verdict, nothing stored).
PROBE_ERROR = "error"
#: The probe decision of a malformed answer (the gate failed closed).
FAILED_CLOSED = "failed_closed"


def digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class ContextRange:
    """The rendered context a wake-up was shown: first and last ``event_seq``, how many segments, and
    the sha256 of their XML concatenated in order (equal hashes: the model saw the same conversation)."""

    first_seq: int | None
    last_seq: int | None
    count: int
    sha256: str

    @classmethod
    def of(cls, segments: tuple[Segment, ...]) -> ContextRange:
        h = hashlib.sha256()
        for s in segments:
            h.update(s.xml.encode())
        return cls(
            first_seq=segments[0].event_seq if segments else None,
            last_seq=segments[-1].event_seq if segments else None,
            count=len(segments),
            sha256=h.hexdigest(),
        )


@dataclass(frozen=True, slots=True)
class Tokens:
    input: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0

    def plus(self, usage: Usage | None) -> Tokens:
        if usage is None:
            return self
        return Tokens(
            self.input + usage.input_tokens,
            self.cache_read + usage.cache_read_tokens,
            self.cache_write + usage.cache_write_tokens,
            self.output + usage.output_tokens,
        )

    @property
    def cache_hit(self) -> float | None:
        """Cache reads as a share of input (``Usage``: cache reads are part of the input)."""
        return self.cache_read / self.input if self.input else None


@dataclass(frozen=True, slots=True)
class WakeAudit:
    platform: str
    chat_id: str
    wake_id: str
    wake_kind: str
    #: ``activation``, ``probe``, ``continuation``, ``braked``, ``held``, ``suppressed``, ``recovery``; a
    #: failed wake-up keeps the path it had reached (``None`` before one was chosen).
    path: str | None
    started_at_ms: int
    ended_at_ms: int
    context: ContextRange
    #: The probe's decision, :data:`FAILED_CLOSED`, :data:`PROBE_ERROR`, or ``None`` (no probe).
    probe_decision: str | None
    probe_reason: str | None
    probe_model: str | None
    probe_tokens: Tokens
    probe_latency_ms: int | None
    #: Primary steps stored complete in this wake-up.
    steps: int
    sends: int
    reactions: int
    #: Tool name → calls, name order.
    tool_calls: tuple[tuple[str, int], ...]
    tokens: Tokens
    primary_latency_ms: int | None
    #: Distinct primary model identities, first use first.
    primary_models: tuple[str, ...]
    #: ``sent``, ``reacted``, ``silent``, ``budget_exhausted``, ``interrupted``, or ``failed: <reason>``.
    outcome: str
    dry_run: bool
    #: ``False`` when a dry run answered the primary itself (``dry_run_call_model: false``).
    model_called: bool
    #: Platform actions a dry run withheld (``typing`` and tool names), in order.
    withheld: tuple[str, ...]
    #: ``probe_reason`` is a digest (``store_content: false``).
    content_hashed: bool


@dataclass(slots=True)
class AuditDraft:
    platform: str
    chat_id: str
    wake_id: str
    wake_kind: str
    started_at_ms: int
    dry_run: bool
    model_called: bool = True
    context: ContextRange = field(default_factory=lambda: ContextRange.of(()))
    #: The cursor of the compaction summary the last read showed (``None``: none).
    summary_cursor: int | None = None
    path: str | None = None
    turn_outcome: str | None = None
    probe: ProbeRecord | None = None
    probe_error: bool = False
    probe_latency_ms: int | None = None
    steps: int = 0
    sends: int = 0
    reactions: int = 0
    tool_calls: Counter[str] = field(default_factory=Counter)
    tokens: Tokens = Tokens()
    primary_latency_ms: int | None = None
    primary_models: list[str] = field(default_factory=list)
    withheld: list[str] = field(default_factory=list)
    requests: list[LoggedRequest] = field(default_factory=list)
    sent: list[SentMessage] = field(default_factory=list)

    def saw(self, segments: tuple[Segment, ...], summary_cursor: int | None) -> None:
        """The context read for the wake-up and its summary's cursor; a re-read (after a compaction)
        replaces them."""
        self.context = ContextRange.of(segments)
        self.summary_cursor = summary_cursor

    def primary_call(self, latency_ms: int) -> None:
        self.primary_latency_ms = (self.primary_latency_ms or 0) + latency_ms

    def stored(self, record: TurnRecord) -> None:
        if record.pending:
            return  # its complete version follows (or a later wake-up redoes it)
        self.steps += 1
        self.tokens = self.tokens.plus(record.usage)
        if record.model_identity not in self.primary_models:
            self.primary_models.append(record.model_identity)

    def requested(
        self, request: LLMRequest, *, step: int | None, at_ms: int, estimated_tokens: int, called: bool
    ) -> None:
        # Kept as built: cutting it into blocks waits until the wake-up is over.
        self.requests.append(
            LoggedRequest(request, step, at_ms, estimated_tokens, called, self.summary_cursor)
        )

    def delivered(self, message_ids: tuple[str, ...], at_ms: int) -> None:
        """Platform message ids a successful ``send_message`` created (never a dry run's made-up ones)."""
        self.sent.extend(SentMessage(message_id, at_ms) for message_id in message_ids)

    def request_log(self) -> WakeRequests:
        return WakeRequests(self.platform, self.chat_id, self.wake_id, tuple(self.requests), tuple(self.sent))

    def tool(self, name: str, ok: bool, *, send: bool, react: bool) -> None:
        self.tool_calls[name] += 1
        self.sends += int(ok and send)
        self.reactions += int(ok and react)

    def record(self, outcome: str, ended_at_ms: int, *, store_content: bool) -> WakeAudit:
        probe = self.probe
        if probe is not None:
            decision: str | None = FAILED_CLOSED if probe.failed_closed else probe.decision
            reason: str | None = probe.reason if store_content else digest(probe.reason)
        else:
            decision, reason = (PROBE_ERROR if self.probe_error else None), None
        return WakeAudit(
            platform=self.platform,
            chat_id=self.chat_id,
            wake_id=self.wake_id,
            wake_kind=self.wake_kind,
            path=self.path,
            started_at_ms=self.started_at_ms,
            ended_at_ms=ended_at_ms,
            context=self.context,
            probe_decision=decision,
            probe_reason=reason,
            probe_model=probe.model_identity if probe is not None else None,
            probe_tokens=Tokens().plus(probe.usage if probe is not None else None),
            probe_latency_ms=self.probe_latency_ms,
            steps=self.steps,
            sends=self.sends,
            reactions=self.reactions,
            tool_calls=tuple(sorted(self.tool_calls.items())),
            tokens=self.tokens,
            primary_latency_ms=self.primary_latency_ms,
            primary_models=tuple(self.primary_models),
            outcome=outcome,
            dry_run=self.dry_run,
            model_called=self.model_called,
            withheld=tuple(self.withheld),
            content_hashed=not store_content and probe is not None,
        )

    def outcome_of_done(self, path: str) -> str:
        """A finished wake-up's outcome: its turn's, or ``silent`` when no turn ran."""
        self.path = path
        return self.turn_outcome or "silent"


__all__ = ["FAILED_CLOSED", "PROBE_ERROR", "AuditDraft", "ContextRange", "Tokens", "WakeAudit", "digest"]
