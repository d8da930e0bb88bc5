"""The fake Bot API's wire: a recorded request, a scripted failure, the error an API method raises, the
parameters of a request (JSON, urlencoded or multipart) and Telegram's error envelope
(``{"ok": false, "error_code": N, "description": …, "parameters": …}``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from aiohttp import web

from larkbot.canonical.errors import PermanentError

_COMPLEX: Final = frozenset(
    {"allowed_updates", "reply_parameters", "reaction", "link_preview_options", "custom_emoji_ids"}
)


@dataclass(frozen=True, slots=True)
class Recorded:
    method: str
    params: dict[str, Any]
    at: float  # time.monotonic() when the request arrived


@dataclass(slots=True)
class Failure:
    """An error answer instead of executing the method; ``status`` 0: execute it and lose the answer."""

    status: int
    description: str
    retry_after: int | None


class ApiError(PermanentError):
    """An error answer of the fake Bot API (sent as Telegram would: ``ok: false``)."""

    def __init__(
        self, status: int, description: str, retry_after: int | None = None, migrate_to: int | None = None
    ) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.retry_after = retry_after
        self.migrate_to = migrate_to


async def read_params(request: web.Request) -> dict[str, Any]:
    params: dict[str, Any] = dict(request.query)
    if request.content_type == "application/json":
        body = await request.json()
        params.update(body if isinstance(body, dict) else {})
    elif request.can_read_body:
        form = await request.post()
        for key, value in form.items():
            params[key] = value if isinstance(value, str | bytes | bytearray) else value.file.read()
    for key in _COMPLEX:
        if isinstance(params.get(key), str):
            params[key] = json.loads(params[key])
    return params


def error_answer(
    status: int, description: str, retry_after: int | None = None, migrate_to: int | None = None
) -> web.Response:
    body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
    if retry_after is not None:
        body["parameters"] = {"retry_after": retry_after}
    if migrate_to is not None:
        body["parameters"] = {"migrate_to_chat_id": migrate_to}
    return web.json_response(body, status=status)
