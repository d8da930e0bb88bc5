"""Long polling through aiogram's dispatcher, handing the *raw* update JSON to :class:`Inbound`.

- Ordered: ``handle_as_tasks=False``, so aiogram awaits each update before the next and confirms it
  (the next ``getUpdates`` offset) only after our handler returned, i.e. after the PubAck.
- Raw JSON: :class:`RawUpdatesSession` keeps the JSON of every update ``getUpdates`` returned, keyed
  by ``update_id``, and replaces an update aiogram's models cannot parse by its bare ``update_id``, so
  one malformed update is dead-lettered by the adapter instead of failing the whole batch forever.
- Our handler is the dispatcher's outer middleware: aiogram's routers never see the update (and its
  "unknown update type" path never runs).
- aiogram swallows handler exceptions and confirms the update anyway; :meth:`Inbound.handle` therefore
  never raises: it retries the bus until it succeeds, or is cancelled by :meth:`Poller.stop`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiogram import Bot, Dispatcher
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.methods import GetUpdates, TelegramMethod
from aiogram.methods.base import Response, TelegramType
from aiogram.types import TelegramObject, Update
from pydantic import ValidationError

from .. import metrics
from ..core import ALLOWED_UPDATES
from .inbound import Inbound

log = logging.getLogger(__name__)


class RawUpdatesSession(AiohttpSession):
    def __init__(self, api_base: str) -> None:
        super().__init__(api=TelegramAPIServer.from_base(api_base))
        self.raw: dict[int, Any] = {}
        #: aiogram parametrizes ``Response[<result type>]`` anew at every answer, and pydantic caches the
        #: generated model only weakly: once a full collection freed it, the next answer built it again
        #: (schema and validator, ~2.5 ms of CPU for ``getUpdates``, on the path of every inbound
        #: message). Holding each one here keeps pydantic's cache hit.
        self._response_types: dict[Any, Any] = {}
        #: Set while getUpdates fails (aiogram retries with backoff by itself); readiness reports it.
        self.poll_failing = False

    async def make_request(
        self,
        bot: Bot,
        method: TelegramMethod[TelegramType],
        timeout: int | None = None,  # noqa: ASYNC109 - aiogram's signature
    ) -> TelegramType:
        polling = isinstance(method, GetUpdates)
        try:
            result: TelegramType = await super().make_request(bot, method, timeout)
        except Exception:
            if polling:
                self._polled(failing=True)
            raise
        if polling:
            self._polled(failing=False)
        return result

    def _polled(self, *, failing: bool) -> None:
        self.poll_failing = failing
        metrics.POLLING_FAILING.set(1 if failing else 0)

    def check_response(
        self, bot: Bot, method: TelegramMethod[TelegramType], status_code: int, content: str
    ) -> Response[TelegramType]:
        if isinstance(method, GetUpdates):
            content = self._capture(bot, content)
        returning = method.__returning__
        if returning not in self._response_types:
            self._response_types[returning] = Response[returning]  # type: ignore[valid-type]
        return super().check_response(bot, method, status_code, content)

    def _capture(self, bot: Bot, content: str) -> str:
        try:
            payload = json.loads(content)
        except ValueError:
            return content
        if not isinstance(payload, dict) or not isinstance(payload.get("result"), list):
            return content
        kept: list[Any] = []
        for raw in payload["result"]:
            update_id = raw.get("update_id") if isinstance(raw, dict) else None
            if not isinstance(update_id, int):
                log.error("getUpdates returned an update without an integer update_id; skipped")
                continue
            self.raw[update_id] = raw
            try:
                Update.model_validate(raw, context={"bot": bot})
            except ValidationError:
                raw = {"update_id": update_id}
            kept.append(raw)
        payload["result"] = kept
        return json.dumps(payload)


class Poller:
    def __init__(
        self,
        api_base: str,
        token: str,
        inbound: Inbound,
        *,
        polling_timeout_s: int = 25,
    ) -> None:
        self.session = RawUpdatesSession(api_base)
        self.bot = Bot(token, session=self.session)
        self.dispatcher = Dispatcher()
        self.inbound = inbound
        self.polling_timeout_s = polling_timeout_s
        self.dispatcher.update.outer_middleware.register(self._on_update)
        self._task: asyncio.Task[None] | None = None

    async def _on_update(
        self,
        _handler: Callable[[TelegramObject, dict[str, Any]], Awaitable[Any]],
        event: TelegramObject,
        _data: dict[str, Any],
    ) -> None:
        received_at_ms = time.time_ns() // 1_000_000
        if not isinstance(event, Update):
            raise TypeError(f"the update observer received a {type(event).__name__}")
        raw = self.session.raw.pop(event.update_id, None)
        if raw is None:  # not from getUpdates (never happens in polling); adapt what aiogram has
            raw = event.model_dump(mode="json", by_alias=True, exclude_unset=True)
        await self.inbound.handle(raw, received_at_ms)
        metrics.LAST_UPDATE.set(received_at_ms / 1000)

    @property
    def failed(self) -> bool:
        return self.session.poll_failing

    def start(self) -> asyncio.Task[None]:
        self._task = asyncio.create_task(
            self.dispatcher.start_polling(
                self.bot,
                polling_timeout=self.polling_timeout_s,
                handle_as_tasks=False,
                handle_signals=False,
                close_bot_session=True,
                allowed_updates=list(ALLOWED_UPDATES),
            ),
            name="telegram-polling",
        )
        return self._task

    async def stop(self) -> None:
        if self._task is None:
            return
        if not self._task.done():
            try:
                await self.dispatcher.stop_polling()
            except RuntimeError:  # polling had not started yet
                self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        await self.session.close()
