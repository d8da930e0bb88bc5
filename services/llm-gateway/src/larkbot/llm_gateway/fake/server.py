"""The fake LLM provider: a real aiohttp server speaking ``openai-chat``, ``anthropic-messages`` and
``responses`` on ``POST <any prefix>/chat/completions``, ``/messages`` and ``/responses``, and speech to
text on ``/audio/transcriptions`` (``speech.py``).

Faithful where the gateway depends on it: each format's request shape is read back (a body the real
provider would reject gets HTTP 400 in that format's error shape — including Anthropic's role alternation,
``anthropic-version`` header, empty or whitespace-only text blocks, and ``temperature`` or a forced
``tool_choice`` beside enabled thinking; and OpenAI's refusal of ``max_tokens`` and ``temperature`` for
its reasoning models, ``o1``…``o9`` and ``gpt-5`` on), replies carry each format's usage fields with
cache numbers, tool calls, reasoning, refusals and errors with ``retry-after``. Every reply carries
``x-larkbot-fake: 1``; the gateway accepts that only from an endpoint configured with ``fake: true``, so a
production configuration can never silently talk to the fake.

Usage: a script's explicit figures, or the fake's own: input and output at ~4 bytes per token, cache
reads (and Anthropic's writes) for the prefix shared with the previous request of the same conversation,
as the real providers count them (``cache.py``).

Context window: with ``context_window`` set (constructor, attribute, or ``--context-window``), a request
whose :func:`estimate_tokens` exceeds it gets the format's real "request too long" error without
consulting the script (the call is still recorded in ``.calls``); a script can also answer
:class:`ContextOverflow` itself.

With ``api_key`` set, a call without that credential gets 401 and — on purpose — the offered key echoed
in the message, which is how the contract tests prove the gateway masks provider messages.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import importlib
import itertools
import json
import re
import signal
import sys
from collections.abc import Sequence as Seq
from typing import Any, assert_never

from aiohttp import web

from larkbot.canonical.errors import ContractError
from larkbot.canonical.llm import TextPart, ToolCallPart, Usage, WireFormat

from ..core import transcription
from ..core.error_bodies import context_length_body, error_body
from ..core.formats import FAKE_HEADER, codec_for_path, encode_response
from ..errors import WireError
from .cache import CacheHit, PromptCache
from .script import ContextOverflow, Drop, Fail, FakeCall, Reply, Script, echo
from .speech import TranscriptionCall, TranscriptionScript, fake_transcript, wav_seconds

#: OpenAI's reasoning models, which refuse ``max_tokens`` and a temperature other than 1.
_OPENAI_REASONING = re.compile(r"^(o[1-9]|gpt-[5-9])")
_THINKING_DOC = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"


def blob_key_of(mime: str, data_b64: str) -> str:
    """Images read back from a request are keyed by a digest of their encoded bytes."""
    return "sha256:" + hashlib.sha256(data_b64.encode()).hexdigest()


def estimate_tokens(raw: bytes) -> int:
    """The fake's token estimate of a request: its body size in bytes over 4 (at least 1)."""
    return max(1, len(raw) // 4)


class _Refused(ContractError):
    """A request the real provider refuses with this exact status and body."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(status)
        self.status = status
        self.body = body


class FakeProvider:
    def __init__(
        self,
        script: Script = echo,
        *,
        api_key: str | None = None,
        context_window: int | None = None,
        transcribe: TranscriptionScript = fake_transcript,
        keep_calls: bool = True,
    ) -> None:
        self.script = script
        #: What ``/audio/transcriptions`` answers (``speech.py``); ``.transcriptions`` records the calls.
        self.transcribe = transcribe
        self.transcriptions: list[TranscriptionCall] = []
        self.api_key = api_key
        #: Requests estimated above this many tokens get the format's context-length error.
        self.context_window = context_window
        #: Every call received, unless ``keep_calls`` is false (a long load run, whose script sees each
        #: call as it comes: kept, its requests would grow without bound).
        self.calls: list[FakeCall] = []
        self.keep_calls = keep_calls
        self.received = 0
        self._cache = PromptCache()
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve on ``host:port`` (0 picks a free port); returns the base URL, ``http://host:port/v1``."""
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/{tail:.*}", self._handle)
        # A client that gives up (timeout tests) cancels its handler, so stopping never waits on it.
        self._runner = web.AppRunner(
            app, access_log=None, handle_signals=False, handler_cancellation=True, shutdown_timeout=1.0
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://{host}:{bound}/v1"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeProvider:
        if not self.url:
            await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.path.endswith(transcription.PATH):
            return await self._transcription(request)
        codec = codec_for_path(request.path)
        if codec is None:
            return web.json_response({"error": {"message": "unknown path"}}, status=404, headers=_FAKE)
        fmt = codec.format
        raw = await request.read()
        headers = {k.lower(): v for k, v in request.headers.items()}
        denied = self._check_auth(fmt, headers)
        if denied is not None:
            return _error(fmt, 401, denied)
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise WireError("body is not a JSON object")
            _validate(fmt, body, headers)
            parsed = codec.decode_request(body, blob_key_of, "request")
        except _Refused as refused:
            return web.json_response(refused.body, status=refused.status, headers=_FAKE)
        except (WireError, ValueError, KeyError, TypeError) as exc:
            return _error(fmt, 400, f"invalid request: {exc}")
        call = FakeCall(self.received, fmt, request.path, headers, raw, body, parsed)
        self.received += 1
        if self.keep_calls:
            self.calls.append(call)
        tokens = estimate_tokens(raw)
        if self.context_window is not None and tokens > self.context_window:
            return _overflow(fmt, tokens, ContextOverflow(limit=self.context_window))
        # A request the model reads reaches its cache, whatever the script answers.
        hit = self._cache.observe(fmt, body)
        action = self.script(call)
        if not isinstance(action, Drop) and action.latency_s > 0:
            await asyncio.sleep(action.latency_s)
        if isinstance(action, Drop):
            assert request.transport is not None
            request.transport.close()
            return web.Response(status=500)
        if isinstance(action, ContextOverflow):
            limit = action.limit if action.limit is not None else self.context_window
            return _overflow(fmt, tokens, action if limit is None else ContextOverflow(action.dialect, limit))
        if isinstance(action, Fail):
            extra = {"retry-after": action.retry_after} if action.retry_after is not None else {}
            extra.update(action.headers)
            if action.body is not None:
                return web.json_response(action.body, status=action.status, headers={**_FAKE, **extra})
            return _error(fmt, action.status, action.message, extra)
        usage = action.usage or _estimate_usage(tokens, hit, action)
        payload = encode_response(
            fmt,
            action.message(),
            action.stop(),
            usage,
            model=parsed.model,
            response_id=f"fake-{call.index}",
            usage_style=action.usage_style,
        )
        payload.update(action.extra)
        return web.json_response(payload, headers=_FAKE)

    async def _transcription(self, request: web.Request) -> web.StreamResponse:
        """``/audio/transcriptions`` as OpenAI answers it: multipart in, ``json`` or ``verbose_json`` out,
        errors in OpenAI's shape."""
        headers = {k.lower(): v for k, v in request.headers.items()}
        denied = self._check_auth("openai-chat", headers)
        if denied is not None:
            return _error("openai-chat", 401, denied)
        try:
            form = await request.post()
        except ValueError as exc:
            return _error("openai-chat", 400, f"invalid multipart body: {type(exc).__name__}")
        upload = form.get("file")
        model = form.get("model")
        response_format = str(form.get("response_format") or "json")
        if not isinstance(upload, web.FileField) or not isinstance(model, str) or not model:
            return _error("openai-chat", 400, "model and file are required")
        if response_format not in ("json", "verbose_json"):
            return _error("openai-chat", 400, f"response_format {response_format!r} is not supported")
        language = form.get("language")
        call = TranscriptionCall(
            index=len(self.transcriptions),
            headers=headers,
            model=model,
            response_format=response_format,
            language=language if isinstance(language, str) and language else None,
            filename=upload.filename,
            mime=upload.content_type,
            audio=upload.file.read(),
        )
        self.transcriptions.append(call)
        action = self.transcribe(call)
        if isinstance(action, Drop):
            assert request.transport is not None
            request.transport.close()
            return web.Response(status=500)
        if isinstance(action, Fail):
            extra = {"retry-after": action.retry_after} if action.retry_after is not None else {}
            extra.update(action.headers)
            return _error("openai-chat", action.status, action.message, extra)
        found = transcription.Transcribed(action, call.language, wav_seconds(call.audio))
        return web.json_response(transcription.encode_reply(found, response_format), headers=_FAKE)

    def _check_auth(self, fmt: WireFormat, headers: dict[str, str]) -> str | None:
        if self.api_key is None:
            return None
        match fmt:
            case "anthropic-messages":
                offered = headers.get("x-api-key", "")
            case "openai-chat" | "responses":
                offered = headers.get("authorization", "").removeprefix("Bearer ")
            case _:
                assert_never(fmt)
        if offered == self.api_key:
            return None
        return f"Incorrect API key provided: {offered}"


_FAKE = {FAKE_HEADER: "1"}


def _error(fmt: Any, status: int, message: str, extra: dict[str, str] | None = None) -> web.Response:
    return web.json_response(
        error_body(fmt, status, message), status=status, headers={**_FAKE, **(extra or {})}
    )


def _overflow(fmt: Any, tokens: int, action: ContextOverflow) -> web.Response:
    limit = action.limit if action.limit is not None else max(1, tokens - 1)
    status, body = context_length_body(fmt, tokens, limit, action.dialect)
    return web.json_response(body, status=status, headers=_FAKE)


def _openai_refusal(message: str, param: str, code: str) -> _Refused:
    return _Refused(
        400, {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}
    )


def _anthropic_refusal(message: str) -> _Refused:
    return _Refused(400, {"type": "error", "error": {"type": "invalid_request_error", "message": message}})


def _validate(fmt: str, body: dict[str, Any], headers: dict[str, str]) -> None:
    if not body.get("model"):
        raise WireError("model is required")
    if fmt in ("openai-chat", "responses") and _OPENAI_REASONING.match(str(body["model"]).rsplit("/", 1)[-1]):
        if "max_tokens" in body:
            raise _openai_refusal(
                "Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead.",
                "max_tokens",
                "unsupported_parameter",
            )
        if body.get("temperature", 1) != 1:
            raise _openai_refusal(
                f"Unsupported value: 'temperature' does not support {body['temperature']} with this model. "
                "Only the default (1) value is supported.",
                "temperature",
                "unsupported_value",
            )
    if fmt != "anthropic-messages":
        return
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive"):
        if body.get("temperature", 1) != 1:
            raise _anthropic_refusal(
                f"`temperature` may only be set to 1 when thinking is enabled. Please consult our "
                f"documentation at {_THINKING_DOC}#important-considerations-when-using-extended-thinking"
            )
        choice = body.get("tool_choice")
        if isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
            raise _anthropic_refusal("Thinking may not be enabled when tool_choice forces tool use.")
    if "anthropic-version" not in headers:
        raise WireError("anthropic-version header is required")
    if not isinstance(body.get("max_tokens"), int):
        raise WireError("max_tokens is required")
    roles = [m.get("role") for m in body.get("messages", []) if isinstance(m, dict)]
    if not roles or roles[0] != "user":
        raise WireError("messages must start with a user message")
    if any(a == b for a, b in itertools.pairwise(roles)):
        raise WireError("roles must alternate between user and assistant")
    for message in body.get("messages", []):
        for block in message.get("content", []) if isinstance(message.get("content"), list) else []:
            if block.get("type") != "text":
                continue
            if not block.get("text"):
                raise _anthropic_refusal("messages: text content blocks must be non-empty")
            if not str(block["text"]).strip():
                raise _anthropic_refusal("messages: text content blocks must contain non-whitespace text")


def _estimate_usage(input_tokens: int, hit: CacheHit, action: Reply) -> Usage:
    """~4 bytes per token, input and output; cache reads and writes as the prompt cache found them."""
    read = min(hit.read, input_tokens)
    write = min(hit.write, input_tokens - read)
    text = 0
    for part in action.parts:
        if isinstance(part, TextPart):
            text += len(part.text)
        elif isinstance(part, ToolCallPart):
            text += len(part.arguments_json)
    return Usage(
        input_tokens=input_tokens,
        output_tokens=max(1, text // 4),
        cache_read_tokens=read,
        cache_write_tokens=write,
    )


async def serve_fake(
    host: str,
    port: int,
    script: Script = echo,
    *,
    api_key: str | None = None,
    context_window: int | None = None,
) -> FakeProvider:
    """Start a fake provider; the caller stops it with ``await provider.stop()``."""
    provider = FakeProvider(script, api_key=api_key, context_window=context_window)
    await provider.start(host, port)
    return provider


def load_script(spec: str) -> Script:
    """``echo`` or ``package.module:function`` (a rule function taking a :class:`FakeCall`)."""
    if spec == "echo":
        return echo
    module_name, _, attr = spec.partition(":")
    if not attr:
        raise ValueError("script must be 'echo' or 'module:function'")
    script: Script = getattr(importlib.import_module(module_name), attr)
    return script


def main(argv: Seq[str] | None = None) -> int:
    """``larkbot fake-llm [--host H] [--port P] [--script echo|module:function] [--api-key K]
    [--context-window TOKENS]``."""
    parser = argparse.ArgumentParser(prog="larkbot fake-llm", description="Serve the fake LLM provider.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9190)
    parser.add_argument("--script", default="echo")
    parser.add_argument("--api-key", default=None)
    parser.add_argument(
        "--context-window",
        type=int,
        default=None,
        help="answer requests estimated above this many tokens (body bytes / 4) with a context-length error",
    )
    args = parser.parse_args(argv)
    try:
        script = load_script(args.script)
    except (ValueError, ImportError, AttributeError) as exc:
        print(f"larkbot fake-llm: {exc}", file=sys.stderr)
        return 2

    async def serve() -> None:
        provider = await serve_fake(
            args.host, args.port, script, api_key=args.api_key, context_window=args.context_window
        )
        print(
            f"fake LLM provider at {provider.url} "
            "(formats: openai-chat, anthropic-messages, responses, openai-transcription)"
        )
        sys.stdout.flush()
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stopping.set)
        await stopping.wait()
        await provider.stop()

    asyncio.run(serve())
    return 0
