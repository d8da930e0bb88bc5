"""What the three codecs share: request preparation, encoded images, tool-id sanitization, body bytes.

Decisions:

- Request bodies are built as dicts in a fixed construction order and serialized by :func:`dumps`
  (compact, no sorting, UTF-8): two identical conversations give byte-identical bodies, which is what a
  provider's prefix cache needs. Nothing volatile (time, random ids) ever enters a body.
- Preparation (:func:`prepare_messages`) is copy-on-write: it returns new IR tuples and never touches the
  caller's request, so a retry re-encodes the exact same bytes.
- Reasoning is replayed only to the wire format and model identity that produced it, and only for the
  newest ``replay_turns`` assistant messages plus the open tool chain (assistant messages after the last
  user message), which Anthropic requires beside a pending ``tool_use``. ``provider_extra`` follows the
  same rule, judged by the message's own ``model_identity``: a provider's unknown fields never reach
  another model, and an endpoint that does not accept replay (``Accepts.replay_reasoning``) gets neither.
- What a model accepts (:class:`Accepts`) is decided before encoding; codecs only obey it.
- ``max_images`` keeps the newest images; older ones become a fixed placeholder text so the request stays
  valid and deterministic.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from larkbot.canonical.llm import (
    AssistantMessage,
    ImagePart,
    LLMRequest,
    Message,
    ReasoningPart,
    StopReason,
    TextPart,
    ToolChoice,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
    WireFormat,
    canonical_json,
)

from ..errors import WireError

#: Default replay window for reasoning (turn responses); see ``docs/llm-gateway.md``.
DEFAULT_REPLAY_TURNS = 3
#: Longest side of an image sent to a model, by detail (SPEC §5, guide "Media").
MAX_SIDE = {"low": 512, "high": 1024, "auto": 1024}
OMITTED_IMAGE_TEXT = "[image omitted: too many images in this request]"

_TOOL_ID_OK = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_TOOL_ID_BAD_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_DATA_URL = re.compile(r"^data:([^;,]+);base64,(.*)$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class EncodedImage:
    mime: str
    data_b64: str

    def data_url(self) -> str:
        return f"data:{self.mime};base64,{self.data_b64}"


#: Images by ``(blob_key, max_side)``, fetched and resized by the adapter before encoding.
ImageTable = Mapping[tuple[str, int], EncodedImage]
#: Maps an inline image back to a blob key (the fake provider uses a content hash).
BlobKeyOf = Callable[[str, str], str]


@dataclass(frozen=True, slots=True)
class Accepts:
    """What the endpoint's model accepts (resolved from configuration and family defaults)."""

    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    temperature: bool = True
    forced_tool_choice: bool = True
    replay_reasoning: bool = True


ACCEPTS_ALL = Accepts()


@dataclass(frozen=True, slots=True)
class EncodeOptions:
    model: str
    model_identity: str
    images: ImageTable
    prompt_cache_key: str | None = None
    default_max_output_tokens: int = 4096
    accepts: Accepts = ACCEPTS_ALL


@dataclass(frozen=True, slots=True)
class ParsedRequest:
    """A wire request read back into IR terms (the fake provider and the round-trip tests use it)."""

    model: str
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    tool_choice: ToolChoice
    max_output_tokens: int | None
    temperature: float | None
    prompt_cache_key: str | None


@dataclass(frozen=True, slots=True)
class Decoded:
    message: AssistantMessage
    stop_reason: StopReason
    usage: Usage


