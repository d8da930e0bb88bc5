"""Usage normalization, error classification, retry decisions and dump redaction (all pure)."""

from __future__ import annotations

from typing import Any

import pytest

from larkbot.canonical.errors import PermanentError, RetryableError
from larkbot.canonical.llm import Usage
from larkbot.llm_gateway.core import usage
from larkbot.llm_gateway.core.errors import (
    Category,
    classify_status,
    provider_message,
    retry_after_s,
    retry_kind,
    retry_window_s,
)
from larkbot.llm_gateway.core.redact import redact_body, redact_headers
from larkbot.llm_gateway.errors import FinalFailure, TransientFailure, call_failed
from larkbot.runtime.retry import Backoff, Failure, RetryPolicy


@pytest.mark.parametrize(
    ("reader", "raw", "expected"),
    [
        (
            usage.from_openai_chat,
            {
                "prompt_tokens": 2006,
                "completion_tokens": 300,
                "prompt_tokens_details": {"cached_tokens": 1920},
                "completion_tokens_details": {"reasoning_tokens": 128},
            },
            Usage(input_tokens=2006, output_tokens=300, cache_read_tokens=1920, reasoning_tokens=128),
        ),
        (
            usage.from_openai_chat,
            {
                "prompt_tokens": 1500,
                "completion_tokens": 20,
                "prompt_cache_hit_tokens": 1280,
                "prompt_cache_miss_tokens": 220,
            },
            Usage(input_tokens=1500, output_tokens=20, cache_read_tokens=1280),
        ),
        (
            usage.from_anthropic,
            {
                "input_tokens": 50,
                "cache_creation_input_tokens": 1000,
                "cache_read_input_tokens": 3000,
                "output_tokens": 70,
            },
            Usage(input_tokens=4050, output_tokens=70, cache_read_tokens=3000, cache_write_tokens=1000),
        ),
        (
            usage.from_responses,
            {
                "input_tokens": 900,
                "input_tokens_details": {"cached_tokens": 512},
                "output_tokens": 40,
                "output_tokens_details": {"reasoning_tokens": 0},
            },
            Usage(input_tokens=900, output_tokens=40, cache_read_tokens=512, reasoning_tokens=0),
        ),
        (usage.from_openai_chat, {}, Usage(input_tokens=0, output_tokens=0)),
        # Issue 12: Gemini's compatibility endpoint, 109 = 35 prompt + 12 completion + 62 hidden thinking.
        (
            usage.from_openai_chat,
            {"prompt_tokens": 35, "completion_tokens": 12, "total_tokens": 109},
            Usage(input_tokens=35, output_tokens=74, reasoning_tokens=62),
        ),
        (
            usage.from_responses,
            {"input_tokens": 35, "output_tokens": 12, "total_tokens": 109},
            Usage(input_tokens=35, output_tokens=74, reasoning_tokens=62),
        ),
        # A zero detail explains nothing: the difference is still reasoning.
        (
            usage.from_openai_chat,
            {
                "prompt_tokens": 35,
                "completion_tokens": 12,
                "total_tokens": 109,
                "completion_tokens_details": {"reasoning_tokens": 0},
            },
            Usage(input_tokens=35, output_tokens=74, reasoning_tokens=62),
        ),
        # A detail that equals the difference explains it (reasoning beside the output, xAI): not twice.
        (
            usage.from_responses,
            {
                "input_tokens": 35,
                "output_tokens": 12,
                "total_tokens": 109,
                "output_tokens_details": {"reasoning_tokens": 62},
            },
            Usage(input_tokens=35, output_tokens=74, reasoning_tokens=62),
        ),
        # A detail inside the output count (OpenAI's convention) beside a difference it does not explain.
        (
            usage.from_openai_chat,
            {
                "prompt_tokens": 100,
                "completion_tokens": 50,
                "total_tokens": 180,
                "completion_tokens_details": {"reasoning_tokens": 20},
            },
            Usage(input_tokens=100, output_tokens=80, reasoning_tokens=50),
        ),
        # The total matches prompt + completion: the detail is inside, nothing is added.
        (
            usage.from_responses,
            {
                "input_tokens": 900,
                "output_tokens": 300,
                "total_tokens": 1200,
                "output_tokens_details": {"reasoning_tokens": 128},
            },
            Usage(input_tokens=900, output_tokens=300, reasoning_tokens=128),
        ),
        # A proxy reporting more cached than prompt tokens: clamped, never an invalid Usage.
        (
            usage.from_openai_chat,
            {"prompt_tokens": 10, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 64}},
            Usage(input_tokens=64, output_tokens=1, cache_read_tokens=64),
        ),
    ],
)
def test_usage_is_normalized(reader: Any, raw: dict[str, Any], expected: Usage) -> None:
    assert reader(raw) == expected


def test_usage_writers_invert_readers() -> None:
    claude = Usage(input_tokens=4050, output_tokens=70, cache_read_tokens=3000, cache_write_tokens=1000)
    assert usage.from_anthropic(usage.to_anthropic(claude)) == claude
    chat = Usage(input_tokens=1500, output_tokens=20, cache_read_tokens=1280, reasoning_tokens=5)
    assert usage.from_openai_chat(usage.to_openai_chat(chat)) == chat
    assert usage.from_openai_chat(usage.to_openai_chat(chat, "deepseek")).cache_read_tokens == 1280
    assert usage.from_responses(usage.to_responses(chat)) == chat


