"""Contract rules the models enforce on construction (and therefore on decode)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from larkbot.canonical import (
    ActionError,
    ActionResult,
    AssistantMessage,
    ContextUpdate,
    DeleteEvent,
    ImagePart,
    LLMError,
    LLMRequest,
    MediaError,
    MediaJob,
    MemberRequest,
    MessageDeletion,
    MessageEvent,
    ModerationReport,
    Platform,
    ReadImageResponse,
    ResetOp,
    RuntimeEvent,
    Sender,
    TextPart,
    ToolChoice,
    ToolSpec,
    Usage,
    UserMessage,
)

COMMON: dict[str, Any] = {
    "platform": Platform.FEISHU,
    "chat_id": "oc_a0553eda9014c201e6969b478895c230",
    "dedup_key": "om_dc13264520392913993dd051dba21dcf",
    "received_at_ms": 1_760_683_812_345,
    "timestamp_sec": 1_760_683_811.0,
    "utc_offset_min": 480,
}


def _message(**fields: Any) -> MessageEvent:
    values = COMMON | {"message_id": "om_1", "sender": Sender(id="ou_1", display_name="A")} | fields
    return MessageEvent(**values)


def _request(**fields: Any) -> LLMRequest:
    values: dict[str, Any] = {
        "request_id": "r1",
        "purpose": "probe",
        "endpoint": "main",
        "system": "s",
        "messages": (UserMessage(parts=(TextPart(text="hi"),)),),
        "deadline_ms": 1,
    } | fields
    return LLMRequest(**values)


DECIDE = ToolSpec.of("decide", "Decide.", {"type": "object", "properties": {}})
MEDIA_JOB: dict[str, Any] = {
    "job_id": "j",
    "platform": Platform.TELEGRAM,
    "chat_id": "-100123",
    "message_id": "5",
    "dedup_key": "msg:5",
    "file_id": "AgAD",
}
SEGMENT_FREE_UPDATE: dict[str, Any] = {"platform": Platform.FEISHU, "chat_id": "oc_1", "cursor": 0}

INVALID: dict[str, Callable[[], object]] = {
    "offset-above-14h": lambda: _message(utc_offset_min=841),
    "offset-below-14h": lambda: _message(utc_offset_min=-841),
    "negative-received": lambda: _message(received_at_ms=-1),
    "negative-timestamp": lambda: _message(timestamp_sec=-0.5),
    "nan-timestamp": lambda: _message(timestamp_sec=float("nan")),
    "empty-chat-id": lambda: _message(chat_id=""),
    "empty-dedup-key": lambda: _message(dedup_key=""),
    "empty-message-id": lambda: _message(message_id=""),
    "empty-sender-id": lambda: _message(sender=Sender(id="", display_name="A")),
    "unknown-platform": lambda: _message(platform="whatsapp"),
    "no-deleted-ids": lambda: DeleteEvent(**COMMON, message_ids=()),
    "runtime-duplicate-keys": lambda: RuntimeEvent(**COMMON, type="t", attributes=(("a", "1"), ("a", "2"))),
    "runtime-empty-key": lambda: RuntimeEvent(**COMMON, type="t", attributes=(("", "1"),)),
    "ok-with-failed-outcome": lambda: ActionResult(idempotency_key="k", ok=True, outcome="failed"),
    "failure-without-error": lambda: ActionResult(idempotency_key="k", ok=False, outcome="unknown"),
    "success-with-error": lambda: ActionResult(
        idempotency_key="k", ok=True, outcome="done", error=ActionError(code="x", message="", retryable=False)
    ),
    "deleted-with-error": lambda: MessageDeletion(
        message_id="1", outcome="deleted", error=ActionError(code="x", message="", retryable=False)
    ),
    "not-deleted-without-reason": lambda: MessageDeletion(message_id="1", outcome="skipped"),
    "banned-with-error": lambda: ModerationReport(
        banned=True, ban_error=ActionError(code="x", message="", retryable=False)
    ),
    "not-banned-without-reason": lambda: ModerationReport(banned=False),
    "member-listing-too-many": lambda: MemberRequest(
        platform=Platform.TELEGRAM, chat_id="-100", user_id="1", max_messages=1001
    ),
    "named-choice-without-name": lambda: ToolChoice(mode="tool"),
    "name-without-named-choice": lambda: ToolChoice(mode="any", name="decide"),
    "choice-of-unoffered-tool": lambda: _request(
        tools=(DECIDE,), tool_choice=ToolChoice(mode="tool", name="x")
    ),
    "forced-choice-without-tools": lambda: _request(tool_choice=ToolChoice(mode="any")),
    "duplicate-tools": lambda: _request(tools=(DECIDE, DECIDE)),
    "no-messages": lambda: _request(messages=()),
    "bad-tool-name": lambda: ToolSpec.of("send message", "d", {}),
    "schema-not-object": lambda: ToolSpec(name="t", description="d", parameters_json="[]"),
    "schema-not-json": lambda: ToolSpec(name="t", description="d", parameters_json="{type: object}"),
    "extra-without-format": lambda: AssistantMessage(parts=(), provider_extra="{}"),
    "format-without-extra": lambda: AssistantMessage(parts=(), provider_extra_format="responses"),
    "extra-not-object": lambda: AssistantMessage(
        parts=(), provider_extra="1", provider_extra_format="responses"
    ),
    "unknown-error-category": lambda: LLMError(request_id="r", category="too_long", message="m"),  # type: ignore[arg-type]
    "cache-exceeds-input": lambda: Usage(
        input_tokens=10, output_tokens=1, cache_read_tokens=8, cache_write_tokens=3
    ),
    "base-seq-not-below-seq": lambda: ContextUpdate(
        **SEGMENT_FREE_UPDATE, seq=5, base_seq=5, ops=(ResetOp(segments=()),)
    ),
    "update-without-ops": lambda: ContextUpdate(**SEGMENT_FREE_UPDATE, seq=5, base_seq=4, ops=()),
    "emoji-job-with-index": lambda: MediaJob(**MEDIA_JOB, transform="custom_emoji", attachment_index=0),
    "attachment-job-without-index": lambda: MediaJob(
        **MEDIA_JOB, transform="thumbnail", attachment_index=None
    ),
    "read-image-ok-without-image": lambda: ReadImageResponse(request_id="r", ok=True),
    "read-image-failed-without-error": lambda: ReadImageResponse(request_id="r", ok=False),
    "read-image-failed-with-image": lambda: ReadImageResponse(
        request_id="r",
        ok=False,
        image=ImagePart(blob_key="b", mime="image/png"),
        error=MediaError(code="x", message="m", retryable=True),
    ),
}


@pytest.mark.parametrize("build", INVALID.values(), ids=INVALID.keys())
def test_rejects(build: Callable[[], object]) -> None:
    with pytest.raises(ValidationError):
        build()


def test_offset_bounds_are_inclusive() -> None:
    assert _message(utc_offset_min=840).utc_offset_min == 840
    assert _message(utc_offset_min=-840).utc_offset_min == -840


def test_tool_spec_keeps_schema_key_order() -> None:
    spec = ToolSpec.of("t", "d", {"type": "object", "properties": {"z": {}, "a": {}}})
    assert spec.parameters_json == '{"type":"object","properties":{"z":{},"a":{}}}'
    assert list(spec.parameters()["properties"]) == ["z", "a"]
