"""``larkbot playground``: a local group chat to talk to the bot, with no platform account and no model.

One process serves the fake Telegram Bot API (the real ingress-telegram long-polls it) and the fake LLM
provider (the real llm-gateway calls it, with ``fake: true``), plus a small control API:

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
from larkbot.runtime.config import LarkbotConfig, load_config

from .stack import ops_endpoints, playground_port, readiness

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
    last = re.sub(r"<[^>]+>", "", others[-1].group("body")).strip() if others else ""
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
    """The fake Bot API, the fake model and the control API, on ``host``; port 0 picks a free one."""

    def __init__(self, config: LarkbotConfig, host: str = "127.0.0.1") -> None:
        from larkbot.ingress_telegram.fake import FakeBotApi

        self.host = host
        self.endpoints = ops_endpoints(config, [service.value for service in SERVICE_PORTS])
        self.telegram = FakeBotApi(host=host)
        self.llm: FakeProvider | None = None
        self.decisions: list[dict[str, Any]] = []
        self.transcript: list[dict[str, Any]] = []
        self.users: dict[str, int] = {}
        self._runner: web.AppRunner | None = None
        self.control_url = ""

    async def start(self, telegram_port: int, llm_port: int, control_port: int) -> None:
        from larkbot.llm_gateway.fake import serve_fake

        await self.telegram.start(telegram_port)
        self.llm = await serve_fake(self.host, llm_port, self._model)
        app = web.Application()
        app.add_routes(
            [web.post("/say", self._say), web.get("/transcript", self._read), web.get("/stack", self._stack)]
        )
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

    def _reactions(self) -> list[dict[str, Any]]:
        return [
            {"message_id": call.get("message_id"), "reaction": call.get("reaction")}
            for call in self.telegram.calls("setMessageReaction")
        ]

    async def _say(self, request: web.Request) -> web.Response:
        body = await request.json()
        text, user = str(body.get("text") or ""), str(body.get("user") or "You")
        if not text:
            return web.json_response({"error": "text is required"}, status=400)
        user_id = self.users.setdefault(user, 100000 + len(self.users))
        message_id = int(time.time() * 1000) % 2_000_000_000
        update = {
            "message": {
                "message_id": message_id,
                "from": {"id": user_id, "is_bot": False, "first_name": user},
                "chat": {"id": PLAYGROUND_CHAT_ID, "type": "supergroup", "title": PLAYGROUND_TITLE},
                "date": int(time.time()),
                "text": text,
            }
        }
        cursor = {
            "bot": len(self.telegram.sent),
            "reactions": len(self._reactions()),
            "decisions": len(self.decisions),
        }
        self.telegram.enqueue(update)
        self.transcript.append({"from": user, "text": text, "at": time.time()})
        return web.json_response({"ok": True, "message_id": message_id, "cursor": cursor})

    async def _read(self, _request: web.Request) -> web.Response:
        bot = [{"from": "bot", "text": sent.get("text", "")} for sent in self.telegram.sent]
        return web.json_response(
            {"said": self.transcript, "bot": bot, "reactions": self._reactions(), "decisions": self.decisions}
        )

    async def _stack(self, _request: web.Request) -> web.Response:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
            found = await asyncio.gather(*(readiness(session, e.url + "/readyz") for e in self.endpoints))
        services = {
            e.name: {"url": e.url, "state": r.state, "detail": r.detail}
            for e, r in zip(self.endpoints, found, strict=True)
        }
        return web.json_response({"services": services})


async def _serve(host: str, telegram_port: int, llm_port: int, control_port: int) -> None:
    playground = Playground(load_config(), host)
    await playground.start(telegram_port, llm_port, control_port)
    assert playground.llm is not None
    print(
        f"playground: Telegram Bot API on {playground.telegram.base_url}, LLM on {playground.llm.url}, "
        f"control on {playground.control_url} (chat {PLAYGROUND_CHAT_ID})",
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
    return 0