@pytest.mark.parametrize(
    ("status", "category"),
    [
        (408, "transient"),
        (409, "transient"),
        (425, "transient"),
        (429, "transient"),
        (500, "transient"),
        (503, "transient"),
        (529, "transient"),
        (400, "invalid_request"),
        (413, "context_length"),
        (422, "invalid_request"),
        (401, "config"),
        (402, "config"),
        (403, "config"),
        (404, "config"),
        (418, "permanent"),
    ],
)
def test_status_classification(status: int, category: str) -> None:
    assert classify_status(status) == category


def test_retry_after_forms() -> None:
    assert retry_after_s({"Retry-After": "3"}, 0) == 3.0
    assert retry_after_s({"retry-after-ms": "250", "retry-after": "9"}, 0) == 0.25
    assert retry_after_s({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, 1445412480.0) == 10.0
    assert retry_after_s({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 1445412490.0) == 0.0
    assert retry_after_s({"retry-after": "soon"}, 0) is None
    assert retry_after_s({}, 0) is None


def test_retry_policy_stays_inside_the_deadline() -> None:
    policy = RetryPolicy(Backoff(initial_s=0.5, max_s=4, jitter=0.25), max_attempts=3)

    def next_delay(attempt: int, retry_after: float | None, remaining_s: float) -> float | None:
        """What the gateway's loop decides (u=0.5: the middle of the jitter)."""
        failure = retry_kind(call_failed("transient", "overloaded", retry_after=retry_after))
        assert failure is not None
        return policy.wait(failure, attempt, retry_window_s(remaining_s, 1), 0.5, retry_after)

    assert next_delay(1, None, remaining_s=10) == 0.5
    assert next_delay(2, None, remaining_s=10) == 1.0
    assert next_delay(3, None, remaining_s=10) is None  # attempts exhausted
    assert next_delay(1, 5.0, remaining_s=10) == 5.0  # the provider's hint wins
    assert next_delay(1, 9.5, remaining_s=10) is None  # no time left for another attempt


def test_only_transient_failures_are_retried_and_a_provider_wait_is_a_rate_limit() -> None:
    transient = call_failed("transient", "x")
    assert isinstance(transient, TransientFailure)
    assert isinstance(transient, RetryableError)
    assert retry_kind(transient) is Failure.TRANSIENT
    assert retry_kind(call_failed("transient", "x", retry_after=2.0)) is Failure.RATE_LIMITED
    finals: tuple[Category, ...] = ("permanent", "deadline", "invalid_request", "config", "context_length")
    for final in finals:
        failure = call_failed(final, "x", retry_after=2.0)
        assert isinstance(failure, FinalFailure)
        assert isinstance(failure, PermanentError)
        assert failure.category == final
        assert retry_kind(failure) is None


def test_provider_message_shapes() -> None:
    assert provider_message(b'{"error":{"message":"Rate limit reached","type":"x"}}') == "Rate limit reached"
    assert (
        provider_message(b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}')
        == "Overloaded"
    )
    assert provider_message(b"<html>bad gateway</html>") == "<html>bad gateway</html>"
    assert len(provider_message(b"x" * 5000)) == 300


def test_dump_redaction() -> None:
    assert redact_headers({"Authorization": "Bearer sk-1", "x-api-key": "k", "content-type": "a"}) == {
        "Authorization": "***",
        "x-api-key": "***",
        "content-type": "a",
    }
    body = {
        "messages": [
            {
                "content": [
                    {"image_url": {"url": "data:image/png;base64," + "A" * 500}},
                    {"text": "key sk-secret"},
                ]
            }
        ],
        "encrypted_content": "E" * 200,
    }
    out = redact_body(body, lambda s: s.replace("sk-secret", "***"))
    url = out["messages"][0]["content"][0]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,<500 base64 chars sha256:")
    assert out["messages"][0]["content"][1]["text"] == "key ***"
    assert out["encrypted_content"].startswith("<200 base64 chars")


def test_metrics_account_tokens_per_model_and_purpose() -> None:
    from prometheus_client import REGISTRY

    from larkbot.llm_gateway import metrics
    from larkbot.llm_gateway.outcome import Outcome

    labels = {"model": "metrics-test-model", "purpose": "probe"}

    def sample(name: str, **extra: str) -> float:
        return REGISTRY.get_sample_value(name, {**labels, **extra}) or 0.0

    before = sample("larkbot_llm_cache_read_tokens_total")
    outcome = Outcome(
        model="metrics-test-model",
        purpose="probe",
        outcome="ok",
        total_s=1.0,
        provider_s=[0.2, 0.7],
        waited_s=0.05,
        retries=["status_429"],
        usage=Usage(input_tokens=100, output_tokens=5, cache_read_tokens=80, cache_write_tokens=10),
    )
    metrics.record(outcome)
    assert outcome.overhead_s == pytest.approx(0.05)
    assert sample("larkbot_llm_cache_read_tokens_total") - before == 80
    assert sample("larkbot_llm_input_tokens_total") >= 100
    assert sample("larkbot_llm_requests_total", outcome="ok") >= 1
    assert sample("larkbot_llm_retries_total", reason="status_429") >= 1
    assert sample("larkbot_llm_provider_duration_seconds_count") >= 2