def dumps(body: Mapping[str, Any]) -> bytes:
    """The one spelling of a wire body: compact, key order as built, UTF-8, no NaN."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def model_identity(fmt: WireFormat, base_url: str, model: str) -> str:
    """Who produced a reply, for reasoning replay: format, provider host and model name."""
    host = urlsplit(base_url).netloc or base_url
    return f"{fmt}:{host}/{model}"


def sanitize_tool_id(tool_id: str) -> str:
    """A tool-call id acceptable to strict formats; deterministic and never stored back.

    Valid ids pass through unchanged; others get their bad characters replaced and a hash suffix of the
    original so two ids that differ only in bad characters stay distinct.
    """
    if _TOOL_ID_OK.match(tool_id):
        return tool_id
    digest = hashlib.sha256(tool_id.encode()).hexdigest()[:12]
    return f"{_TOOL_ID_BAD_CHARS.sub('_', tool_id)[:50]}_{digest}"


def synthesize_tool_id(seed: str, index: int, name: str, arguments: str) -> str:
    """An id for a tool call that came without one (Gemini's compatibility endpoint sends ``"id": ""``).

    Derived from the reply (``seed``: its id and message), the call's position, name and arguments, so
    the same reply always yields the same id (replay stays byte-identical) and two replies do not share
    one.
    """
    digest = hashlib.sha256(f"{seed}\x00{index}\x00{name}\x00{arguments}".encode()).hexdigest()
    return f"call_{digest[:24]}"


def arguments_text(raw: Any) -> str:
    """Tool-call arguments as the model's text: a string verbatim, an object (some servers) as JSON."""
    if isinstance(raw, str):
        return raw
    if raw is None:
        return "{}"
    return canonical_json(raw)


def image_max_side(part: ImagePart) -> int:
    return MAX_SIDE[part.detail]


def image_refs(messages: tuple[Message, ...]) -> list[tuple[str, int]]:
    """Every image the encoded request needs, in order of first use, as ``(blob_key, max_side)``."""
    seen: dict[tuple[str, int], None] = {}
    for message in messages:
        if isinstance(message, (UserMessage, ToolResultMessage)):
            for part in message.parts:
                if isinstance(part, ImagePart):
                    seen.setdefault((part.blob_key, image_max_side(part)), None)
    return list(seen)


def lookup_image(images: ImageTable, part: ImagePart) -> EncodedImage:
    found = images.get((part.blob_key, image_max_side(part)))
    if found is None:
        raise KeyError(f"image {part.blob_key} was not resolved before encoding")
    return found


def parse_data_url(url: str) -> tuple[str, str]:
    match = _DATA_URL.match(url)
    if match is None:
        raise WireError("image is not a base64 data URL")
    return match.group(1), match.group(2)


def prepare_messages(
    request: LLMRequest,
    *,
    fmt: WireFormat,
    identity: str,
    max_images: int,
    replay_turns: int,
    replay: bool = True,
) -> tuple[tuple[Message, ...], int]:
    """The messages to encode for one endpoint, and how many images were replaced by the placeholder.

    ``replay=False`` (an endpoint that refuses its own reasoning on input) strips every reasoning part and
    every ``provider_extra``.
    """
    messages = _strip_reasoning(
        request.messages, fmt=fmt, identity=identity, replay_turns=replay_turns if replay else -1
    )
    return _limit_images(messages, max_images)


def _strip_reasoning(
    messages: tuple[Message, ...], *, fmt: WireFormat, identity: str, replay_turns: int
) -> tuple[Message, ...]:
    """``replay_turns < 0``: no replay at all, not even for the open tool chain."""
    last_user = max((i for i, m in enumerate(messages) if isinstance(m, UserMessage)), default=-1)
    assistant_at = [i for i, m in enumerate(messages) if isinstance(m, AssistantMessage)]
    newest = set(assistant_at[-replay_turns:]) if replay_turns > 0 else set()
    out: list[Message] = []
    for index, message in enumerate(messages):
        if not isinstance(message, AssistantMessage):
            out.append(message)
            continue
        keep = replay_turns >= 0 and (index in newest or index > last_user)
        parts = tuple(
            p
            for p in message.parts
            if not isinstance(p, ReasoningPart) or (keep and p.format == fmt and p.model_identity == identity)
        )
        extra_kept = (
            keep
            and message.provider_extra is not None
            and message.provider_extra_format == fmt
            and message.model_identity == identity
        )
        if parts == message.parts and (extra_kept or message.provider_extra is None):
            out.append(message)
        else:
            out.append(
                message.model_copy(
                    update={
                        "parts": parts,
                        "provider_extra": message.provider_extra if extra_kept else None,
                        "provider_extra_format": fmt if extra_kept else None,
                    }
                )
            )
    return tuple(out)


def _limit_images(messages: tuple[Message, ...], max_images: int) -> tuple[tuple[Message, ...], int]:
    total = sum(
        1
        for m in messages
        if isinstance(m, (UserMessage, ToolResultMessage))
        for p in m.parts
        if isinstance(p, ImagePart)
    )
    to_drop = max(0, total - max_images)
    if to_drop == 0:
        return messages, 0
    dropped = 0
    out: list[Message] = []
    for message in messages:
        if dropped >= to_drop or isinstance(message, AssistantMessage):
            out.append(message)
            continue
        parts: list[TextPart | ImagePart] = []
        for part in message.parts:
            if isinstance(part, ImagePart) and dropped < to_drop:
                dropped += 1
                parts.append(TextPart(text=OMITTED_IMAGE_TEXT))
            else:
                parts.append(part)
        out.append(message.model_copy(update={"parts": tuple(parts)}))
    return tuple(out), dropped


def parse_arguments(arguments_json: str) -> dict[str, Any]:
    """Tool arguments as an object, for formats that carry them as JSON (not text).

    Arguments that are not a JSON object (a model's malformed output replayed to another format) become
    ``{}``: such formats cannot carry them, and the driver already answered the call with an error.
    """
    try:
        parsed = json.loads(arguments_json)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def json_object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise WireError(f"{what} is not a JSON object")
    return value


def json_list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise WireError(f"{what} is not a JSON array")
    return value


def as_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def load_extra(message: AssistantMessage, fmt: WireFormat) -> dict[str, Any]:
    if message.provider_extra is None or message.provider_extra_format != fmt:
        return {}
    loaded: dict[str, Any] = json.loads(message.provider_extra)
    return loaded
