"""The pure job decisions: cache keys, the vision request, reading the model's answer, results."""

from __future__ import annotations

import pytest

from larkbot.canonical.content import AttachmentType
from larkbot.canonical.errors import PermanentError, RetryableError
from larkbot.canonical.llm import (
    AssistantMessage,
    ImagePart,
    LLMError,
    LLMResponse,
    TextPart,
    ToolCallPart,
    Usage,
    UserMessage,
)
from larkbot.canonical.media import MediaError, MediaJob
from larkbot.canonical.names import Platform
from larkbot.media.core import jobs
from larkbot.media.core.errors import (
    DownloadRefused,
    DownloadUnavailable,
    MediaFailure,
    StoreFailed,
    TooLarge,
    VisionFailed,
    VisionRefused,
)

HEX = "ab" * 32


def job(**fields: object) -> MediaJob:
    base: dict[str, object] = {
        "job_id": "j1",
        "platform": Platform.FEISHU,
        "chat_id": "oc_1",
        "message_id": "om_1",
        "dedup_key": "om_1",
        "attachment_index": 0,
        "transform": "alt_text",
        "file_id": "img_1",
    }
    base.update(fields)
    return MediaJob.model_validate(base)


def response(*parts: TextPart | ToolCallPart, stop: str = "end_turn") -> LLMResponse:
    return LLMResponse.model_validate(
        {
            "request_id": "r",
            "model_identity": "vision-model",
            "message": AssistantMessage(parts=parts),
            "stop_reason": stop,
            "usage": Usage(input_tokens=10, output_tokens=5),
            "provider_latency_ms": 3,
        }
    )


def test_alt_cache_keys_are_kv_safe_and_only_for_sha256() -> None:
    assert jobs.alt_cache_key(f"sha256:{HEX}") == f"alt.{HEX}"
    for bad in ("thumb-1", f"md5:{HEX}", "sha256:XYZ", f"sha256:{HEX}.x"):
        with pytest.raises(ValueError, match="sha256"):
            jobs.alt_cache_key(bad)


def test_a_photo_is_one_low_detail_png_and_a_fixed_prompt() -> None:
    request = jobs.vision_request(
        request_id="r1",
        endpoint="vision",
        image_keys=[f"sha256:{HEX}"],
        attachment_type=AttachmentType.PHOTO,
        deadline_ms=1_000,
        chat_key="feishu:oc_1",
    )
    assert (request.purpose, request.endpoint, request.temperature) == ("vision", "vision", 0.0)
    (message,) = request.messages
    assert isinstance(message, UserMessage)
    image, ask = message.parts
    assert image == ImagePart(blob_key=f"sha256:{HEX}", mime="image/png", detail="low")
    assert isinstance(ask, TextPart)
    assert ask.text == "Describe this picture."
    assert request.tools == ()
    assert "alt text" in request.system


def test_animations_send_every_frame_in_order() -> None:
    keys = [f"sha256:{i:064x}" for i in range(3)]
    request = jobs.vision_request(
        request_id="r1",
        endpoint="vision",
        image_keys=keys,
        attachment_type=AttachmentType.STICKER,
        deadline_ms=1_000,
        chat_key=None,
    )
    (message,) = request.messages
    assert isinstance(message, UserMessage)
    *frames, ask = message.parts
    assert [p.blob_key for p in frames if isinstance(p, ImagePart)] == keys
    assert isinstance(ask, TextPart)
    assert ask.text.startswith("These are 3 frames, in order, of one sticker.")


def test_each_frame_of_a_video_is_preceded_by_its_time() -> None:
    keys = [f"sha256:{i:064x}" for i in range(3)]
    request = jobs.vision_request(
        request_id="r1",
        endpoint="vision",
        image_keys=keys,
        attachment_type=AttachmentType.VIDEO,
        deadline_ms=1_000,
        chat_key=None,
        times_ms=(0, 1250, 61_000),
    )
    (message,) = request.messages
    assert isinstance(message, UserMessage)
    *frames, ask = message.parts
    texts = [p.text for p in frames[0::2] if isinstance(p, TextPart)]
    assert texts == ["Frame 1 at 0.0 s:", "Frame 2 at 1.2 s:", "Frame 3 at 61.0 s:"]
    assert [p.blob_key for p in frames[1::2] if isinstance(p, ImagePart)] == keys
    assert isinstance(ask, TextPart)
    assert "of one video" in ask.text
    with pytest.raises(ValueError, match="one time per frame"):
        jobs.vision_request(
            request_id="r1",
            endpoint="vision",
            image_keys=keys,
            attachment_type=AttachmentType.VIDEO,
            deadline_ms=1_000,
            chat_key=None,
            times_ms=(0,),
        )


