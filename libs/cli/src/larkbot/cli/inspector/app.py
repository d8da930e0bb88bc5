"""The inspector's web application: read-only pages over the driver's database, behind the web guard.

GET /                              the chats with recorded wake-ups
GET /chat/{platform}/{chat_id}     one chat: plots, wake-ups, compactions, memories
GET /wake/{wake_id}                one wake-up: probe, steps, requests with their shared prefix
GET /find?platform=&chat=&message= the wake-up that sent a message (the playground links here)
GET /healthz                       alive
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from larkbot.driver.read import DriverNotReady, DriverReads
from larkbot.runtime.config import ChatSettings, LarkbotConfig

from ..web import join, secured_app
from . import views, wakeview

log = logging.getLogger("larkbot.inspector")

#: Wake-ups a chat page lists and plots (the newest).
CHAT_WAKEUPS = 200
#: Memories a chat page lists (the newest learnt in the chat).
CHAT_MEMORIES = 200

Page = Callable[[web.Request], Awaitable[web.Response]]


def _html(body: str, status: int = 200) -> web.Response:
    return web.Response(text=body, status=status, content_type="text/html", charset="utf-8")


def _guarded(page: Page) -> Page:
    async def handler(request: web.Request) -> web.Response:
        try:
            return await page(request)
        except DriverNotReady as exc:
            # A table the driver has not created yet (a fresh stack, or a driver older than the inspector).
            log.warning("driver database not ready: %s", exc.cause)
            return _html(
                views.message(
                    "Driver database not ready",
                    "The driver's database does not answer, or the driver has not created (or not migrated) "
                    "its tables yet.",
                    "Start the driver (or upgrade it to this version) and reload.",
                ),
                503,
            )

    return handler


def _not_ready(cause: str) -> web.Response:
    """``/readyz`` failing, the database's error named by its type only."""
    check = {"ok": False, "detail": cause}
    return web.json_response({"ok": False, "checks": {"database": check}}, status=503)


class Inspector:
    def __init__(self, config: LarkbotConfig, reads: DriverReads) -> None:
        self.config = config
        self.reads = reads

    def settings(self, platform: str, chat_id: str) -> ChatSettings:
        return self.config.chat(platform, chat_id) or self.config.chats.get("default") or ChatSettings()

    def app(self) -> web.Application:
        app = secured_app(self.config.inspector.access_token, open_paths=frozenset({"/healthz", "/readyz"}))
        app.add_routes(
            [
                web.get("/", _guarded(self.index)),
                web.get("/chat/{platform}/{chat_id}", _guarded(self.chat)),
                web.get("/wake/{wake_id}", _guarded(self.wake)),
                web.get("/find", _guarded(self.find)),
                web.get("/healthz", self.healthz),
                web.get("/readyz", self.readyz),
            ]
        )
        return app

    async def healthz(self, _request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def readyz(self, _request: web.Request) -> web.Response:
        try:
            await self.reads.ping()
        except DriverNotReady as exc:
            return _not_ready(exc.cause)
        except Exception as exc:  # any other failure to reach the database is "not ready" too
            return _not_ready(type(exc).__name__)
        return web.json_response({"ok": True, "checks": {"database": {"ok": True}}})

    async def index(self, _request: web.Request) -> web.Response:
        return _html(views.index(await self.reads.chats()))

    async def chat(self, request: web.Request) -> web.Response:
        platform, chat_id = request.match_info["platform"], request.match_info["chat_id"]
        reads = self.reads
        return _html(
            views.chat(
                platform,
                chat_id,
                await reads.latest_wakeups(platform, chat_id, limit=CHAT_WAKEUPS),
                await reads.compactions(platform, chat_id),
                await reads.memories_of_chat(platform, chat_id, limit=CHAT_MEMORIES),
            )
        )

    async def wake(self, request: web.Request) -> web.Response:
        wake_id = request.match_info["wake_id"]
        detail = await self.reads.wake(wake_id)
        if detail is None:
            return _html(
                views.message(
                    "No such wake-up", join("No wake-up '", wake_id, "' is recorded."), _WHY_MISSING
                ),
                404,
            )
        a = detail.audit
        return _html(wakeview.wake(detail, self.settings(a.platform, a.chat_id)))

    async def find(self, request: web.Request) -> web.Response:
        platform = request.query.get("platform", "")
        chat_id = request.query.get("chat", "")
        message_id = request.query.get("message", "")
        if not (platform and chat_id and message_id):
            return _html(views.message("Bad request", "platform, chat and message are required."), 400)
        wake_id = await self.reads.wake_of_sent(platform, chat_id, message_id)
        if wake_id is None:
            where = views.chat_key(platform, chat_id)
            text = join("No recorded wake-up sent message ", message_id, " in ", where, ".")
            return _html(views.message("Not found", text, _WHY_MISSING), 404)
        raise web.HTTPSeeOther(location=views.wake_href(wake_id))


_WHY_MISSING = (
    "A wake-up is recorded when it ends (reload in a moment if the bot is still at it), when the audit "
    "trail is on (audit.enabled), and kept audit.retention_days; a message sent in a dry run has no "
    "platform id."
)

__all__ = ["Inspector"]
