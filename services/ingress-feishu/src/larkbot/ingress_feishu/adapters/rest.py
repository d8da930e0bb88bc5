"""Feishu OpenAPI over one shared httpx client, with the tenant token refreshed on the event loop.

Why not lark-oapi's REST client: its async calls fetch the tenant token synchronously (blocking the loop
on a cache miss) and open a new HTTP client per call. This client keeps one connection pool, refreshes
the token asynchronously under a lock, and maps Feishu's answers once, here:

- ``code == 0`` → the JSON body;
- token invalid/expired (99991661, 99991663, 99991668) → refresh once and retry;
- rate limited (HTTP 429 or code 99991400) → wait ``x-ogw-ratelimit-reset`` seconds and retry, at most
  ``max_rate_limit_waits`` times (per call: sends pass 0, their own retry loop waits), then
  :class:`RateLimited`;
- no answer — a timeout, a connection closed after the request was written — → :class:`PlatformTimeout`
  (the request may have been executed); a request that never reached Feishu (connection refused, DNS,
  no pooled connection in time) → :class:`PlatformUnavailable`; any other code → a
  :class:`FeishuApiError` whose type says what it means (:func:`api_error`, ``core.apierrors``):
  :class:`ApiNotFound`, :class:`ApiForbidden`, :class:`ApiRefused` (permanent), :class:`ApiTransient`.

Every HTTP request is first booked in the platform's API-call budget (``budgets``, the
``feishu.budgets.api_calls_per_day`` / ``_per_month`` of ``larkbot.runtime.budgets``): a spent budget
raises :class:`~larkbot.runtime.budgets.store.BudgetSpent` before anything leaves. The tenant token and
the bot's own info (:data:`ESSENTIAL_ROUTES`) are booked but never refused: without them the service
cannot start or resume once the budget resets.

The app secret travels only in the token request body; it is never part of a message or an exception.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar, Final, assert_never

import httpx
from pydantic import SecretStr

from larkbot.canonical.errors import LarkbotError, PermanentError, RetryableError
from larkbot.runtime.budgets.store import Budgets

from .. import metrics
from ..core.apierrors import ApiFailure, classify

log = logging.getLogger(__name__)

TOKEN_PATH: Final = "/open-apis/auth/v3/tenant_access_token/internal"
TOKEN_CODES: Final = frozenset({99991661, 99991663, 99991668})
RATE_LIMITED: Final = 99991400
#: Refresh this long before Feishu's stated expiry (tokens live 2 h).
TOKEN_MARGIN_S: Final = 300.0
#: Failures before any byte of the request left: the connection was never made or never handed out.
#: Booked in the budget but never refused by it (the module docstring).
ESSENTIAL_ROUTES: Final = frozenset({"auth.token", "bot.info"})
_NOT_SENT: Final = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol)


class FeishuApiError(LarkbotError):
    """Feishu answered with a non-zero ``code`` (``-1``: an answer Feishu did not write as documented).
    Raised as one of its four kinds (:func:`api_error`); ``kind`` names it in reports."""

    kind: ClassVar[ApiFailure]

    def __init__(self, route: str, code: int, msg: str, status: int) -> None:
        super().__init__(f"{route}: Feishu code {code} (HTTP {status}): {msg[:200]}")
        self.route = route
        self.code = code
        self.status = status


class ApiNotFound(FeishuApiError, PermanentError):
    """The object is not there, or not visible to this app."""

    kind = ApiFailure.NOT_FOUND


class ApiForbidden(FeishuApiError, PermanentError):
    """The app lacks an ability or a scope: final until an operator changes the app."""

    kind = ApiFailure.FORBIDDEN


class ApiRefused(FeishuApiError, PermanentError):
    """Any other refusal of the request: repeating it cannot succeed."""

    kind = ApiFailure.REFUSED


class ApiTransient(FeishuApiError, RetryableError):
    """Feishu's own fault or a rate limit by code: a later attempt may succeed."""

    kind = ApiFailure.TRANSIENT


