"""The Feishu OpenAPI calls LarkBot makes, typed; transport and retry rules live in :mod:`.rest`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from .rest import ApiNotFound, FeishuRest, api_error


@dataclass(frozen=True, slots=True)
class SentMessage:
    message_id: str
    chat_id: str
    create_time_ms: int


@dataclass(frozen=True, slots=True)
class BotInfo:
    open_id: str
    name: str


def _sent(body: dict[str, Any]) -> SentMessage:
    data = body.get("data") or {}
    try:
        return SentMessage(str(data["message_id"]), str(data["chat_id"]), int(data["create_time"]))
    except (KeyError, TypeError, ValueError):
        raise api_error(
            "message.create", -1, "the answer lacks message_id/chat_id/create_time", 200
        ) from None


def _seg(value: str) -> str:
    """An id as one URL path segment: ids come from payloads, and a ``/``, ``?`` or NUL in one must
    neither change the route nor make the request unsendable."""
    return quote(value, safe="")


class FeishuApi:
    def __init__(self, rest: FeishuRest) -> None:
        self.rest = rest

    async def bot_info(self) -> BotInfo:
        body = await self.rest.call("bot.info", "GET", "/open-apis/bot/v3/info")
        bot = body.get("bot") or {}
        if not isinstance(bot.get("open_id"), str):
            raise api_error("bot.info", -1, "the answer lacks bot.open_id", 200)
        return BotInfo(bot["open_id"], str(bot.get("app_name") or bot["open_id"]))

    # Sends wait out no 429 here: their one retry loop (``Actions._deliver``) does, with the pacer.
    async def send(self, chat_id: str, msg_type: str, content: str, uuid: str) -> SentMessage:
        body = await self.rest.call(
            "message.create",
            "POST",
            "/open-apis/im/v1/messages",
            params={"receive_id_type": "chat_id"},
            json={"receive_id": chat_id, "msg_type": msg_type, "content": content, "uuid": uuid},
            rate_limit_waits=0,
        )
        return _sent(body)

    async def reply(self, message_id: str, msg_type: str, content: str, uuid: str) -> SentMessage:
        body = await self.rest.call(
            "message.reply",
            "POST",
            f"/open-apis/im/v1/messages/{_seg(message_id)}/reply",
            json={"msg_type": msg_type, "content": content, "uuid": uuid, "reply_in_thread": False},
            rate_limit_waits=0,
        )
        return _sent(body)

    async def _found(self, route: str, path: str, params: dict[str, str] | None = None) -> dict[str, Any]:
        """``GET path``'s data; empty when Feishu does not know it or this app may not see it. Other
        refusals raise (``adapters.rest.FeishuApiError``, of the kind it is)."""
        try:
            body = await self.rest.call(route, "GET", path, params=params)
        except ApiNotFound:
            return {}
        data = body.get("data")
        return data if isinstance(data, dict) else {}

    async def message_chat(self, message_id: str) -> str | None:
        """The chat of a message (reaction events carry none); ``None`` when it is not found."""
        data = await self._found("message.get", f"/open-apis/im/v1/messages/{_seg(message_id)}")
        items = data.get("items") or []
        chat = items[0].get("chat_id") if items and isinstance(items[0], dict) else None
        return chat if isinstance(chat, str) and chat else None

    async def recall(self, message_id: str) -> None:
        await self.rest.call("message.recall", "DELETE", f"/open-apis/im/v1/messages/{_seg(message_id)}")

    async def add_reaction(self, message_id: str, emoji_type: str) -> str:
        body = await self.rest.call(
            "reaction.create",
            "POST",
            f"/open-apis/im/v1/messages/{_seg(message_id)}/reactions",
            json={"reaction_type": {"emoji_type": emoji_type}},
        )
        return str((body.get("data") or {}).get("reaction_id", ""))

    async def remove_reaction(self, message_id: str, emoji_type: str) -> int:
        """Remove this app's reactions of ``emoji_type``; returns how many were removed."""
        removed = 0
        page: str | None = None
        while True:
            params = {"reaction_type": emoji_type, "page_size": "50"}
            if page:
                params["page_token"] = page
            body = await self.rest.call(
                "reaction.list",
                "GET",
                f"/open-apis/im/v1/messages/{_seg(message_id)}/reactions",
                params=params,
            )
            data = body.get("data") or {}
            for item in data.get("items") or []:
                operator = item.get("operator") or {}
                if operator.get("operator_type") == "app" and operator.get("operator_id") == self.rest.app_id:
                    await self.rest.call(
                        "reaction.delete",
                        "DELETE",
                        f"/open-apis/im/v1/messages/{_seg(message_id)}/reactions/{_seg(item['reaction_id'])}",
                    )
                    removed += 1
            page = data.get("page_token") if data.get("has_more") else None
            if not page:
                return removed

    async def user_name(self, open_id: str) -> str | None:
        path = f"/open-apis/contact/v3/users/{_seg(open_id)}"
        user = (await self._found("contact.user", path, {"user_id_type": "open_id"})).get("user") or {}
        name = user.get("name")
        return name if isinstance(name, str) and name else None

    async def chat_name(self, chat_id: str) -> str | None:
        """A group's name (what a shared group card names); ``None`` when it is not found."""
        name = (await self._found("chat.get", f"/open-apis/im/v1/chats/{_seg(chat_id)}")).get("name")
        return name if isinstance(name, str) and name else None

    async def download(self, message_id: str, file_key: str, kind: str, max_bytes: int) -> bytes | None:
        return await self.rest.download(
            "message.resource",
            f"/open-apis/im/v1/messages/{_seg(message_id)}/resources/{_seg(file_key)}",
            {"type": kind},
            max_bytes,
        )

    async def upload_image(self, data: bytes, mime: str) -> str:
        body = await self.rest.call(
            "image.create",
            "POST",
            "/open-apis/im/v1/images",
            data={"image_type": "message"},
            files={"image": ("image", data, mime)},
        )
        key = (body.get("data") or {}).get("image_key")
        if not isinstance(key, str):
            raise api_error("image.create", -1, "the answer lacks image_key", 200)
        return key

    async def remove_members(self, chat_id: str, open_ids: list[str]) -> list[str]:
        """Remove members from a group; returns the ids Feishu did not remove (``invalid_id_list``: not
        members, or unknown)."""
        body = await self.rest.call(
            "chat.members.delete",
            "DELETE",
            f"/open-apis/im/v1/chats/{_seg(chat_id)}/members",
            params={"member_id_type": "open_id"},
            json={"id_list": open_ids},
        )
        invalid = (body.get("data") or {}).get("invalid_id_list") or []
        return [str(i) for i in invalid]


def image_content(image_key: str) -> str:
    return json.dumps({"image_key": image_key})
