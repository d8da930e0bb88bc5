"""Platform payloads shaped like the real ones, built from the fakes' shipped fixtures.

Feishu: schema-2.0 envelopes as the long connection (or the webhook) delivers them. Telegram: Bot API
``Update`` objects as ``getUpdates`` returns them. Ids are deterministic functions of the arguments, so a
run can be repeated on the same input.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from larkbot.ingress_feishu.fake.samples import payload

TELEGRAM_BOT_ID = 7000000001


def _hex(*parts: object, n: int = 32) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:n]


def feishu_message_id(chat_id: str, n: int) -> str:
    return "om_" + _hex("msg", chat_id, n)


def feishu_user(n: int) -> str:
    return "ou_" + _hex("user", n)


def feishu_text(
    chat_id: str, n: int, text: str, *, sender: str, create_time_ms: int, reply_to: str | None = None
) -> dict[str, Any]:
    """Message ``n`` of ``chat_id``: a plain text message (no mentions) from ``sender``."""
    envelope = copy.deepcopy(payload("message_text"))
    message_id = feishu_message_id(chat_id, n)
    envelope["header"]["event_id"] = _hex("event", chat_id, n)
    envelope["header"]["create_time"] = str(create_time_ms)
    envelope["event"]["sender"]["sender_id"] = {"union_id": "", "user_id": "", "open_id": sender}
    message = envelope["event"]["message"]
    message.update(
        message_id=message_id,
        create_time=str(create_time_ms),
        update_time=str(create_time_ms),
        chat_id=chat_id,
        content=json.dumps({"text": text}, ensure_ascii=False),
        mentions=[],
    )
    if reply_to is not None:
        message["root_id"] = reply_to
        message["parent_id"] = reply_to
    return envelope


def feishu_mention(
    chat_id: str, n: int, text: str, *, sender: str, create_time_ms: int, bot_open_id: str, bot_name: str
) -> dict[str, Any]:
    """Message ``n`` of ``chat_id``: ``@bot_name`` then ``text``, the mention as Feishu sends it (an
    ``@_user_1`` placeholder in the text, resolved in ``mentions``)."""
    envelope = feishu_text(chat_id, n, f"@_user_1 {text}", sender=sender, create_time_ms=create_time_ms)
    envelope["event"]["message"]["mentions"] = [
        {
            "key": "@_user_1",
            "id": {"union_id": "", "user_id": "", "open_id": bot_open_id},
            "name": bot_name,
            "tenant_key": envelope["event"]["sender"].get("tenant_key", ""),
        }
    ]
    return envelope


def feishu_image(chat_id: str, n: int, image_key: str, *, sender: str, create_time_ms: int) -> dict[str, Any]:
    envelope = feishu_text(chat_id, n, "", sender=sender, create_time_ms=create_time_ms)
    message = envelope["event"]["message"]
    message["message_type"] = "image"
    message["content"] = json.dumps({"image_key": image_key})
    return envelope


def feishu_audio(
    chat_id: str, n: int, file_key: str, duration_ms: int, *, sender: str, create_time_ms: int
) -> dict[str, Any]:
    """A Feishu voice message: ``audio`` content names the file and its duration in milliseconds."""
    envelope = feishu_text(chat_id, n, "", sender=sender, create_time_ms=create_time_ms)
    message = envelope["event"]["message"]
    message["message_type"] = "audio"
    message["content"] = json.dumps({"file_key": file_key, "duration": duration_ms})
    return envelope


def feishu_recall(chat_id: str, message_id: str, *, create_time_ms: int) -> dict[str, Any]:
    envelope = copy.deepcopy(payload("message_recalled"))
    envelope["header"]["event_id"] = _hex("recall", chat_id, message_id)
    envelope["header"]["create_time"] = str(create_time_ms)
    event = envelope["event"]
    event["message_id"] = message_id
    event["chat_id"] = chat_id
    event["recall_time"] = str(create_time_ms)
    return envelope


def feishu_reaction(
    message_id: str, emoji_type: str, *, operator: str, create_time_ms: int
) -> dict[str, Any]:
    envelope = copy.deepcopy(payload("reaction_created"))
    envelope["header"]["event_id"] = _hex("reaction", message_id, emoji_type, operator)
    envelope["header"]["create_time"] = str(create_time_ms)
    event = envelope["event"]
    event["message_id"] = message_id
    event["reaction_type"] = {"emoji_type": emoji_type}
    event["operator_type"] = "user"
    event["user_id"] = {"union_id": "", "user_id": "", "open_id": operator}
    event["action_time"] = str(create_time_ms)
    return envelope


def telegram_user(n: int) -> dict[str, Any]:
    return {"id": 500_000 + n, "is_bot": False, "first_name": f"Member{n}", "username": f"member{n}"}


def telegram_chat(chat_id: int) -> dict[str, Any]:
    return {"id": chat_id, "title": f"Group {chat_id}", "type": "supergroup"}


def telegram_text(
    chat_id: int, message_id: int, text: str, *, user: int, date: int, reply_to: int | None = None
) -> dict[str, Any]:
    """An ``Update`` without ``update_id`` (the fake assigns one)."""
    message: dict[str, Any] = {
        "message_id": message_id,
        "from": telegram_user(user),
        "chat": telegram_chat(chat_id),
        "date": date,
        "text": text,
    }
    if reply_to is not None:
        message["reply_to_message"] = {
            "message_id": reply_to,
            "from": telegram_user(user),
            "chat": telegram_chat(chat_id),
            "date": date,
            "text": "…",
        }
    return {"message": message}


def telegram_edit(
    chat_id: int, message_id: int, text: str, *, user: int, date: int, edit_date: int
) -> dict[str, Any]:
    update = telegram_text(chat_id, message_id, text, user=user, date=date)
    update["message"]["edit_date"] = edit_date
    return {"edited_message": update["message"]}
