"""The fake Bot API server: ``/bot<token>/<method>`` and ``/file/bot<token>/<path>`` over real HTTP.

Implements what LarkBot uses — getMe, getUpdates (offsets, ``limit``, long-poll ``timeout``,
``allowed_updates``), sendMessage (HTML parsed and refused like Telegram: unknown/unbalanced tags, more
than 4096 characters), setMessageReaction, sendChatAction, getFile + download and
getCustomEmojiStickers (:mod:`.files`), getChatMember, banChatMember, deleteMessage, set/deleteWebhook —
with Telegram's response envelope.

Members: :attr:`members` holds the ``ChatMember`` objects a test sets, by (chat, user) — the bot's own
rights included; anyone else is a plain ``member``. ``deleteMessage`` refuses, like Telegram, a message
older than 48 h when the fake knows its date (sent by the bot, or an enqueued update).

Parameters are read from JSON, urlencoded or multipart bodies (aiogram sends multipart, the service's own
client JSON).

Like Telegram, a call naming a group in :attr:`migrated` (group id → supergroup id) is refused with
``migrate_to_chat_id``, and ``message_thread_id`` is accepted only in forum chats (``is_forum`` in
:attr:`chats`), where the sent message is a topic message.

Test controls: :meth:`enqueue` any update, :meth:`repeat` an update already confirmed (what a crash
between handling and confirming looks like), :meth:`fail` the next calls of a method with 429
``retry_after`` / 4xx / 5xx — Telegram's error answer, ``{"ok":false,"error_code":N,"description":…}``
(``parameters.retry_after`` on a 429), the method not executed —, :meth:`lose_answer` of the next calls
(executed, then the connection closes without an answer: the outcome a client cannot know),
:meth:`admin` (the bot's rights in a chat), :meth:`add_file`, :meth:`add_custom_emoji`, :meth:`post_webhook`,
:meth:`new_message_id` (an id for a member's message, from the chat's one sequence); every request is
recorded in :attr:`requests`.

The wire's shapes (a recorded request, a scripted failure, the error envelope, reading parameters) are
:mod:`.wire`'s. The chat methods stay in one class: each reads and changes the same chat state (updates,
messages, members), and the method table is the class itself (``_api_<method>``); files and custom
emoji, which touch no chat, are :mod:`.files`' mixin.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Final

from aiohttp import ClientSession, web

from .files import FileRoutes
from .html import HtmlParseError, parse_html
from .wire import ApiError, Failure, Recorded, error_answer, read_params

_CHAT_ACTIONS: Final = frozenset(
    {"typing", "upload_photo", "record_video", "upload_video", "record_voice", "upload_voice",
     "upload_document", "choose_sticker", "find_location", "record_video_note", "upload_video_note"}
)  # fmt: skip


@dataclass
class FakeBotApi(FileRoutes):
    token: str = "7000000001:AAFakeTokenForTestsOnly_abcdefghijklmno"
    bot_id: int = 7000000001
    bot_first_name: str = "LarkBot"
    bot_username: str = "larkbot_test_bot"
    can_read_all_group_messages: bool = True
    host: str = "127.0.0.1"
    requests: list[Recorded] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)
    reactions: dict[tuple[int, int], list[dict[str, Any]]] = field(default_factory=dict)
    deleted: list[tuple[int, int]] = field(default_factory=list)
    banned: list[tuple[int, int]] = field(default_factory=list)
    chats: dict[int, dict[str, Any]] = field(default_factory=dict)
    migrated: dict[int, int] = field(default_factory=dict)
    members: dict[tuple[int, int], dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._updates: list[dict[str, Any]] = []
        self._redeliver: deque[dict[str, Any]] = deque()
        self._next_update_id = 100_000
        self._next_message_id: dict[int, int] = {}
        self._allowed: list[str] | None = None
        self._arrived = asyncio.Event()
        self._failures: dict[str, deque[Failure]] = {}
        self._files: dict[str, tuple[str, bytes]] = {}
        self._custom_emoji: dict[str, dict[str, Any]] = {}
        self._dates: dict[tuple[int, int], int] = {}  # (chat, message) → date of messages seen
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.webhook_url: str | None = None

    # -- lifecycle -------------------------------------------------------------------------------------
    async def start(self, port: int = 0) -> str:
        """Serve on ``host``:``port`` (0: a free port) and return the base URL for ``telegram.api_base``."""
        app = web.Application()
        app.router.add_route("*", "/bot{token}/{method}", self._method)
        app.router.add_get("/file/bot{token}/{path:.+}", self._download)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, port)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1]
        return self.base_url

    async def stop(self) -> None:
        self._arrived.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def bot_user(self) -> dict[str, Any]:
        return {
            "id": self.bot_id,
            "is_bot": True,
            "first_name": self.bot_first_name,
            "username": self.bot_username,
        }

    # -- controls --------------------------------------------------------------------------------------
    def enqueue(self, update: dict[str, Any]) -> int:
        """Queue an update (its ``update_id`` is assigned when missing); wakes long polls."""
        if "update_id" not in update:
            self._next_update_id += 1
            update = {"update_id": self._next_update_id, **update}
        self._next_update_id = max(self._next_update_id, update["update_id"])
        message = update.get("message")
        if isinstance(message, dict) and isinstance(message.get("chat"), dict):
            key = (int(message["chat"]["id"]), int(message["message_id"]))
            self._dates[key] = int(message.get("date", 0))
        self._updates.append(update)
        self._wake()
        return int(update["update_id"])

    def repeat(self, update: dict[str, Any]) -> None:
        """Deliver ``update`` again with its own id, even if already confirmed."""
        self._redeliver.append(update)
        self._wake()

    def fail(
        self,
        method: str,
        status: int = 429,
        *,
        retry_after: int | None = None,
        description: str | None = None,
        times: int = 1,
    ) -> None:
        """Answer the next ``times`` calls of ``method`` with an error (they are not executed)."""
        if description is None:
            description = {
                429: f"Too Many Requests: retry after {retry_after or 1}",
                400: "Bad Request",
                403: "Forbidden: bot was kicked from the group chat",
            }.get(status, "Internal Server Error" if status >= 500 else "Error")
        queue = self._failures.setdefault(method, deque())
        for _ in range(times):
            queue.append(Failure(status, description, retry_after if status == 429 else None))

    def lose_answer(self, method: str, *, times: int = 1) -> None:
        """Execute the next ``times`` calls of ``method``, then close the connection without answering."""
        queue = self._failures.setdefault(method, deque())
        for _ in range(times):
            queue.append(Failure(0, "", None))

    def new_message_id(self, chat_id: int) -> int:
        """The chat's next message id. One sequence per chat for the bot's messages and the members' (the
        playground's), as in Telegram, where ids of one chat never collide and grow with time."""
        message_id = self._next_message_id.get(chat_id, 1000) + 1
        self._next_message_id[chat_id] = message_id
        return message_id

    def skip_message_ids(self, chat_id: int, last: int) -> None:
        """Continue the chat's ids after ``last`` (a restarted fake must not reuse ids a store has seen)."""
        self._next_message_id[chat_id] = max(self._next_message_id.get(chat_id, 1000), last)

    def calls(self, method: str) -> list[dict[str, Any]]:
        return [r.params for r in self.requests if r.method == method]

    @property
    def pending_updates(self) -> int:
        return len(self._updates) + len(self._redeliver)

    async def post_webhook(self, url: str, update: dict[str, Any], secret: str | None) -> int:
        headers = {"X-Telegram-Bot-Api-Secret-Token": secret} if secret is not None else {}
        async with ClientSession() as session, session.post(url, json=update, headers=headers) as resp:
            return resp.status

    def _wake(self) -> None:
        self._arrived.set()
        self._arrived = asyncio.Event()

    # -- HTTP ------------------------------------------------------------------------------------------
    async def _method(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return error_answer(401, "Unauthorized")
        name = request.match_info["method"]
        params = await read_params(request)
        self.requests.append(Recorded(name, params, time.monotonic()))
        handler = getattr(self, f"_api_{name}", None)
        if handler is None:
            return error_answer(404, "Not Found")
        pending = self._failures.get(name)
        failure = pending.popleft() if pending else None
        if failure is not None and failure.status:
            return error_answer(failure.status, failure.description, failure.retry_after)
        try:
            self._check_migrated(params)
            result = await handler(params)
        except ApiError as exc:
            return error_answer(exc.status, exc.description, exc.retry_after, exc.migrate_to)
        if failure is not None and request.transport is not None:
            request.transport.close()  # executed; the client sees the connection close, no answer
        return web.json_response({"ok": True, "result": result})

    # -- methods ---------------------------------------------------------------------------------------
    async def _api_getMe(self, _params: dict[str, Any]) -> dict[str, Any]:
        return {
            **self.bot_user,
            "can_join_groups": True,
            "can_read_all_group_messages": self.can_read_all_group_messages,
            "supports_inline_queries": False,
        }

    async def _api_getUpdates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        offset = int(params.get("offset") or 0)
        limit = int(params.get("limit") or 100)
        timeout = float(params.get("timeout") or 0)
        if params.get("allowed_updates") is not None:
            self._allowed = list(params["allowed_updates"]) or None
        if self.webhook_url:
            raise ApiError(409, "Conflict: can't use getUpdates method while webhook is active")
        deadline = time.monotonic() + timeout
        while True:
            if offset:
                self._updates = [u for u in self._updates if u["update_id"] >= offset]
            batch = list(self._redeliver)[:limit]
            if batch:
                for _ in batch:
                    self._redeliver.popleft()
                return batch
            ready = [u for u in self._updates if self._wanted(u)][:limit]
            if ready or time.monotonic() >= deadline:
                return ready
            arrived = self._arrived
            try:
                await asyncio.wait_for(arrived.wait(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                return []

    def _wanted(self, update: dict[str, Any]) -> bool:
        default = ("message", "edited_message", "channel_post", "edited_channel_post", "my_chat_member")
        allowed = self._allowed if self._allowed is not None else default
        return any(kind in update for kind in allowed)

    def _check_migrated(self, params: dict[str, Any]) -> None:
        chat_id = params.get("chat_id")
        if chat_id is not None and int(chat_id) in self.migrated:
            raise ApiError(
                400,
                "Bad Request: group chat was upgraded to a supergroup chat",
                migrate_to=self.migrated[int(chat_id)],
            )

    def _chat(self, chat_id: Any) -> dict[str, Any]:
        cid = int(chat_id)
        if cid in self.chats:
            return self.chats[cid]
        if cid < 0:
            return {"id": cid, "title": f"Chat {cid}", "type": "supergroup"}
        return {"id": cid, "first_name": f"User {cid}", "type": "private"}

    async def _api_sendMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        chat = self._chat(params["chat_id"])
        raw = str(params.get("text") or "")
        text, entities = raw, list[dict[str, Any]]()
        if params.get("parse_mode") == "HTML":
            try:
                text, entities = parse_html(raw)
            except HtmlParseError as exc:
                raise ApiError(400, f"Bad Request: {exc}") from None
        if not text.strip():
            raise ApiError(400, "Bad Request: message text is empty")
        if len(text.encode("utf-16-le")) // 2 > 4096:
            raise ApiError(400, "Bad Request: message is too long")
        message_id = self.new_message_id(chat["id"])
        message: dict[str, Any] = {
            "message_id": message_id,
            "from": self.bot_user,
            "chat": chat,
            "date": int(time.time()),
            "text": text,
        }
        if entities:
            message["entities"] = entities
        thread = params.get("message_thread_id")
        if thread is not None:
            if not chat.get("is_forum"):
                raise ApiError(400, "Bad Request: message thread not found")
            message["message_thread_id"] = int(thread)
            message["is_topic_message"] = True
        reply = params.get("reply_parameters")
        if reply:
            message["reply_to_message"] = {"message_id": int(reply["message_id"]), "chat": chat, "date": 0}
            if reply.get("quote"):
                message["quote"] = {"text": reply["quote"], "position": 0, "is_manual": True}
        self.sent.append(message)
        self._dates[(int(chat["id"]), message_id)] = message["date"]
        return message

    async def _api_setMessageReaction(self, params: dict[str, Any]) -> bool:
        key = (int(params["chat_id"]), int(params["message_id"]))
        self.reactions[key] = list(params.get("reaction") or [])
        return True

    async def _api_sendChatAction(self, params: dict[str, Any]) -> bool:
        if params.get("action") not in _CHAT_ACTIONS:
            raise ApiError(400, "Bad Request: wrong parameter action in request")
        return True

    def admin(self, chat_id: int, *, can_restrict: bool = True, can_delete: bool = True) -> None:
        """Make the bot an administrator of ``chat_id`` with these rights."""
        self.members[(chat_id, self.bot_id)] = {
            "status": "administrator",
            "user": self.bot_user,
            "can_be_edited": False,
            "is_anonymous": False,
            "can_manage_chat": True,
            "can_delete_messages": can_delete,
            "can_manage_video_chats": False,
            "can_restrict_members": can_restrict,
            "can_promote_members": False,
            "can_change_info": False,
            "can_invite_users": True,
            "can_post_stories": False,
            "can_edit_stories": False,
            "can_delete_stories": False,
        }

    async def _api_getChatMember(self, params: dict[str, Any]) -> dict[str, Any]:
        chat, user = int(params["chat_id"]), int(params["user_id"])
        found = self.members.get((chat, user))
        if found is not None:
            return found
        someone = {"id": user, "is_bot": False, "first_name": f"User {user}"}
        person = self.bot_user if user == self.bot_id else someone
        return {"status": "member", "user": person}

    async def _api_banChatMember(self, params: dict[str, Any]) -> bool:
        self.banned.append((int(params["chat_id"]), int(params["user_id"])))
        return True

    async def _api_deleteMessage(self, params: dict[str, Any]) -> bool:
        key = (int(params["chat_id"]), int(params["message_id"]))
        if key in self.deleted:
            raise ApiError(400, "Bad Request: message to delete not found")
        date = self._dates.get(key)
        if date is not None and time.time() - date > 48 * 3600:
            raise ApiError(400, "Bad Request: message can't be deleted")
        self.deleted.append(key)
        return True

    async def _api_setWebhook(self, params: dict[str, Any]) -> bool:
        self.webhook_url = str(params.get("url") or "") or None
        return True

    async def _api_deleteWebhook(self, _params: dict[str, Any]) -> bool:
        self.webhook_url = None
        return True
