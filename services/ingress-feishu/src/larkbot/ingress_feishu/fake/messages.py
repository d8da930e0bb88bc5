"""The fake Feishu's messages and reactions: create, reply (honouring ``uuid`` as Feishu does), get,
recall (with Feishu's rights), and reactions added, listed and removed. A part of
:class:`~.server.FakeFeishu`, which holds the state these routes read and change."""

from __future__ import annotations

import json
import time
from typing import Any

from aiohttp import web

from .wire import Recorded, Sent, err, new_id, ok


class MessageRoutes:
    """The message and reaction routes of :class:`~.server.FakeFeishu` (its state, declared here)."""

    app_id: str
    sent: dict[str, Sent]
    recalled: list[str]
    message_chats: dict[str, str]
    managed_chats: set[str]
    reactions: dict[str, tuple[str, str, str]]
    _by_uuid: dict[str, str]

    # -- messages --------------------------------------------------------------------------------------
    def _message_json(self, sent: Sent) -> dict[str, Any]:
        return {
            "message_id": sent.message_id,
            "root_id": sent.parent_id or "",
            "parent_id": sent.parent_id or "",
            "msg_type": sent.msg_type,
            "create_time": str(sent.create_time_ms),
            "update_time": str(sent.create_time_ms),
            "deleted": False,
            "updated": False,
            "chat_id": sent.chat_id,
            "sender": {
                "id": self.app_id,
                "id_type": "app_id",
                "sender_type": "app",
                "tenant_key": "2ca1d211f64f6438",
            },
            "body": {"content": sent.content},
            "mentions": [],
            "upper_message_id": "",
        }

    def _store(self, chat_id: str, body: dict[str, Any], parent_id: str | None) -> Sent:
        uuid = body.get("uuid") or None
        if uuid and uuid in self._by_uuid:
            return self.sent[self._by_uuid[uuid]]
        content = body.get("content")
        msg_type = body.get("msg_type")
        if not isinstance(content, str) or not isinstance(msg_type, str):
            raise web.HTTPBadRequest(
                text='{"code":230001,"msg":"invalid content"}', content_type="application/json"
            )
        json.loads(content)
        sent = Sent(new_id("om_"), chat_id, msg_type, content, uuid, parent_id, int(time.time() * 1000))
        self.sent[sent.message_id] = sent
        if uuid:
            self._by_uuid[uuid] = sent.message_id
        return sent

    async def _create(self, request: web.Request, record: Recorded) -> web.Response:
        if request.query.get("receive_id_type") != "chat_id":
            return err(400, 99992402, "receive_id_type is required")
        body = record.json()
        return ok(self._message_json(self._store(body["receive_id"], body, None)))

    async def _reply(self, request: web.Request, record: Recorded) -> web.Response:
        parent = request.match_info["message_id"]
        chat_id = self._chat_of(parent)
        if chat_id is None:
            return err(400, 230011, "message not found")
        return ok(self._message_json(self._store(chat_id, record.json(), parent)))

    def _chat_of(self, message_id: str) -> str | None:
        if message_id in self.sent:
            return self.sent[message_id].chat_id
        return self.message_chats.get(message_id)

    async def _get_message(self, request: web.Request, _record: Recorded) -> web.Response:
        message_id = request.match_info["message_id"]
        if message_id in self.sent:
            return ok({"items": [self._message_json(self.sent[message_id])]})
        chat_id = self.message_chats.get(message_id)
        if chat_id is None:
            # What Feishu answers for an id it does not know (not 230011, which is a recalled message).
            return err(
                400, 230001, "Your request contains an invalid request parameter, ext=invalid message_id."
            )
        item = {"message_id": message_id, "chat_id": chat_id, "msg_type": "text", "deleted": False}
        return ok({"items": [item]})

    async def _recall(self, request: web.Request, _record: Recorded) -> web.Response:
        message_id = request.match_info["message_id"]
        chat_id = self._chat_of(message_id)
        if chat_id is None or message_id in self.recalled:
            return err(400, 230011, "message not found")
        if message_id not in self.sent and chat_id not in self.managed_chats:
            return err(400, 230026, "No permission to recall this message.")
        self.recalled.append(message_id)
        return ok({})

    # -- reactions -------------------------------------------------------------------------------------
    async def _react(self, request: web.Request, record: Recorded) -> web.Response:
        message_id = request.match_info["message_id"]
        emoji_type = record.json()["reaction_type"]["emoji_type"]
        reaction_id = new_id("ZCaCIjUBVVWSrm5L-")
        self.reactions[reaction_id] = (message_id, emoji_type, self.app_id)
        return ok(self._reaction_json(reaction_id))

    def _reaction_json(self, reaction_id: str) -> dict[str, Any]:
        _message, emoji_type, operator = self.reactions[reaction_id]
        return {
            "reaction_id": reaction_id,
            "operator": {
                "operator_id": operator,
                "operator_type": "app" if operator == self.app_id else "user",
            },
            "action_time": str(int(time.time() * 1000)),
            "reaction_type": {"emoji_type": emoji_type},
        }

    async def _reactions(self, request: web.Request, _record: Recorded) -> web.Response:
        message_id = request.match_info["message_id"]
        wanted = request.query.get("reaction_type")
        items = [
            self._reaction_json(rid)
            for rid, (mid, emoji_type, _op) in self.reactions.items()
            if mid == message_id and (wanted is None or emoji_type == wanted)
        ]
        return ok({"items": items, "has_more": False, "page_token": ""})

    async def _unreact(self, request: web.Request, _record: Recorded) -> web.Response:
        reaction_id = request.match_info["reaction_id"]
        if reaction_id not in self.reactions:
            return err(400, 231011, "The request has an invalid reaction_id.")
        data = self._reaction_json(reaction_id)
        del self.reactions[reaction_id]
        return ok(data)
