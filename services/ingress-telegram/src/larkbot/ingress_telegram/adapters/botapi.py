"""A thin Bot API client over aiohttp that returns raw JSON and says whether a request left.

Outbound calls do not go through aiogram's ``Bot``: the sent-ledger must tell "Telegram refused it"
(nothing was sent), "the connection never opened" (nothing was sent) and "the answer was lost" (the
message may exist) apart, which aiogram folds into one ``TelegramNetworkError``; and the synthetic
self-sent event is built from the raw ``Message`` Telegram returns, through the same pure adapter as
inbound updates. Errors never carry the request URL (it contains the bot token).

The three, decided once, here:

- a JSON answer with ``ok: false`` → a :class:`BotApiError` with its ``error_code``, whatever the code:
  Telegram answered, so it did not execute the method — a 500 ``Internal Server Error`` included. Its
  type says whether asking again can help (:func:`bot_api_error`, ``core.retries``): :class:`BotApiFault`
  (429, 5xx) or :class:`BotApiRefused` (any other code);
- the connection could not be opened → :class:`NotSent`;
- no answer (timeout, a connection closed after the request was written) or an answer that is not the Bot
  API's (an HTTP 5xx without its JSON body, from a proxy or load balancer in front of it, which may have
  passed the request on) → :class:`OutcomeUnknown`.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from larkbot.canonical.errors import LarkbotError, PermanentError, RetryableError

from ..core.retries import send_failure


class BotApiError(LarkbotError):
    """Telegram answered ``ok: false``: the method was not executed (``code`` is its ``error_code``: 429
    with ``retry_after``, 5xx for its own faults, 4xx for the request's). ``migrate_to_chat_id``: the
    group was upgraded to that supergroup (send there instead). Raised as one of its two kinds."""

    def __init__(
        self,
        code: int,
        description: str,
        retry_after: float | None = None,
        migrate_to_chat_id: int | None = None,
    ) -> None:
        super().__init__(f"Bot API error {code}: {description}")
        self.code = code
        self.description = description
        self.retry_after = retry_after
        self.migrate_to_chat_id = migrate_to_chat_id


class BotApiFault(BotApiError, RetryableError):
    """Rate limited (429) or Telegram's own fault (5xx): the same call may succeed later."""


class BotApiRefused(BotApiError, PermanentError):
    """Any other error answer (400, 401, 403, …): repeating the call cannot change it."""


def bot_api_error(
    code: int,
    description: str,
    retry_after: float | None = None,
    migrate_to_chat_id: int | None = None,
) -> BotApiError:
    """Telegram's error answer ``code`` as the type of what it means."""
    kind = BotApiRefused if send_failure(code) is None else BotApiFault
    return kind(code, description, retry_after, migrate_to_chat_id)


class NotSent(RetryableError):
    """The connection could not be opened: the request never reached Telegram."""


class OutcomeUnknown(RetryableError):
    """The request may have reached Telegram but its answer never came back (timeout, a connection closed
    after the request was written, an HTTP 5xx that is not a Bot API answer). Transient as a failure of
    the call; a send is still never repeated after it (the Bot API has no idempotency key,
    ``core.retries``)."""


class BotApi:
    def __init__(self, base_url: str, token: str, *, timeout_s: float = 30.0) -> None:
        self._base = base_url.rstrip("/")
        self._token = token
        self._timeout = timeout_s
        self._session: aiohttp.ClientSession | None = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self._timeout))
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        url = f"{self._base}/bot{self._token}/{method}"
        try:
            async with self._http().post(url, json=params or {}) as resp:
                status = resp.status
                body = await resp.read()
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
            raise NotSent(f"{method}: cannot connect ({type(exc).__name__})") from None
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise OutcomeUnknown(f"{method}: no answer ({type(exc).__name__})") from None
        try:
            payload = json.loads(body)
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            if status >= 500:
                raise OutcomeUnknown(f"{method}: HTTP {status}")
            raise bot_api_error(status, f"HTTP {status} without a Bot API body")
        if payload.get("ok") is True:
            return payload.get("result")
        code = int(payload.get("error_code") or status)
        parameters = payload.get("parameters") or {}
        retry_after = parameters.get("retry_after")
        migrate_to = parameters.get("migrate_to_chat_id")
        raise bot_api_error(
            code,
            str(payload.get("description") or "no description"),
            float(retry_after) if retry_after is not None else None,
            migrate_to if isinstance(migrate_to, int) and not isinstance(migrate_to, bool) else None,
        )

    async def download(self, file_path: str, max_bytes: int) -> bytes:
        """Fetch ``/file/bot<token>/<file_path>``; refuses (``BotApiError`` 413) beyond ``max_bytes``."""
        url = f"{self._base}/file/bot{self._token}/{file_path}"
        try:
            async with self._http().get(url) as resp:
                if resp.status != 200:
                    raise bot_api_error(resp.status, "file download failed")
                chunks: list[bytes] = []
                size = 0
                async for chunk in resp.content.iter_chunked(65536):
                    size += len(chunk)
                    if size > max_bytes:
                        raise bot_api_error(413, f"file is larger than {max_bytes} bytes")
                    chunks.append(chunk)
                return b"".join(chunks)
        except aiohttp.ClientConnectorError as exc:
            raise NotSent(f"download: cannot connect ({type(exc).__name__})") from None
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise OutcomeUnknown(f"download: interrupted ({type(exc).__name__})") from None
