"""The fake Feishu's wire: what a request is recorded as, a sent message, a scripted fault, and Feishu's
answer bodies (``{"code": 0, "msg": …, "data": …}`` and its error form)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

Handler = Callable[[web.Request, "Recorded"], Awaitable[web.Response]]

RATE_LIMITED = 99991400
TOKEN_INVALID = 99991663


@dataclass(slots=True)
class Recorded:
    route: str
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    at: float

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(slots=True)
class Sent:
    message_id: str
    chat_id: str
    msg_type: str
    content: str
    uuid: str | None
    parent_id: str | None
    create_time_ms: int


@dataclass(slots=True)
class Fault:
    status: int = 200
    code: int = 0
    msg: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


def ok(data: Any, **extra: Any) -> web.Response:
    return web.json_response({"code": 0, "msg": "success", "data": data, **extra})


def err(status: int, code: int, msg: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response({"code": code, "msg": msg}, status=status, headers=headers)


def new_id(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(16)}"
