"""The fake provider's prompt cache: which part of a request the real provider would have served from
its cache, in the fake's tokens (body bytes / 4, :func:`estimate_tokens`).

A request is compared with the previous request of its *conversation*, and only with that one:

- the conversation is the format, the model, and the ``prompt_cache_key`` when the body has one, else the
  start of the prompt (openai-chat: the first message, the system prompt; responses: ``instructions``,
  else the first input item; anthropic-messages: ``system``, else the first message). Each purpose of a
  chat has its own system prompt (and its own key), so probe, primary and compaction requests are apart;
- OpenAI formats (openai-chat, responses), as OpenAI caches automatically: the longest byte-identical
  prefix of the two prompts, counted only from 1,024 tokens on and in 128-token steps
  (``cached_tokens``); nothing is reported as a write. The prompt is what the model reads, in the order
  it reads it: the tools, then the messages (openai-chat) or ``instructions`` and ``input`` (responses),
  each as sent; the rest of the body (the model, limits, ``prompt_cache_key``) is not part of it;
- anthropic-messages, as Anthropic caches at explicit ``cache_control`` breakpoints: the prompt is its
  blocks in cache order (tools, system, then each message's content blocks; ``cache_control`` itself
  does not count). The previous request left an entry at each of its breakpoints of at least 1,024 tokens
  and at the point it read from. The read is the longest prefix ending at such an entry, found at one of
  this request's breakpoints or up to 20 blocks before it (Anthropic's look-back); the write is what
  lies between that point and the last breakpoint, when that breakpoint's prefix reaches 1,024 tokens.

Everything is a function of the requests in the order they arrived, so the fake stays deterministic; a
fresh fake has an empty cache. The least recently used conversations are forgotten beyond
:data:`MAX_CONVERSATIONS`.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Literal, assert_never

from larkbot.canonical.llm import WireFormat

#: OpenAI caches prompts from 1,024 tokens on, in 128-token steps; Anthropic caches no prefix shorter
#: than 1,024 tokens (the Sonnet and Opus minimum).
MIN_CACHED_TOKENS = 1024
CACHE_STEP_TOKENS = 128
#: Anthropic looks for an earlier cache entry up to this many blocks before a breakpoint.
LOOKBACK_BLOCKS = 20
MAX_CONVERSATIONS = 4096
BYTES_PER_TOKEN = 4


@dataclass(frozen=True, slots=True)
class CacheHit:
    read: int = 0
    write: int = 0


@dataclass(frozen=True, slots=True)
class _Block:
    digest: bytes  # of the prompt up to and including this block
    tokens: int  # of the prompt up to and including this block
    breakpoint: bool


class PromptCache:
    def __init__(self) -> None:
        self._previous: OrderedDict[tuple[str, ...], bytes | frozenset[bytes]] = OrderedDict()

    def observe(self, fmt: WireFormat, body: dict[str, Any]) -> CacheHit:
        """What the cache serves of this request, which then becomes its conversation's previous one."""
        conversation = _conversation(fmt, body)
        previous = self._previous.pop(conversation, None)
        match fmt:
            case "anthropic-messages":
                hit, entries = _anthropic(body, previous if isinstance(previous, frozenset) else frozenset())
                self._previous[conversation] = entries
            case "openai-chat" | "responses":
                prompt = _openai_prompt(fmt, body)
                hit = _openai(prompt, previous if isinstance(previous, bytes) else b"")
                self._previous[conversation] = prompt
            case _:
                assert_never(fmt)
        while len(self._previous) > MAX_CONVERSATIONS:
            self._previous.popitem(last=False)
        return hit


def _conversation(fmt: WireFormat, body: dict[str, Any]) -> tuple[str, ...]:
    model = str(body.get("model", ""))
    key = body.get("prompt_cache_key")
    if isinstance(key, str) and fmt != "anthropic-messages":
        return (fmt, model, "key", key)
    match fmt:
        case "openai-chat":
            start = _first(body.get("messages"))
        case "responses":
            start = body.get("instructions") or _first(body.get("input"))
        case "anthropic-messages":
            start = body.get("system") or _first(body.get("messages"))
        case _:
            assert_never(fmt)
    return (fmt, model, "start", hashlib.sha256(_json(start)).hexdigest())


def _first(items: Any) -> Any:
    return items[0] if isinstance(items, list) and items else items


def _json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _openai_prompt(fmt: Literal["openai-chat", "responses"], body: dict[str, Any]) -> bytes:
    match fmt:
        case "openai-chat":
            return _json([body.get("tools", []), body.get("messages", [])])
        case "responses":
            return _json([body.get("tools", []), body.get("instructions", ""), body.get("input", [])])
        case _:
            assert_never(fmt)


def _openai(prompt: bytes, previous: bytes) -> CacheHit:
    shared = 0
    for a, b in zip(prompt, previous, strict=False):
        if a != b:
            break
        shared += 1
    tokens = shared // BYTES_PER_TOKEN
    if tokens < MIN_CACHED_TOKENS:
        return CacheHit()
    return CacheHit(read=tokens // CACHE_STEP_TOKENS * CACHE_STEP_TOKENS)


def _anthropic(body: dict[str, Any], entries: frozenset[bytes]) -> tuple[CacheHit, frozenset[bytes]]:
    blocks = _blocks(body)
    breakpoints = [i for i, block in enumerate(blocks) if block.breakpoint]
    read_at = max(
        (
            j
            for b in breakpoints
            for j in range(b, max(-1, b - LOOKBACK_BLOCKS - 1), -1)
            if blocks[j].digest in entries
        ),
        default=None,
    )
    read = blocks[read_at].tokens if read_at is not None else 0
    written = {blocks[b].digest for b in breakpoints if blocks[b].tokens >= MIN_CACHED_TOKENS}
    if read_at is not None:
        written.add(blocks[read_at].digest)
    write = 0
    if breakpoints and blocks[breakpoints[-1]].tokens >= MIN_CACHED_TOKENS:
        write = max(0, blocks[breakpoints[-1]].tokens - read)
    return CacheHit(read=read, write=write), frozenset(written)


def _blocks(body: dict[str, Any]) -> list[_Block]:
    """The prompt's blocks in Anthropic's cache order, each with the digest and size of the prompt so far."""
    found: list[tuple[str, Any]] = [("tools", tool) for tool in _list(body.get("tools"))]
    system = body.get("system")
    found += [("system", block) for block in (_text_blocks(system) if system else [])]
    for index, message in enumerate(_list(body.get("messages"))):
        if isinstance(message, dict):
            where = f"{index}:{message.get('role')}"
            found += [(where, block) for block in _text_blocks(message.get("content"))]
    out: list[_Block] = []
    digest, size = b"", 0
    for where, block in found:
        marked = isinstance(block, dict) and "cache_control" in block
        content = {k: v for k, v in block.items() if k != "cache_control"} if marked else block
        encoded = _json(content)
        digest = hashlib.sha256(digest + where.encode() + b"\x00" + encoded).digest()
        size += len(encoded)
        out.append(_Block(digest, size // BYTES_PER_TOKEN, marked))
    return out


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _text_blocks(content: Any) -> list[Any]:
    """A string is one text block, as Anthropic reads it."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return _list(content)