def api_error(route: str, code: int, msg: str, status: int) -> FeishuApiError:
    """The error answer ``code`` (HTTP ``status``) as the type of what it means."""
    failure = classify(code, status)
    match failure:
        case ApiFailure.NOT_FOUND:
            return ApiNotFound(route, code, msg, status)
        case ApiFailure.FORBIDDEN:
            return ApiForbidden(route, code, msg, status)
        case ApiFailure.REFUSED:
            return ApiRefused(route, code, msg, status)
        case ApiFailure.TRANSIENT:
            return ApiTransient(route, code, msg, status)
        case _:
            assert_never(failure)


class RateLimited(RetryableError):
    """Still rate limited after the allowed waits; ``delay_s`` is Feishu's reset time."""


class PlatformTimeout(RetryableError):
    """No answer (in time, or the connection closed first): the request may or may not have been
    executed."""


class PlatformUnavailable(RetryableError):
    """The request did not reach Feishu (connection refused, DNS, no connection in time)."""


class FeishuRest:
    def __init__(
        self,
        base_url: str,
        app_id: str,
        app_secret: SecretStr,
        *,
        timeout_s: float = 10.0,
        max_rate_limit_waits: int = 2,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        on_rate_limit: Callable[[float], None] | None = None,
        budgets: Budgets | None = None,
    ) -> None:
        self.app_id = app_id
        self.budgets = budgets
        self._secret = app_secret
        self._http = httpx.AsyncClient(base_url=base_url.rstrip("/"), timeout=timeout_s, trust_env=False)
        self._sleep = sleep
        self._clock = clock
        self._max_waits = max_rate_limit_waits
        self._on_rate_limit = on_rate_limit
        self._token: str | None = None
        self._token_expiry = 0.0
        self._token_lock = asyncio.Lock()

    async def close(self) -> None:
        await self._http.aclose()

    async def _book(self, route: str) -> None:
        """Book one request in the API-call budget (raises ``BudgetSpent`` when it is spent)."""
        if self.budgets is not None:
            await self.budgets.spend_calls(force=route in ESSENTIAL_ROUTES)

    async def _tenant_token(self, *, refresh: bool = False) -> str:
        async with self._token_lock:
            if not refresh and self._token is not None and self._clock() < self._token_expiry:
                return self._token
            body = {"app_id": self.app_id, "app_secret": self._secret.get_secret_value()}
            await self._book("auth.token")
            try:
                resp = await self._http.post(TOKEN_PATH, json=body)
            except httpx.TransportError as exc:
                # Whatever became of the token request, the call that needed it never left.
                raise PlatformUnavailable(f"tenant token request failed: {type(exc).__name__}") from None
            data = _json(resp, "auth.token")
            if data.get("code") != 0 or not isinstance(data.get("tenant_access_token"), str):
                raise api_error(
                    "auth.token", int(data.get("code", -1)), str(data.get("msg", "")), resp.status_code
                )
            self._token = str(data["tenant_access_token"])
            self._token_expiry = self._clock() + max(float(data.get("expire", 7200)) - TOKEN_MARGIN_S, 60.0)
            return self._token

    async def call(
        self,
        route: str,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        json: Any = None,
        data: Mapping[str, str] | None = None,
        files: Mapping[str, tuple[str, bytes, str]] | None = None,
        timeout_s: float | None = None,
        rate_limit_waits: int | None = None,
    ) -> dict[str, Any]:
        """One OpenAPI call with the retry rules of the module docstring; returns the JSON body.
        ``rate_limit_waits``: how many 429s this call waits out (default ``max_rate_limit_waits``)."""
        max_waits = self._max_waits if rate_limit_waits is None else rate_limit_waits
        refreshed = False
        waits = 0
        while True:
            resp = await self._send(route, method, path, params, json, data, files, timeout_s)
            body = _json(resp, route)
            code = body.get("code")
            if code == 0:
                metrics.API_REQUESTS.labels(route, "ok").inc()
                return body
            if code in TOKEN_CODES and not refreshed:
                refreshed = True
                await self._tenant_token(refresh=True)
                continue
            if code == RATE_LIMITED or resp.status_code == 429:
                metrics.API_REQUESTS.labels(route, "rate_limited").inc()
                reset = _reset_seconds(resp)
                if self._on_rate_limit is not None:
                    self._on_rate_limit(reset)
                if waits >= max_waits:
                    raise RateLimited(f"{route}: rate limited by Feishu", delay_s=reset)
                waits += 1
                log.warning("feishu rate limit on %s; waiting %.1f s", route, reset)
                metrics.RATE_LIMIT_WAIT_SECONDS.labels("ratelimit_reset").inc(reset)
                await self._sleep(reset)
                continue
            metrics.API_REQUESTS.labels(route, "error").inc()
            raise api_error(
                route, int(code) if isinstance(code, int) else -1, str(body.get("msg", "")), resp.status_code
            )

    async def download(
        self, route: str, path: str, params: Mapping[str, str], max_bytes: int
    ) -> bytes | None:
        """Stream a binary resource; ``None`` when it is larger than ``max_bytes``."""
        token = await self._tenant_token()
        await self._book(route)
        started = time.perf_counter()
        try:
            async with self._http.stream(
                "GET", path, params=params, headers={"Authorization": f"Bearer {token}"}
            ) as resp:
                if "json" in resp.headers.get("content-type", ""):
                    body = _json(httpx.Response(resp.status_code, content=await resp.aread()), route)
                    raise api_error(
                        route, int(body.get("code", -1)), str(body.get("msg", "")), resp.status_code
                    )
                chunks: list[bytes] = []
                size = 0
                async for chunk in resp.aiter_bytes():
                    size += len(chunk)
                    if size > max_bytes:
                        return None
                    chunks.append(chunk)
        except httpx.TimeoutException:
            metrics.API_REQUESTS.labels(route, "timeout").inc()
            raise PlatformTimeout(f"{route}: timed out") from None
        except httpx.TransportError as exc:
            metrics.API_REQUESTS.labels(route, "transport").inc()
            raise PlatformUnavailable(f"{route}: {type(exc).__name__}") from None
        finally:
            metrics.API_SECONDS.labels(route).observe(time.perf_counter() - started)
        metrics.API_REQUESTS.labels(route, "ok").inc()
        return b"".join(chunks)

    async def _send(
        self,
        route: str,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        json: Any,
        data: Mapping[str, str] | None,
        files: Mapping[str, tuple[str, bytes, str]] | None,
        timeout_s: float | None,
    ) -> httpx.Response:
        token = await self._tenant_token()
        await self._book(route)
        started = time.perf_counter()
        extra: dict[str, Any] = {}
        if timeout_s is not None:
            extra["timeout"] = timeout_s
        try:
            return await self._http.request(
                method,
                path,
                params=params,
                json=json,
                data=data,
                files=files,
                headers={"Authorization": f"Bearer {token}"},
                **extra,
            )
        except _NOT_SENT as exc:
            metrics.API_REQUESTS.labels(route, "transport").inc()
            raise PlatformUnavailable(f"{route}: {type(exc).__name__}") from None
        except httpx.TimeoutException:
            metrics.API_REQUESTS.labels(route, "timeout").inc()
            raise PlatformTimeout(f"{route}: no answer in time") from None
        except httpx.TransportError as exc:
            # Read/write errors and protocol errors come after the request started: it may have run.
            metrics.API_REQUESTS.labels(route, "transport").inc()
            raise PlatformTimeout(f"{route}: no answer ({type(exc).__name__})") from None
        finally:
            metrics.API_SECONDS.labels(route).observe(time.perf_counter() - started)


def _json(resp: httpx.Response, route: str) -> dict[str, Any]:
    try:
        body = resp.json()
    except ValueError:
        raise api_error(route, -1, "the answer is not JSON", resp.status_code) from None
    if not isinstance(body, dict):
        raise api_error(route, -1, "the answer is not a JSON object", resp.status_code)
    return body


def _reset_seconds(resp: httpx.Response) -> float:
    raw = resp.headers.get("x-ogw-ratelimit-reset")
    try:
        return max(float(raw), 0.0) if raw is not None else 1.0
    except ValueError:
        return 1.0
