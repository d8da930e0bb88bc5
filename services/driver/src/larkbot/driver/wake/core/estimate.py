"""Token estimates: ~2 characters per token for text, tool arguments and results and readable reasoning
(calibrated on live requests of mixed CJK/Latin chat logs), ~4 for opaque reasoning (signatures,
encrypted content: base64 packs more characters into a token), a flat cost per image.

Estimates steer window sizes and compaction. Where a limit is a real model's context window, the raw
estimate is scaled by :class:`Calibration`, learnt from the input tokens the provider reports.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from larkbot.canonical.context import Segment
from larkbot.canonical.llm import (
    AssistantMessage,
    ImagePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolSpec,
)

CHARS_PER_TOKEN = 2
OPAQUE_CHARS_PER_TOKEN = 4
IMAGE_TOKENS = 256
#: Per-message framing (role markers, separators) every provider adds.
MESSAGE_OVERHEAD_TOKENS = 4


def text_tokens(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def opaque_tokens(text: str) -> int:
    return (len(text) + OPAQUE_CHARS_PER_TOKEN - 1) // OPAQUE_CHARS_PER_TOKEN


def segment_tokens(segment: Segment) -> int:
    return text_tokens(segment.xml) + IMAGE_TOKENS * len(segment.image_parts)


def _part_tokens(part: object) -> int:
    if isinstance(part, TextPart):
        return text_tokens(part.text)
    if isinstance(part, ImagePart):
        return IMAGE_TOKENS
    if isinstance(part, ToolCallPart):
        return text_tokens(part.name) + text_tokens(part.arguments_json)
    if isinstance(part, ReasoningPart):
        readable = text_tokens(part.text) if part.text else 0
        return readable + opaque_tokens(part.signature or "") + opaque_tokens(part.opaque or "")
    raise TypeError(f"unknown part {type(part).__name__}")


def message_tokens(message: Message) -> int:
    """Text, tool calls and results, block-level reasoning, and message-level provider fields (a
    ``reasoning_content`` kept in ``provider_extra`` is replayed, so it counts as readable text)."""
    total = MESSAGE_OVERHEAD_TOKENS + sum(_part_tokens(p) for p in message.parts)
    if isinstance(message, AssistantMessage) and message.provider_extra:
        total += text_tokens(message.provider_extra)
    return total


def messages_tokens(messages: Iterable[Message]) -> int:
    return sum(message_tokens(m) for m in messages)


def request_tokens(system: str, tools: Iterable[ToolSpec], messages: Iterable[Message]) -> int:
    """The estimate of a whole request: system prompt, tool definitions and messages."""
    tool_tokens = sum(
        text_tokens(t.name) + text_tokens(t.description) + text_tokens(t.parameters_json) for t in tools
    )
    return text_tokens(system) + tool_tokens + messages_tokens(messages)


def truncate_to_tokens(text: str, max_tokens: int) -> str:
    """Keep the beginning of ``text`` within ``max_tokens`` (the end is cut)."""
    limit = max_tokens * CHARS_PER_TOKEN
    return text if len(text) <= limit else text[:limit]


def keep_last_tokens(text: str, max_tokens: int) -> str:
    """Keep the end of ``text`` within ``max_tokens`` (the beginning is cut)."""
    limit = max_tokens * CHARS_PER_TOKEN
    return text if len(text) <= limit else text[len(text) - limit :]


@dataclass(frozen=True, slots=True)
class Calibration:
    """Reported input tokens per estimated token of one model, as a moving average.

    ``factor`` starts at 1 (the blended rate above), takes the first observation as it is and then
    follows each one with weight ``ALPHA``, bounded to ``[MIN, MAX]`` so one odd report (an image-heavy
    request, a provider that counts differently once) cannot make a limit absurd.
    """

    factor: float = 1.0
    observations: int = 0

    ALPHA = 0.2
    MIN = 0.25
    MAX = 4.0

    def observe(self, estimated: int, reported: int) -> Calibration:
        if estimated <= 0 or reported <= 0:
            return self
        ratio = min(self.MAX, max(self.MIN, reported / estimated))
        factor = ratio if self.observations == 0 else self.factor + self.ALPHA * (ratio - self.factor)
        return Calibration(factor, self.observations + 1)

    def to_estimate(self, real_tokens: int) -> int:
        """A limit in the model's tokens, expressed in estimate units."""
        return int(real_tokens / self.factor)
