"""Pure decisions around a job: cache keys, the vision prompt, reading the model's answer, results.

Decisions:

- Alt-text cache keys are content hashes (SPEC §6): a photo's key is its *thumbnail's* hash (two encodings
  of the same picture usually share it), an animation's key is the *file's* hash. Both are ``sha256`` of
  distinct byte strings, so one key space holds both. NATS KV keys cannot contain ``:``, hence
  ``alt.<hex>``. A custom emoji's key is its id (SPEC §6: ``emoji:<id>``, ``emoji.<id>`` in the bucket):
  the id names one picture for good, so a cache hit needs no platform call at all.
- The vision model gets PNGs of at most 512 px (one per picked frame for animations), a fixed system
  prompt and temperature 0: the description should depend on the picture, not on the chat it came from.
  Each frame of a moving picture is preceded by its time (``Frame 2 at 1.5 s:``), so the model can tell
  a two-second sticker from a two-minute video and say when things happen.
- A model error is retried by the pipeline only when retrying can help (``transient``, ``deadline``);
  a refusal, an empty answer, a bad request or a configuration error would fail the same way again.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final, TypeVar, assert_never

from larkbot.canonical.content import AttachmentType
from larkbot.canonical.llm import (
    ImagePart,
    LLMError,
    LLMErrorCategory,
    LLMReply,
    LLMRequest,
    TextPart,
    UserMessage,
)
from larkbot.canonical.media import MediaError, MediaJob, MediaResult

from .errors import MediaFailure, VisionFailed, VisionRefused, VisionUnavailable
from .images import RENDITION_MIME

ALT_TEXT_MAX_CHARS: Final = 1000
VISION_MAX_OUTPUT_TOKENS: Final = 400
_DIGEST = re.compile(r"[0-9a-f]{64}")
_EMOJI_ID = re.compile(r"[0-9A-Za-z_-]{1,64}")
#: The prefix of a custom emoji's description key in the pipeline (``emoji:<id>``).
EMOJI_KEY_PREFIX: Final = "emoji:"
_SPACES = re.compile(r"\s+")

SYSTEM_PROMPT: Final = (
    "You write alt text for pictures shared in a group chat, for a participant who cannot see them. "
    "Describe what is shown in at most 80 words: the subject, the setting, anything notable, and the kind "
    "of picture (photo, screenshot, meme, drawing, chart, sticker). Transcribe visible text verbatim, in "
    "its original language. Do not name real people from their faces. Answer with the description only."
)

_MOVING: Final[dict[AttachmentType, str]] = {
    AttachmentType.STICKER: "sticker",
    AttachmentType.ANIMATION: "animation",
    AttachmentType.VIDEO: "video",
    AttachmentType.VIDEO_NOTE: "video message",
}


def cache_key(prefix: str, content_key: str) -> str:
    """``sha256:<hex>`` → ``<prefix>.<hex>`` (a NATS KV key)."""
    algo, sep, digest = content_key.partition(":")
    if algo != "sha256" or not sep or not _DIGEST.fullmatch(digest):
        raise ValueError("cache keys are made from sha256:<hex> content keys")
    return f"{prefix}.{digest}"


def alt_cache_key(content_key: str) -> str:
    """``sha256:<hex>`` → ``alt.<hex>``."""
    return cache_key("alt", content_key)


def emoji_key(emoji_id: str) -> str:
    """``emoji:<id>``: the key a custom emoji's description is cached and rendered under."""
    if not _EMOJI_ID.fullmatch(emoji_id):
        raise ValueError("a custom emoji id is 1-64 letters, digits, '_' or '-'")
    return f"{EMOJI_KEY_PREFIX}{emoji_id}"


def emoji_cache_key(emoji_id: str) -> str:
    """``emoji.<id>`` in the alt-text bucket (KV keys cannot contain ``:``)."""
    return emoji_key(emoji_id).replace(":", ".", 1)


def source_type(job: MediaJob) -> AttachmentType:
    """What to tell the ingress it is downloading (Feishu fetches images and files differently)."""
    if job.attachment_type is not None:
        return job.attachment_type
    match job.transform:
        case "thumbnail" | "alt_text":
            return AttachmentType.PHOTO
        case "transcript":
            return AttachmentType.AUDIO
        case _:
            return AttachmentType.ANIMATION


