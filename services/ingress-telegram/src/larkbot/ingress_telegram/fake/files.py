"""The fake Bot API's files: ``getFile`` and the download path, and the custom emoji behind
``getCustomEmojiStickers``. A part of :class:`~.server.FakeBotApi`, which holds the state declared here.

Like Telegram: ``getFile`` refuses a file over 20 MB (bots cannot download it) and an unknown ``file_id``;
``getCustomEmojiStickers`` takes at most 200 ids and answers the stickers of the ids it knows, in the order
asked, leaving the unknown ones out.
"""

from __future__ import annotations

from typing import Any, Final

from aiohttp import web

from .wire import ApiError

MAX_DOWNLOAD_BYTES: Final = 20 * 1024 * 1024
MAX_CUSTOM_EMOJI_IDS: Final = 200


class FileRoutes:
    """Files and custom emoji of :class:`~.server.FakeBotApi`."""

    token: str
    _files: dict[str, tuple[str, bytes]]
    _custom_emoji: dict[str, dict[str, Any]]

    def add_file(self, file_id: str, data: bytes, path: str | None = None) -> None:
        self._files[file_id] = (path or f"documents/{file_id}.bin", data)

    def add_custom_emoji(
        self,
        emoji_id: str,
        data: bytes,
        *,
        emoji: str = "🙂",
        set_name: str | None = None,
        is_animated: bool = False,
        is_video: bool = False,
        side: int = 100,
    ) -> str:
        """Make ``emoji_id`` a custom emoji drawn by a sticker with these bytes; returns its file id."""
        file_id = f"emoji_{emoji_id}"
        suffix = "tgs" if is_animated else "webm" if is_video else "webp"
        self.add_file(file_id, data, f"stickers/{file_id}.{suffix}")
        sticker: dict[str, Any] = {
            "file_id": file_id,
            "file_unique_id": f"u_{file_id}",
            "type": "custom_emoji",
            "width": side,
            "height": side,
            "is_animated": is_animated,
            "is_video": is_video,
            "emoji": emoji,
            "custom_emoji_id": emoji_id,
            "file_size": len(data),
        }
        if set_name is not None:
            sticker["set_name"] = set_name
        self._custom_emoji[emoji_id] = sticker
        return file_id

    async def _download(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["token"] != self.token:
            return web.Response(status=401)
        path = request.match_info["path"]
        for stored, data in self._files.values():
            if stored == path:
                return web.Response(body=data, content_type="application/octet-stream")
        return web.Response(status=404)

    async def _api_getFile(self, params: dict[str, Any]) -> dict[str, Any]:
        found = self._files.get(str(params.get("file_id")))
        if found is None:
            raise ApiError(400, "Bad Request: invalid file_id")
        path, data = found
        if len(data) > MAX_DOWNLOAD_BYTES:
            raise ApiError(400, "Bad Request: file is too big")
        return {"file_id": params["file_id"], "file_unique_id": f"u{abs(hash(path))}", "file_size": len(data),
                "file_path": path}  # fmt: skip

    async def _api_getCustomEmojiStickers(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        ids = params.get("custom_emoji_ids")
        if not isinstance(ids, list) or not ids:
            raise ApiError(400, "Bad Request: custom_emoji_ids is empty")
        if len(ids) > MAX_CUSTOM_EMOJI_IDS:
            raise ApiError(400, "Bad Request: too many custom emoji identifiers specified")
        return [self._custom_emoji[str(i)] for i in ids if str(i) in self._custom_emoji]