def test_the_description_is_flattened_and_capped() -> None:
    text, model = jobs.description_from(
        response(TextPart(text="  A cat\n\n on   a mat. "), TextPart(text="Cute."))
    )
    assert (text, model) == ("A cat on a mat. Cute.", "vision-model")
    long_text, _ = jobs.description_from(response(TextPart(text="word " * 1000)))
    assert len(long_text) <= jobs.ALT_TEXT_MAX_CHARS
    assert long_text.endswith("word…")


@pytest.mark.parametrize(
    ("category", "retryable"),
    [
        ("transient", True),
        ("deadline", True),
        ("permanent", False),
        ("invalid_request", False),
        ("config", False),
        ("context_length", False),
    ],
)
def test_model_errors_are_retryable_only_when_retrying_can_help(category: str, retryable: bool) -> None:
    error = LLMError.model_validate({"request_id": "r", "category": category, "message": "boom"})
    with pytest.raises(VisionFailed) as caught:
        jobs.description_from(error)
    assert isinstance(caught.value, RetryableError) is retryable
    assert isinstance(caught.value, PermanentError) is not retryable
    assert caught.value.as_error().retryable is retryable
    assert caught.value.as_error().code == "vision"


@pytest.mark.parametrize(
    "reply",
    [
        response(TextPart(text="I can't help with that"), stop="refusal"),
        response(TextPart(text="  ")),
        response(ToolCallPart(id="c1", name="x", arguments_json="{}")),
    ],
)
def test_refusals_and_empty_answers_are_final(reply: LLMResponse) -> None:
    with pytest.raises(VisionRefused) as caught:
        jobs.description_from(reply)
    assert caught.value.as_error().retryable is False


def test_results_echo_the_job_coordinates() -> None:
    j = job(transform="frames", attachment_type="sticker", attachment_index=2)
    ok = jobs.succeeded(j, content_hash=f"sha256:{HEX}", thumbnail_key="t", frame_keys=("a", "b"))
    assert (ok.job_id, ok.chat_id, ok.attachment_index, ok.transform, ok.ok) == (
        "j1",
        "oc_1",
        2,
        "frames",
        True,
    )
    assert ok.frame_keys == ("a", "b")
    error = TooLarge("big").as_error()
    assert error == MediaError(code="too_large", message="big", retryable=False)
    bad = jobs.failed(j, error)
    assert (bad.ok, bad.error, bad.thumbnail_key) == (False, error, None)


def test_source_type_defaults_follow_the_transform() -> None:
    assert jobs.source_type(job()) is AttachmentType.PHOTO
    assert jobs.source_type(job(transform="frames")) is AttachmentType.ANIMATION
    assert jobs.source_type(job(transform="frames", attachment_type="video")) is AttachmentType.VIDEO


def test_whether_a_failure_is_retried_is_its_type() -> None:
    assert DownloadUnavailable("x").as_error() == MediaError(code="download", message="x", retryable=True)
    assert DownloadRefused("x").as_error() == MediaError(code="download", message="x", retryable=False)
    assert StoreFailed("x").as_error().retryable is True
    # Every failure raised is transient or permanent, never both, never neither.
    leaves = [cls for cls in _subclasses(MediaFailure) if not cls.__subclasses__()]
    assert leaves
    for leaf in leaves:
        assert issubclass(leaf, RetryableError) != issubclass(leaf, PermanentError), leaf


def _subclasses(cls: type) -> list[type]:
    return [sub for child in cls.__subclasses__() for sub in (child, *_subclasses(child))]
