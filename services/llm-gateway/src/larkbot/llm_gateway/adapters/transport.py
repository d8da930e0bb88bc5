"""HTTP to providers: one pooled httpx client per endpoint, non-streaming POSTs, failures translated once.

``post`` bounds the whole call (connect, send, wait, read) by ``timeout_s`` with ``asyncio.timeout`` —
httpx's own timeouts are per phase and would let a slow trickle of bytes outlive the caller's deadline —
and the connect phase by the endpoint's ``connect_timeout_s``. httpx exceptions never leave this module:
they become :class:`ProviderTimeout` or :class:`ProviderUnreachable`, whose messages carry no URL query
and no header.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from larkbot.runtime.config import LlmEndpoint


class TransportError(Exception):
    """A provider call that produced no HTTP response."""


class ProviderTimeout(TransportError):
    pass


class ProviderUnreachable(TransportError):
    pass


@dataclass(frozen=True, slots=True)
class HttpReply:
    status: int
    headers: dict[str, str]
    body: bytes
    elapsed_s: float


class Transport:
    def __init__(self, endpoints: Mapping[str, LlmEndpoint], *, max_connections: int = 64) -> None:
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._clients = {
            name: httpx.AsyncClient(
                limits=limits,
                timeout=httpx.Timeout(endpoint.timeout_s, connect=endpoint.connect_timeout_s),
                follow_redirects=False,
                trust_env=False,
            )
            for name, endpoint in endpoints.items()
        }

    async def post(
        self, endpoint_name: str, url: str, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> HttpReply:
        client = self._clients[endpoint_name]
        started = time.perf_counter()
        try:
            async with asyncio.timeout(timeout_s):
                response = await client.post(url, content=body, headers=dict(headers))
                payload = await response.aread()
        except (TimeoutError, httpx.TimeoutException):
            raise ProviderTimeout(f"no reply within {timeout_s:.1f} s") from None
        except httpx.TransportError as exc:
            raise ProviderUnreachable(f"connection failed: {type(exc).__name__}") from None
        return HttpReply(
            status=response.status_code,
            headers=dict(response.headers.items()),
            body=payload,
            elapsed_s=time.perf_counter() - started,
        )

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
