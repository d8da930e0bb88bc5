"""The playground's control API and its page: members act in the group through the fake Bot API, and the
page polls one timeline of the group (docs in the README's playground paragraph).

    GET  /                     the page (static/playground.js and .css do the rest)
    GET  /messages             the timeline: members' and the bot's messages in order, reactions, members,
                               the bot, the model, the inspector
    POST /say {user, text, reply_to?}          a ``message`` update
    POST /react {user, message_id, emoji}      a ``message_reaction`` update; ``emoji: null`` removes
    POST /edit {user, message_id, text}        an ``edited_message`` update (own messages only)
    POST /delete {user, message_id}            gone for the members; no update (the Bot API has none)
    POST /upload (multipart user, file, caption?)   a ``message`` with ``photo``, or with ``voice`` (an
                               OGG/Opus recording) or ``audio`` (any other sound file)
    POST /members {name}                       a member to switch to
    GET  /files/<file_id>                      an uploaded photo or recording, same origin for the CSP
    GET  /transcript                           what ``larkbot say`` reads (see ``say``)
"""

from __future__ import annotations

import hashlib
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from aiohttp import BodyPartReader, web

from . import playground_updates as tg
from .playground_audio import MAX_AUDIO_BYTES, AudioInfo, audio_info, audio_object
from .playground_group import Group, Photo, Refused
from .playground_page import render_page

if TYPE_CHECKING:
    from larkbot.ingress_telegram.fake import FakeBotApi


