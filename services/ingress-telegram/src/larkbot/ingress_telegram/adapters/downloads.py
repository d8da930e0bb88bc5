"""What media workers ask of the Bot API, on ``fetch.telegram``: ``download`` (an attachment's bytes into
the object store, content-addressed) and ``custom_emoji`` (the stickers that draw custom emoji,
``getCustomEmojiStickers``)."""

from __future__ import annotations

import hashlib
from typing import Final

import nats

from larkbot.canonical.actions import ActionResult, CustomEmojiAction, DownloadAction
from larkbot.canonical.names import OBJECT_STORE_BLOBS
from larkbot.runtime.bus import Bus
from larkbot.runtime.ingress import failed

from ..core.errors import MalformedUpdate
from ..core.message import custom_emoji_stickers
from ..core.payload import Obj
from .botapi import BotApi, BotApiError

#: Telegram serves bots files up to 20 MB.
MAX_DOWNLOAD_BYTES: Final = 20 * 1024 * 1024


async def download(api: BotApi, bus: Bus, action: DownloadAction) -> ActionResult:
    key = action.idempotency_key
    limit = min(action.max_bytes, MAX_DOWNLOAD_BYTES)
    file = await api.call("getFile", {"file_id": action.file_id})
    size = file.get("file_size")
    if isinstance(size, int) and size > limit:
        return failed(key, "too_large", f"the file has {size} bytes, the limit is {limit}")
    path = file.get("file_path")
    if not isinstance(path, str) or not path:
        return failed(key, "platform", "getFile returned no file_path")
    try:
        data = await api.download(path, limit)
    except BotApiError as exc:
        if exc.code == 413:
            return failed(key, "too_large", f"the file is larger than {limit} bytes")
        raise
    blob_key = f"sha256:{hashlib.sha256(data).hexdigest()}"
    try:
        store = await bus.js.object_store(OBJECT_STORE_BLOBS)
        await store.put(blob_key, data)
    except (nats.errors.Error, TimeoutError) as exc:
        return failed(key, "bus", f"object store unavailable: {type(exc).__name__}", retryable=True)
    return ActionResult(idempotency_key=key, ok=True, outcome="done", blob_key=blob_key)


async def custom_emoji(api: BotApi, action: CustomEmojiAction) -> ActionResult:
    key = action.idempotency_key
    answer = await api.call("getCustomEmojiStickers", {"custom_emoji_ids": list(action.emoji_ids)})
    if not isinstance(answer, list):
        return failed(key, "platform", "getCustomEmojiStickers answered without a list of stickers")
    try:
        stickers = custom_emoji_stickers([Obj(item, f"result.{n}") for n, item in enumerate(answer)])
    except MalformedUpdate as exc:
        return failed(key, "platform", f"getCustomEmojiStickers answered a malformed sticker: {exc}")
    return ActionResult(idempotency_key=key, ok=True, outcome="done", custom_emoji=stickers)
