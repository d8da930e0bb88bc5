"""``larkbot playground``: a local group chat to talk to the bot, with no platform account and no model.

One process serves the fake Telegram Bot API (the real ingress-telegram long-polls it) and the fake LLM
provider (the real llm-gateway calls it, with ``fake: true``), plus the control API and the browser page
of ``playground_web`` (members post, reply, react, edit, delete and send photos; the page shows the group
live). What ``larkbot say`` uses:

    POST /say {"text": "...", "user": "Alice"}   a user posts in the playground group; the answer carries
                                                 the transcript's lengths at that moment (a cursor)
    GET  /transcript                             what was said, the bot's messages and reactions, and
                                                 the decisions the model made (probe verdicts with their
                                                 reasons, each turn's tool call)
    GET  /stack                                  each service's readiness, from the configuration

The fake model's rule: the probe acts when the bot is mentioned or asked a question, and the primary
answers once, quoting what it read. The driver acts on the probe's verdict as the model gives it, so the
playground knows the bot's decision the moment it is made (``larkbot say`` reports it).
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import json
import re
import signal
import sys
import time
from typing import Any

import aiohttp
from aiohttp import web

from larkbot.canonical.errors import ConfigError
from larkbot.canonical.llm import ToolCallPart, ToolResultMessage
from larkbot.canonical.names import SERVICE_PORTS
from larkbot.llm_gateway.fake import Action, FakeCall, FakeProvider, Reply
from larkbot.runtime.config import LarkbotConfig, is_loopback, load_config

from .playground_web import ControlApi
from .stack import inspector_endpoint, ops_endpoints, playground_port, readiness
from .web import secured_app

PLAYGROUND_CHAT_ID = -1000000000001
PLAYGROUND_TITLE = "LarkBot playground"
_MESSAGE = re.compile(r"<message (?P<attrs>[^>]*)>(?P<body>.*?)</message>", re.S)


def playground_script(call: FakeCall) -> Action:
    """The fake model of the playground (a rule function for ``larkbot.llm_gateway.fake``)."""
    request = call.request
    names = {tool.name for tool in request.tools}
    text = "\n".join(
        part.text
        for message in request.messages
        for part in getattr(message, "parts", ())
        if hasattr(part, "text")
    )
    others = [m for m in _MESSAGE.finditer(text) if 'myself="true"' not in m.group("attrs")]
    # The body is XML: tags stripped, entities decoded, so the quote reads as the member wrote it.
    last = html.unescape(re.sub(r"<[^>]+>", "", others[-1].group("body"))).strip() if others else ""
    if "decide" in names:
        if "@" in last or "?" in last or "？" in last:
            return Reply.tool_call(
                "decide", {"should_act": "send_message", "reason": "mentioned or asked a question"}
            )
        return Reply.tool_call(
            "decide", {"should_act": "no_action", "reason": "not mentioned and not asked a question"}
        )
    if request.messages and isinstance(request.messages[-1], ToolResultMessage):
        return Reply.tool_call("end_turn", {}) if "end_turn" in names else Reply.text("")
    if "send_message" in names:
        return Reply.tool_call("send_message", {"text": f"I read: “{last[:200]}”"})
    return Reply.tool_call("end_turn", {}) if "end_turn" in names else Reply.text("")


def decision_of(call: FakeCall, action: Action) -> dict[str, Any] | None:
    """What a model answer decided: a probe's verdict and reason, or the tool a turn's step called."""
    if not isinstance(action, Reply):
        return None  # a failure or a dropped connection decides nothing; the driver retries
    calls = [part for part in action.parts if isinstance(part, ToolCallPart)]
    if any(tool.name == "decide" for tool in call.request.tools):
        args = json.loads(calls[0].arguments_json) if calls else {}
        return {"kind": "probe", "decision": args.get("should_act"), "reason": args.get("reason")}
    return {"kind": "turn", "tool": calls[0].name if calls else None}


class Playground:
    """The fake Bot API, the fake model and the control API, on ``host``; port 0 picks a free one.

    The control API is the browser page's too, so it sits behind the web guard (``config.inspector``'s
    token); beyond loopback it refuses to start without one."""

    def __init__(self, config: LarkbotConfig, host: str = "127.0.0.1") -> None:
        from larkbot.ingress_telegram.fake import FakeBotApi

        self.host = host
        self.token = config.inspector.access_token
        if not is_loopback(host) and self.token is None:
            raise PlaygroundRefused(
                f"the playground would listen on {host!r}, beyond loopback, where anyone could post as any "
                "member: set inspector.access_token in the configuration, or listen on 127.0.0.1"
            )
        self.endpoints = ops_endpoints(config, [service.value for service in SERVICE_PORTS])
        self.telegram = FakeBotApi(host=host)
        # Ids continue from the clock, so a restarted playground does not reuse ids the pipeline stored
        # (its dedup key is chat:message id); 100 ids a second of headroom, a wrap every 231 days.
        self.telegram.skip_message_ids(PLAYGROUND_CHAT_ID, int(time.time() * 100) % 2_000_000_000)
        self.llm: FakeProvider | None = None
        self.decisions: list[dict[str, Any]] = []
        chat = {"id": PLAYGROUND_CHAT_ID, "type": "supergroup", "title": PLAYGROUND_TITLE}
        self.control = ControlApi(
            self.telegram,
            chat,
            self.decisions,
            model=primary_model(config),
            inspector=inspector_endpoint(config).url,
        )
        self._runner: web.AppRunner | None = None
        self.control_url = ""

    @property
    def transcript(self) -> list[dict[str, Any]]:
        return self.control.transcript

    async def start(self, telegram_port: int, llm_port: int, control_port: int) -> None:
        from larkbot.llm_gateway.fake import serve_fake

        await self.telegram.start(telegram_port)
        self.llm = await serve_fake(self.host, llm_port, self._model)
        app = secured_app(self.token)
        app.add_routes([*self.control.routes(), web.get("/stack", self._stack)])
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, control_port)
        await site.start()
        bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.control_url = f"http://{self.host}:{bound}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self.llm is not None:
            await self.llm.stop()
        await self.telegram.stop()

    def _model(self, call: FakeCall) -> Action:
        action = playground_script(call)
        decided = decision_of(call, action)
        if decided is not None:
            self.decisions.append({**decided, "at": time.time()})
        return action

    async def _stack(self, _request: web.Request) -> web.Response:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
            found = await asyncio.gather(*(readiness(session, e.url + "/readyz") for e in self.endpoints))
        services = {
            e.name: {"url": e.url, "state": r.state, "detail": r.detail}
            for e, r in zip(self.endpoints, found, strict=True)
        }
        return web.json_response({"services": services})


class PlaygroundRefused(Exception):
    """The playground will not start as asked (listening beyond loopback without a token)."""


def primary_model(config: LarkbotConfig) -> dict[str, Any]:
    """The primary endpoint as the page tells it: the demo script (``fake``, or none) or a model."""
    name = config.llm.primary
    endpoint = config.llm.endpoints.get(name) if name is not None else None
    if endpoint is None or endpoint.fake:
        return {"fake": True, "endpoint": name, "model": None}
    return {"fake": False, "endpoint": name, "model": endpoint.model}


async def _serve(host: str, telegram_port: int, llm_port: int, control_port: int) -> None:
    playground = Playground(load_config(), host)
    await playground.start(telegram_port, llm_port, control_port)
    assert playground.llm is not None
    print(
        f"playground: Telegram Bot API on {playground.telegram.base_url}, LLM on {playground.llm.url}, "
        f"control and the page on {playground.control_url}/ (chat {PLAYGROUND_CHAT_ID})",
        flush=True,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await playground.stop()


def main(args: Any) -> int:
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(
                _serve(args.host, args.telegram_port, args.llm_port, playground_port(args.control_port))
            )
    except ConfigError as exc:
        print(f"larkbot playground: {exc.report()}", file=sys.stderr)
        return 2
    except PlaygroundRefused as exc:
        print(f"larkbot playground: {exc}", file=sys.stderr)
        return 2
    return 0