class ControlApi:
    """``model``: ``{"fake", "endpoint", "model"}`` of the primary endpoint; ``inspector``: its base URL."""

    def __init__(
        self,
        telegram: FakeBotApi,
        chat: dict[str, Any],
        decisions: list[dict[str, Any]],
        *,
        model: dict[str, Any],
        inspector: str,
    ) -> None:
        self.telegram = telegram
        self.chat_id = int(chat["id"])
        self.group = Group(chat, lambda: telegram.new_message_id(self.chat_id), self._bot_sent)
        self.decisions = decisions
        self.model = model
        self.inspector = inspector
        self.transcript: list[dict[str, Any]] = []
        self.photos: dict[str, tuple[str, bytes]] = {}

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/", self._page),
            web.get("/messages", self._messages),
            web.get("/transcript", self._transcript),
            web.get("/files/{file_id}", self._file),
            web.post("/say", self._say),
            web.post("/react", self._react),
            web.post("/edit", self._edit),
            web.post("/delete", self._delete),
            web.post("/upload", self._upload),
            web.post("/members", self._members),
        ]

    def _bot_sent(self) -> list[dict[str, Any]]:
        return [m for m in self.telegram.sent if int(m["chat"]["id"]) == self.chat_id]

    # -- acting ----------------------------------------------------------------------------------------
    async def _say(self, request: web.Request) -> web.Response:
        body = await _json(request)
        bot = self._bot_sent()
        cursor = {"bot": len(bot), "reactions": len(self._bot_reactions()), "decisions": len(self.decisions)}
        try:
            user, text = _str(body, "user", "You"), _str(body, "text", "")
            reply_to = _int(body, "reply_to") if body.get("reply_to") is not None else None
            update = self.group.say(user, text, int(time.time()), reply_to=reply_to)
        except Refused as exc:
            return _refused(exc)
        self.telegram.enqueue(update)
        self.transcript.append({"from": user, "text": text, "at": time.time()})
        return web.json_response(
            {"ok": True, "message_id": update["message"]["message_id"], "cursor": cursor}
        )

    async def _react(self, request: web.Request) -> web.Response:
        body = await _json(request)
        emoji = body.get("emoji")
        if emoji is not None and not isinstance(emoji, str):
            return _error(400, "emoji is a string, or null to remove the reaction")
        try:
            user, message_id = _str(body, "user"), _int(body, "message_id")
            update = self.group.react(user, message_id, emoji or None, int(time.time()))
        except Refused as exc:
            return _refused(exc)
        if update is not None:
            self.telegram.enqueue(update)
        return web.json_response({"ok": True, "changed": update is not None})

    async def _edit(self, request: web.Request) -> web.Response:
        body = await _json(request)
        try:
            user, message_id, text = _str(body, "user"), _int(body, "message_id"), _str(body, "text", "")
            update = self.group.edit(user, message_id, text, int(time.time()))
        except Refused as exc:
            return _refused(exc)
        self.telegram.enqueue(update)
        return web.json_response({"ok": True, "message_id": message_id})

    async def _delete(self, request: web.Request) -> web.Response:
        body = await _json(request)
        try:
            self.group.delete(_str(body, "user"), _int(body, "message_id"))
        except Refused as exc:
            return _refused(exc)
        # Telegram's Bot API has no update for a member deleting a message in a group.
        return web.json_response({"ok": True, "bot_told": False})

    async def _members(self, request: web.Request) -> web.Response:
        body = await _json(request)
        try:
            self.group.join(_str(body, "name"))
        except Refused as exc:
            return _refused(exc)
        return web.json_response({"ok": True, "members": self.group.members})

    async def _upload(self, request: web.Request) -> web.Response:
        if request.content_type != "multipart/form-data":
            return _error(415, "send multipart/form-data with user, file and an optional caption")
        fields: dict[str, str] = {}
        data: bytes | None = None
        async for part in await request.multipart():
            if not isinstance(part, BodyPartReader):
                return _error(400, "nested multipart is not accepted")
            if part.name == "file":
                name = part.filename
                data = await _read_limited(part, MAX_AUDIO_BYTES)
                if data is None:
                    return _error(413, f"a file is at most {MAX_AUDIO_BYTES // (1024 * 1024)} MB")
            elif part.name in ("user", "caption", "reply_to"):
                fields[part.name] = (await _read_limited(part, 64 * 1024) or b"").decode("utf-8", "replace")
        if data is None:
            return _error(400, "file is required")
        heard = audio_info(data)
        if heard is not None:
            return self._recording(data, heard, name, fields)
        if len(data) > tg.MAX_PHOTO_BYTES:
            return _error(413, f"a photo is at most {tg.MAX_PHOTO_BYTES // (1024 * 1024)} MB")
        try:
            info = tg.image_info(data)
        except tg.NotAPhoto as exc:
            return _error(415, str(exc))
        file_id, unique_id = self._store(data, "photo", info.extension, info.content_type)
        sizes = tg.photo_sizes(file_id, unique_id, info, len(data))
        return self._post(fields, "photo", sizes, photo=(Photo(file_id, info.content_type), sizes))

    def _recording(
        self, data: bytes, heard: AudioInfo, name: str | None, fields: dict[str, str]
    ) -> web.Response:
        """A voice note (OGG/Opus, as a client records one) or an audio file."""
        file_id, unique_id = self._store(data, heard.kind, heard.extension, heard.content_type)
        found = audio_object(heard, file_id, unique_id, len(data), name)
        recording = (Photo(file_id, heard.content_type, heard.kind), found)
        return self._post(fields, heard.kind, found, recording=recording)

    def _store(self, data: bytes, kind: str, extension: str, content_type: str) -> tuple[str, str]:
        """The file's ``(file_id, file_unique_id)``, served by the fake Bot API and the page."""
        digest = hashlib.sha256(data).hexdigest()[:24]
        file_id, unique_id = f"playground-{kind}-{digest}", f"pg{digest[:14]}"
        folder = {"photo": "photos", "audio": "music"}.get(kind, kind)  # as Telegram's file paths read
        self.telegram.add_file(file_id, data, f"{folder}/{file_id}.{extension}")
        self.photos[file_id] = (content_type, data)
        return file_id, unique_id

    def _post(self, fields: dict[str, str], kind: str, shown: Any, **attached: Any) -> web.Response:
        """The member's message with its file, enqueued as the update Telegram sends."""
        reply = fields.get("reply_to")
        try:
            update = self.group.say(
                fields.get("user") or "You",
                fields.get("caption", ""),
                int(time.time()),
                reply_to=int(reply) if reply else None,
                **attached,
            )
        except (Refused, ValueError) as exc:
            return _refused(exc if isinstance(exc, Refused) else Refused(400, "reply_to is a message id"))
        self.telegram.enqueue(update)
        return web.json_response({"ok": True, "message_id": update["message"]["message_id"], kind: shown})

    # -- reading ---------------------------------------------------------------------------------------
    async def _file(self, request: web.Request) -> web.Response:
        found = self.photos.get(request.match_info["file_id"])
        if found is None:
            return _error(404, "no such file")
        return web.Response(body=found[1], content_type=found[0])

    async def _transcript(self, _request: web.Request) -> web.Response:
        bot = [{"from": "bot", "text": sent.get("text", "")} for sent in self._bot_sent()]
        return web.json_response(
            {
                "said": self.transcript,
                "bot": bot,
                "reactions": self._bot_reactions(),
                "decisions": self.decisions,
            }
        )

    def _bot_reactions(self) -> list[dict[str, Any]]:
        return [
            {"message_id": call.get("message_id"), "reaction": call.get("reaction")}
            for call in self.telegram.calls("setMessageReaction")
        ]

    async def _page(self, _request: web.Request) -> web.Response:
        bot = self.telegram.bot_user
        html = render_page(self.group.chat, bot, self.group.members, self.model, self.inspector)
        return web.Response(text=html, content_type="text/html")

    async def _messages(self, _request: web.Request) -> web.Response:
        return web.json_response(self.timeline())

    def timeline(self) -> dict[str, Any]:
        removed = {message for chat, message in self.telegram.deleted if chat == self.chat_id}
        entries = [self._member_entry(mid, removed) for mid in self.group.posted]
        entries += [self._bot_entry(sent, removed) for sent in self._bot_sent()]
        # Members and the bot draw ids from the chat's one increasing sequence: ids order the chat.
        entries.sort(key=lambda e: int(e["id"]))
        bot = self.telegram.bot_user
        return {
            "chat": {"id": self.chat_id, "title": self.group.chat.get("title", "")},
            "bot": {"id": bot["id"], "name": bot["first_name"], "username": bot["username"]},
            "members": self.group.members,
            "model": self.model,
            "inspector": self.inspector,
            "reaction_emoji": list(tg.QUICK_REACTIONS),
            "typing": tg.bot_typing(self.telegram.requests, self.chat_id, time.monotonic()),
            "messages": entries,
        }

    def _member_entry(self, message_id: int, removed: set[int]) -> dict[str, Any]:
        posted = self.group.posted[message_id]
        message = posted.message
        photo = recording = None
        if posted.photo is not None and posted.photo.kind == "photo":
            size = message["photo"][-1]
            photo = {
                "url": f"/files/{posted.photo.file_id}",
                "width": size["width"],
                "height": size["height"],
            }
        elif posted.photo is not None:
            found = message[posted.photo.kind]
            recording = {
                "kind": posted.photo.kind,
                "url": f"/files/{posted.photo.file_id}",
                "duration": found["duration"],
                "name": found.get("file_name"),
            }
        deleted_by = "member" if posted.deleted else "bot" if message_id in removed else None
        return {
            **self._entry(message, posted.user, deleted_by),
            "text": message.get("text", message.get("caption", "")),
            "edited": posted.edited,
            "photo": photo,
            "recording": recording,
            "inspect": None,
        }

    def _bot_entry(self, sent: dict[str, Any], removed: set[int]) -> dict[str, Any]:
        message_id = int(sent["message_id"])
        query = urlencode({"platform": "telegram", "chat": self.chat_id, "message": message_id})
        return {
            **self._entry(sent, "bot", "bot" if message_id in removed else None),
            "text": sent.get("text", ""),  # the fake keeps the text its HTML renders, as Telegram shows it
            "edited": False,
            "photo": None,
            "recording": None,
            "inspect": f"{self.inspector}/find?{query}",
        }

    def _entry(self, message: dict[str, Any], sender: str, deleted_by: str | None) -> dict[str, Any]:
        message_id = int(message["message_id"])
        members = self.group.reactions_on(message_id)
        bot = [r.get("emoji") for r in self.telegram.reactions.get((self.chat_id, message_id), [])]
        reactions = [
            {"emoji": e, "members": members.get(e, []), "bot": e in bot, "count": len(members.get(e, []))
             + (e in bot)}
            for e in dict.fromkeys([*members, *(e for e in bot if e)])
        ]  # fmt: skip
        reply = message.get("reply_to_message")
        return {
            "id": message_id,
            "from": sender,
            "is_bot": sender == "bot",
            "date": message.get("date"),
            "reply_to": int(reply["message_id"]) if reply else None,
            "deleted": deleted_by is not None,
            "deleted_by": deleted_by,
            "reactions": reactions,
        }


async def _json(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError:
        raise web.HTTPBadRequest(
            text='{"error": "the body is not JSON"}', content_type="application/json"
        ) from None
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(
            text='{"error": "the body is a JSON object"}', content_type="application/json"
        )
    return body


def _str(body: dict[str, Any], key: str, default: str | None = None) -> str:
    value = body.get(key, default)
    if not isinstance(value, str):
        raise Refused(400, f"{key} is required (a string)")
    return value


def _int(body: dict[str, Any], key: str) -> int:
    value = body.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise Refused(400, f"{key} is required (an integer)")
    return value


async def _read_limited(part: BodyPartReader, limit: int) -> bytes | None:
    """The part's bytes, or ``None`` past ``limit`` (read no further)."""
    chunks, size = [], 0
    while chunk := await part.read_chunk(64 * 1024):
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _refused(exc: Refused) -> web.Response:
    return _error(exc.status, exc.reason)


def _error(status: int, reason: str) -> web.Response:
    return web.json_response({"ok": False, "error": reason}, status=status)