def vision_request(
    *,
    request_id: str,
    endpoint: str,
    image_keys: Sequence[str],
    attachment_type: AttachmentType | None,
    deadline_ms: int,
    chat_key: str | None,
    times_ms: Sequence[int] = (),
    what: str | None = None,
) -> LLMRequest:
    """``times_ms``, when given, are the frames' times from the start (one per image key); ``what`` names
    the picture instead of its attachment type (``custom emoji``)."""
    if times_ms and len(times_ms) != len(image_keys):
        raise ValueError("one time per frame")
    images = tuple(ImagePart(blob_key=key, mime=RENDITION_MIME, detail="low") for key in image_keys)
    moving = what or (_MOVING.get(attachment_type) if attachment_type is not None else None)
    parts: tuple[ImagePart | TextPart, ...] = images
    if moving is not None and len(images) > 1 and times_ms:
        parts = tuple(
            part
            for n, (image, at_ms) in enumerate(zip(images, times_ms, strict=True), start=1)
            for part in (TextPart(text=f"Frame {n} at {at_ms / 1000:.1f} s:"), image)
        )
    if moving is not None and len(images) > 1:
        ask = (
            f"These are {len(images)} frames, in order, of one {moving}. "
            "Describe it as a whole, including what moves or changes."
        )
    elif moving is not None:
        ask = f"This is a {moving}. Describe it."
    else:
        ask = "Describe this picture."
    return LLMRequest(
        request_id=request_id,
        purpose="vision",
        endpoint=endpoint,
        system=SYSTEM_PROMPT,
        messages=(UserMessage(parts=(*parts, TextPart(text=ask))),),
        max_output_tokens=VISION_MAX_OUTPUT_TOKENS,
        temperature=0.0,
        deadline_ms=deadline_ms,
        chat_key=chat_key,
    )


def clean_alt_text(text: str) -> str:
    """One line of at most :data:`ALT_TEXT_MAX_CHARS`, cut at a word boundary."""
    flat = _SPACES.sub(" ", text).strip()
    if len(flat) <= ALT_TEXT_MAX_CHARS:
        return flat
    cut = flat[: ALT_TEXT_MAX_CHARS - 1]
    head, space, _ = cut.rpartition(" ")
    return (head if space and len(head) > ALT_TEXT_MAX_CHARS // 2 else cut) + "…"


def description_from(reply: LLMReply) -> tuple[str, str]:
    """``(alt text, model identity)`` of a vision reply; raises :class:`VisionFailed`."""
    if isinstance(reply, LLMError):
        raise vision_failure(reply.category)(f"vision model failed ({reply.category}): {reply.message}")
    if reply.stop_reason == "refusal":
        raise VisionRefused("the vision model refused to describe the picture")
    text = clean_alt_text(" ".join(p.text for p in reply.message.parts if isinstance(p, TextPart)))
    if not text:
        raise VisionRefused("the vision model answered without text")
    return text, reply.model_identity


def vision_failure(category: LLMErrorCategory) -> type[VisionFailed]:
    """The failure of a vision call the model's gateway answered with an error."""
    return model_failure(category, VisionUnavailable, VisionRefused)


F = TypeVar("F", bound=MediaFailure)


def model_failure(category: LLMErrorCategory, retryable: type[F], final: type[F]) -> type[F]:
    """Of a model call the gateway answered with an error: ``retryable`` only when retrying can help."""
    match category:
        case "transient" | "deadline":
            return retryable
        case "permanent" | "invalid_request" | "config" | "context_length":
            return final
        case _:
            assert_never(category)


def succeeded(
    job: MediaJob,
    *,
    content_hash: str | None,
    thumbnail_key: str | None = None,
    alt_text: str | None = None,
    frame_keys: tuple[str, ...] = (),
    frame_times_ms: tuple[int, ...] = (),
    pack: str | None = None,
    duration_ms: int | None = None,
) -> MediaResult:
    return MediaResult(
        job_id=job.job_id,
        platform=job.platform,
        chat_id=job.chat_id,
        message_id=job.message_id,
        dedup_key=job.dedup_key,
        attachment_index=job.attachment_index,
        transform=job.transform,
        ok=True,
        content_hash=content_hash,
        thumbnail_key=thumbnail_key,
        alt_text=alt_text,
        frame_keys=frame_keys,
        frame_times_ms=frame_times_ms,
        pack=pack,
        duration_ms=duration_ms,
    )


def failed(job: MediaJob, error: MediaError) -> MediaResult:
    return MediaResult(
        job_id=job.job_id,
        platform=job.platform,
        chat_id=job.chat_id,
        message_id=job.message_id,
        dedup_key=job.dedup_key,
        attachment_index=job.attachment_index,
        transform=job.transform,
        ok=False,
        error=error,
    )
