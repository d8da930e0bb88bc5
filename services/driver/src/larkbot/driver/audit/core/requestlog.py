"""The request log (docs/driver.md "Audit trail"): every model request of a wake-up cut into content-
addressed blocks, so a long chat's unchanged history is stored once and the part of a request that
matched the previous one (the provider's cacheable prefix) is a comparison of hashes.

Blocks come in the order a provider caches a request: one ``tools`` block (the tool specs as canonical
JSON), one ``system`` block, then one block per message part. A user message holds one text part per
rendered segment, so a block is a segment. Labels say where a block sits, messages and parts numbered
from 1: ``user #3 part 2``, ``assistant #4 tool_call send_message``, ``tool_result #5 part 1
(send_message)``. What a block's text holds:

- an image: ``[image <blob_key> <mime>]`` (`` detail=<d>`` when not ``auto``), never its bytes;
- a tool call: ``name(arguments) [id <id>]``, the arguments as the model wrote them;
- reasoning: its readable text, else ``[reasoning: N chars opaque, sha256 <12 hex>]``. The payload is
  never kept (it is the provider's, and unreadable); its digest keeps two different payloads apart;
- an assistant message's ``provider_extra`` (replayed to the same model): a placeholder likewise.

``sha256`` is always the hex digest of the block's UTF-8 text, so a hash stays comparable when the text
is not stored (``audit.store_content: false``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from larkbot.canonical.llm import (
    AssistantMessage,
    ImagePart,
    LLMRequest,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    UserPart,
    canonical_json,
)

#: The kinds a block can be.
KINDS = ("tools", "system", "text", "image", "tool_call", "reasoning", "provider_extra")


@dataclass(frozen=True, slots=True)
class Block:
    kind: str
    label: str
    sha256: str
    chars: int
    #: ``None``: not stored (``store_content: false``) or not loaded (summary reads).
    text: str | None

    @classmethod
    def of(cls, kind: str, label: str, text: str) -> Block:
        return cls(kind, label, hashlib.sha256(text.encode()).hexdigest(), len(text), text)


@dataclass(frozen=True, slots=True)
class SharedPrefix:
    """How much of a request repeats the previous one: whole leading blocks, and characters (those of
    the shared blocks plus the common start of the first differing block, when both texts are known)."""

    blocks: int
    chars: int


def _placeholder(what: str, payload: str) -> str:
    digest = hashlib.sha256(payload.encode()).hexdigest()[:12]
    return f"[{what}: {len(payload)} chars opaque, sha256 {digest}]"


def _user_parts(role: str, n: int, parts: Sequence[UserPart], suffix: str = "") -> list[Block]:
    out: list[Block] = []
    for j, part in enumerate(parts, 1):
        label = f"{role} #{n} part {j}{suffix}"
        if isinstance(part, TextPart):
            out.append(Block.of("text", label, part.text))
        else:
            out.append(Block.of("image", label, _image(part)))
    return out


def _image(part: ImagePart) -> str:
    detail = "" if part.detail == "auto" else f" detail={part.detail}"
    return f"[image {part.blob_key} {part.mime}{detail}]"


def _assistant(n: int, message: AssistantMessage, names: dict[str, str]) -> list[Block]:
    out: list[Block] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            out.append(Block.of("text", f"assistant #{n} text", part.text))
        elif isinstance(part, ToolCallPart):
            names[part.id] = part.name
            text = f"{part.name}({part.arguments_json}) [id {part.id}]"
            out.append(Block.of("tool_call", f"assistant #{n} tool_call {part.name}", text))
        else:
            out.append(Block.of("reasoning", f"assistant #{n} reasoning", _reasoning(part)))
    if message.provider_extra is not None:
        text = _placeholder("provider_extra", message.provider_extra)
        out.append(Block.of("provider_extra", f"assistant #{n} provider_extra", text))
    return out


def _reasoning(part: ReasoningPart) -> str:
    if part.text is not None:
        return part.text
    return _placeholder("reasoning", part.opaque or "")


def _tools(request: LLMRequest) -> str:
    specs = [
        {"name": t.name, "description": t.description, "parameters": json.loads(t.parameters_json)}
        for t in request.tools
    ]
    return canonical_json(specs)


def blocks_of(request: LLMRequest) -> tuple[Block, ...]:
    """The request as the provider caches it, block by block (see the module docstring)."""
    out = [Block.of("tools", "tools", _tools(request)), Block.of("system", "system", request.system)]
    #: tool call id → tool name, so a result's label names its tool.
    names: dict[str, str] = {}
    for n, message in enumerate(request.messages, 1):
        if isinstance(message, AssistantMessage):
            out.extend(_assistant(n, message, names))
        elif isinstance(message, ToolResultMessage):
            name = names.get(message.tool_call_id, "?")
            out.extend(_user_parts("tool_result", n, message.parts, f" ({name})"))
        else:
            out.extend(_user_parts("user", n, message.parts))
    return tuple(out)


def _common_start(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def shared_prefix(previous: Sequence[Block], current: Sequence[Block]) -> SharedPrefix:
    blocks = chars = 0
    for before, now in zip(previous, current, strict=False):
        if before.sha256 != now.sha256:
            if before.text is not None and now.text is not None:
                chars += _common_start(before.text, now.text)
            break
        blocks += 1
        chars += now.chars
    return SharedPrefix(blocks, chars)


@dataclass(frozen=True, slots=True)
class LoggedRequest:
    """A request a wake-up built, as its port saw it: cut into blocks only when written (off the turn)."""

    request: LLMRequest
    #: The primary's chain step; ``None`` for the probe.
    step: int | None
    at_ms: int
    estimated_tokens: int
    #: The request went to the gateway (not: refused before sending as over the window, or a dry run that
    #: answers the primary itself).
    called: bool
    #: The cursor of the compaction summary the request was built on (``None``: the chat had none).
    summary_cursor: int | None


@dataclass(frozen=True, slots=True)
class SentMessage:
    message_id: str
    at_ms: int


@dataclass(frozen=True, slots=True)
class WakeRequests:
    """What a wake-up adds to the request log: its requests in order and the messages it sent."""

    platform: str
    chat_id: str
    wake_id: str
    requests: tuple[LoggedRequest, ...]
    sent: tuple[SentMessage, ...]


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """A stored request. ``blocks`` carry their texts where they were stored and loaded."""

    id: int
    platform: str
    chat_id: str
    wake_id: str
    request_id: str
    purpose: str
    step: int | None
    at_ms: int
    endpoint: str
    estimated_tokens: int
    called: bool
    blocks: tuple[Block, ...]

    @property
    def chars(self) -> int:
        return sum(b.chars for b in self.blocks)


__all__ = [
    "KINDS",
    "Block",
    "LoggedRequest",
    "RecordedRequest",
    "SentMessage",
    "SharedPrefix",
    "WakeRequests",
    "blocks_of",
    "shared_prefix",
]
