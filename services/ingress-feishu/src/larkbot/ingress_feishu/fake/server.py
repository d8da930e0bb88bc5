"""A fake Feishu Open Platform: a real aiohttp server speaking Feishu's wire format.

It implements the subset LarkBot uses — tenant token, bot info, message create/reply/get/recall,
reactions, contact user get, message resources, image upload, chat member removal — plus the
long-connection endpoint and WebSocket (:mod:`.longconn`). Point lark-oapi (or our REST client) at
:attr:`FakeFeishu.url` through the domain setting.

The routes of messages and reactions are :mod:`.messages`'s, the wire's shapes :mod:`.wire`'s.

Every REST request is recorded (:attr:`requests`). Faults are scripted per route name (``message.create``,
``message.reply``, ``reaction.create``, …): :meth:`fail_next` answers with Feishu's error body
``{"code": N, "msg": …}`` without executing the request (a rate limit, 99991400, carries
``x-ogw-ratelimit-reset``; a 5xx with code 1500 reads ``internal error``), :meth:`delay_next` performs the
request and then answers late (a timeout whose side effect happened). Sends honour ``uuid`` like Feishu:
the same uuid within an hour returns the message created first.

Rights like Feishu's: removing someone else from a group, and recalling someone else's message, needs the
bot to own or manage the group (:attr:`managed_chats`); otherwise the call is refused (a 400 answer; the
ingress treats any final refusal alike). A recalled message cannot be recalled again. Membership is
checked where a test lists a group's :attr:`members`: a removal of a non-member comes back in
``invalid_id_list``.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Awaitable, Callable

from aiohttp import BodyPartReader, web

from .longconn import LongConnection
from .messages import MessageRoutes
from .wire import RATE_LIMITED, TOKEN_INVALID, Fault, Handler, Recorded, Sent, err, ok


class FakeFeishu(MessageRoutes):
    def __init__(
        self,
        *,
        app_id: str = "cli_a5f1c2d3e4b5a6c7",
        app_secret: str = "fake-app-secret-0123456789",
        bot_open_id: str = "ou_7d8a6e6df7621556ce0d21922b676706",
        bot_name: str = "LarkBot",
        users: dict[str, str] | None = None,
        reconnect_interval_s: int = 1,
    ) -> None:
        self.app_id = app_id
        self.app_secret = app_secret
        self.bot_open_id = bot_open_id
        self.bot_name = bot_name
        self.users: dict[str, str] = dict(users or {})
        self.chat_names: dict[str, str] = {}  # groups the app may read (GET chat)
        self.message_chats: dict[str, str] = {}  # messages users sent, for GET message
        self.resources: dict[str, bytes] = {}
        self.images: dict[str, bytes] = {}
        self.sent: dict[str, Sent] = {}
        self.recalled: list[str] = []
        self.removed_members: list[tuple[str, str]] = []
        self.managed_chats: set[str] = set()  # groups the bot owns or manages
        self.members: dict[str, set[str]] = {}  # group → its members, where a test says
        self.reactions: dict[str, tuple[str, str, str]] = {}  # reaction_id → (message, emoji_type, operator)
        self.requests: list[Recorded] = []
        self.tokens: set[str] = set()
        self.long_connection = LongConnection()
        self.reconnect_interval_s = reconnect_interval_s
        self._by_uuid: dict[str, str] = {}
        self._faults: dict[str, list[Fault]] = {}
        self._runner: web.AppRunner | None = None
        self.url = ""

    # -- scripting -------------------------------------------------------------------------------------
    def fail_next(
        self,
        route: str,
        *,
        status: int = 429,
        code: int = RATE_LIMITED,
        reset_s: int = 1,
        msg: str | None = None,
    ) -> None:
        """Answer the next call of ``route`` with ``{"code": code, "msg": msg}`` and HTTP ``status``."""
        headers = (
            {"x-ogw-ratelimit-limit": "5", "x-ogw-ratelimit-reset": str(reset_s)}
            if code == RATE_LIMITED
            else {}
        )
        if msg is None:
            msg = {RATE_LIMITED: "request trigger frequency limit", 1500: "internal error"}.get(
                code, "internal error" if status >= 500 else "request refused"
            )
        self._faults.setdefault(route, []).append(Fault(status=status, code=code, msg=msg, headers=headers))

    def delay_next(self, route: str, delay_s: float) -> None:
        self._faults.setdefault(route, []).append(Fault(delay_s=delay_s))

    def routed(self, route: str) -> list[Recorded]:
        return [r for r in self.requests if r.route == route]

    def revoke_tokens(self) -> None:
        """Expire every tenant token (the next call answers 99991663)."""
        self.tokens.clear()

    # -- lifecycle -------------------------------------------------------------------------------------
    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        app = web.Application(client_max_size=32 * 1024 * 1024)
        routes = [
            ("POST", "/open-apis/auth/v3/tenant_access_token/internal", "auth.token", self._token, False),
            ("POST", "/callback/ws/endpoint", "ws.endpoint", self._endpoint, False),
            ("GET", "/open-apis/bot/v3/info", "bot.info", self._bot_info, True),
            ("POST", "/open-apis/im/v1/messages", "message.create", self._create, True),
            ("POST", "/open-apis/im/v1/messages/{message_id}/reply", "message.reply", self._reply, True),
            ("GET", "/open-apis/im/v1/messages/{message_id}", "message.get", self._get_message, True),
            ("DELETE", "/open-apis/im/v1/messages/{message_id}", "message.recall", self._recall, True),
            (
                "POST",
                "/open-apis/im/v1/messages/{message_id}/reactions",
                "reaction.create",
                self._react,
                True,
            ),
            (
                "GET",
                "/open-apis/im/v1/messages/{message_id}/reactions",
                "reaction.list",
                self._reactions,
                True,
            ),
            (
                "DELETE",
                "/open-apis/im/v1/messages/{message_id}/reactions/{reaction_id}",
                "reaction.delete",
                self._unreact,
                True,
            ),
            ("GET", "/open-apis/contact/v3/users/{user_id}", "contact.user", self._user, True),
            ("GET", "/open-apis/im/v1/chats/{chat_id}", "chat.get", self._chat_info, True),
            (
                "GET",
                "/open-apis/im/v1/messages/{message_id}/resources/{file_key}",
                "message.resource",
                self._resource,
                True,
            ),
            ("POST", "/open-apis/im/v1/images", "image.create", self._upload, True),
            ("DELETE", "/open-apis/im/v1/chats/{chat_id}/members", "chat.members.delete", self._kick, True),
        ]
        for method, path, route, handler, auth in routes:
            app.router.add_route(method, path, self._wrap(route, handler, auth))
        app.router.add_get("/ws", self.long_connection.handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        bound = self._runner.addresses[0][1]
        self.url = f"http://{host}:{bound}"
        return self.url

    async def stop(self) -> None:
        await self.long_connection.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeFeishu:
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.stop()

    def _wrap(
        self, route: str, handler: Handler, auth: bool
    ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def serve(request: web.Request) -> web.StreamResponse:
            # image uploads are multipart: their handler reads the stream itself.
            body = b"" if route == "image.create" else await request.read()
            record = Recorded(
                route,
                request.method,
                request.path,
                dict(request.query),
                dict(request.headers),
                body,
                time.monotonic(),
            )
            self.requests.append(record)
            if auth:
                token = request.headers.get("Authorization", "").removeprefix("Bearer ")
                if token not in self.tokens:
                    return err(400, TOKEN_INVALID, "Invalid access token for authorization")
            faults = self._faults.get(route)
            fault = faults.pop(0) if faults else None
            if fault is not None and fault.code:
                return err(fault.status, fault.code, fault.msg, fault.headers)
            response = await handler(request, record)
            if fault is not None and fault.delay_s:
                await asyncio.sleep(fault.delay_s)
            return response

        return serve

    # -- auth and long connection ---------------------------------------------------------------------
    async def _token(self, _request: web.Request, record: Recorded) -> web.Response:
        body = record.json()
        if body.get("app_id") != self.app_id or body.get("app_secret") != self.app_secret:
            return err(400, 10014, "app secret invalid")
        token = f"t-{secrets.token_hex(20)}"
        self.tokens.add(token)
        return web.json_response({"code": 0, "msg": "ok", "tenant_access_token": token, "expire": 7200})

    async def _endpoint(self, _request: web.Request, record: Recorded) -> web.Response:
        body = record.json()
        if body.get("AppID") != self.app_id or body.get("AppSecret") != self.app_secret:
            return web.json_response({"code": 1000040343, "msg": "invalid app credentials"})
        ws_url = self.url.replace("http://", "ws://", 1)
        return web.json_response(self.long_connection.endpoint_answer(ws_url, self.reconnect_interval_s))

    async def _bot_info(self, _request: web.Request, _record: Recorded) -> web.Response:
        bot = {
            "activate_status": 2,
            "app_name": self.bot_name,
            "avatar_url": "",
            "ip_white_list": [],
            "open_id": self.bot_open_id,
        }
        return web.json_response({"code": 0, "msg": "ok", "bot": bot})

    # -- contacts, resources, images, members ----------------------------------------------------------
    async def _user(self, request: web.Request, _record: Recorded) -> web.Response:
        open_id = request.match_info["user_id"]
        if open_id not in self.users:
            return err(400, 41050, "no user authority error")
        return ok({"user": {"open_id": open_id, "name": self.users[open_id], "en_name": ""}})

    async def _chat_info(self, request: web.Request, _record: Recorded) -> web.Response:
        chat_id = request.match_info["chat_id"]
        if chat_id not in self.chat_names:
            return err(400, 232011, "the app is not in the chat")
        return ok({"chat_id": chat_id, "name": self.chat_names[chat_id], "chat_mode": "group"})

    async def _resource(self, request: web.Request, _record: Recorded) -> web.Response:
        key = request.match_info["file_key"]
        data = self.resources.get(key) or self.images.get(key)
        if data is None:
            return err(400, 234003, "file not found")
        return web.Response(body=data, content_type="application/octet-stream")

    async def _upload(self, request: web.Request, _record: Recorded) -> web.Response:
        reader = await request.multipart()
        fields: dict[str, bytes] = {}
        async for part in reader:
            if isinstance(part, BodyPartReader) and part.name is not None:
                fields[part.name] = bytes(await part.read())
        if fields.get("image_type") != b"message" or not fields.get("image"):
            return err(400, 234001, "invalid image")
        key = f"img_v3_{secrets.token_hex(12)}"
        self.images[key] = fields["image"]
        return ok({"image_key": key})

    async def _kick(self, request: web.Request, record: Recorded) -> web.Response:
        chat_id = request.match_info["chat_id"]
        ids = [str(user) for user in record.json().get("id_list", [])]
        if chat_id not in self.managed_chats and any(user != self.bot_open_id for user in ids):
            return err(400, 230027, "Lack of necessary permissions.")
        known = self.members.get(chat_id)
        invalid = [user for user in ids if known is not None and user not in known]
        for user in ids:
            if user not in invalid:
                self.removed_members.append((chat_id, user))
                if known is not None:
                    known.discard(user)
        return ok({"invalid_id_list": invalid})
