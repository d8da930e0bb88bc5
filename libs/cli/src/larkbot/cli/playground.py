"""``larkbot playground``: a local group chat to talk to the bot, with no platform account and no model.

One process serves the fake Telegram Bot API (the real ingress-telegram long-polls it) and the fake LLM
provider (the real llm-gateway calls it, with ``fake: true``), plus a small control API:

    POST /say {"text": "...", "user": "Alice"}   a user posts in the playground group
    GET  /transcript                             everything said in the group, the bot's replies included

``larkbot say "hello @bot"`` posts and waits for the bot's answer. The fake model's rule: the probe acts
when the bot is mentioned or asked a question, and the primary answers once, quoting what it read.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import sys
import time
import urllib.error
import urllib.request
from typing import Any

from aiohttp import web

PLAYGROUND_CHAT_ID = -1000000000001
PLAYGROUND_TITLE = "LarkBot playground"
_MESSAGE = re.compile(r"<message (?P<attrs>[^>]*)>(?P<body>.*?)</message>", re.S)


def playground_script(call: Any) -> Any:
    """The fake model of the playground (a rule function for ``larkbot.llm_gateway.fake``)."""
    from larkbot.canonical.llm import ToolResultMessage
    from larkbot.llm_gateway.fake import Reply

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
        addressed = "@" in last or "?" in last or "？" in last
        verdict = "send_message" if addressed else "no_action"
        return Reply.tool_call(
            "decide", {"should_act": verdict, "reason": "playground rule: mention or question"}
        )
    if request.messages and isinstance(request.messages[-1], ToolResultMessage):
        return Reply.tool_call("end_turn", {}) if "end_turn" in names else Reply.text("")
    if "send_message" in names:
        return Reply.tool_call("send_message", {"text": f"I read: “{last[:200]}”"})
    return Reply.tool_call("end_turn", {}) if "end_turn" in names else Reply.text("")


async def _serve(host: str, telegram_port: int, llm_port: int, control_port: int) -> None:
    from larkbot.ingress_telegram.fake import FakeBotApi
    from larkbot.llm_gateway.fake import serve_fake

    telegram = FakeBotApi(host=host)
    await telegram.start(telegram_port)
    llm = await serve_fake(host, llm_port, playground_script)
    users: dict[str, int] = {}
    transcript: list[dict[str, Any]] = []

    async def say(request: web.Request) -> web.Response:
        body = await request.json()
        text, user = str(body.get("text") or ""), str(body.get("user") or "You")
        if not text:
            return web.json_response({"error": "text is required"}, status=400)
        user_id = users.setdefault(user, 100000 + len(users))
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
        telegram.enqueue(update)
        transcript.append({"from": user, "text": text, "at": time.time()})
        return web.json_response({"ok": True, "message_id": message_id})

    async def read(_request: web.Request) -> web.Response:
        bot = [
            {"from": "bot", "text": sent.get("text", ""), "at": sent.get("_at", 0)} for sent in telegram.sent
        ]
        return web.json_response({"said": transcript, "bot": bot})

    app = web.Application()
    app.add_routes([web.post("/say", say), web.get("/transcript", read)])
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    await web.TCPSite(runner, host, control_port).start()
    print(
        f"playground: Telegram Bot API on http://{host}:{telegram_port}, LLM on {llm.url}, "
        f"control on http://{host}:{control_port} (chat {PLAYGROUND_CHAT_ID})",
        flush=True,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()
    await llm.stop()
    await telegram.stop()


def main(args: Any) -> int:
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args.host, args.telegram_port, args.llm_port, args.control_port))
    return 0


def say(args: Any) -> int:
    base = f"http://127.0.0.1:{args.control_port}"
    try:
        before = _get(f"{base}/transcript")
        request = urllib.request.Request(
            f"{base}/say", data=json.dumps({"text": args.text, "user": args.user}).encode(),
            headers={"Content-Type": "application/json"}, method="POST",
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=5):
            pass
        seen = len(before["bot"])
        deadline = time.monotonic() + args.wait
        while time.monotonic() < deadline:
            now = _get(f"{base}/transcript")
            if len(now["bot"]) > seen:
                for reply in now["bot"][seen:]:
                    print(f"bot: {reply['text']}")
                return 0
            time.sleep(0.2)
    except (urllib.error.URLError, OSError) as exc:
        print(f"the playground does not answer on {base} ({exc}); is `make up` running?", file=sys.stderr)
        return 1
    print(f"(no reply within {args.wait:g} s: the bot chose silence)")
    return 0


def _get(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=5) as resp:
        data: dict[str, Any] = json.load(resp)
        return data
