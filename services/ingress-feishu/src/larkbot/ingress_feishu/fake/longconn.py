"""The fake long-connection side: the endpoint answer and a WebSocket speaking Feishu's protobuf frames.

Wire format (what ``lark_oapi.ws.Client`` expects): every WebSocket message is a binary
``pbbp2.Frame``. ``method`` 0 is a control frame (``type`` header ``ping``/``pong``), 1 a data frame.
An event is a data frame with headers ``type=event``, ``message_id`` (the frame's id), ``trace_id``,
``sum=1``, ``seq=0`` and the JSON envelope as payload. The client acknowledges by sending the same frame
back with a ``biz_rt`` header and payload ``{"code": 200}`` (500 when its handler raised).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
from collections.abc import Mapping
from typing import Any

from aiohttp import WSMsgType, web

from ..adapters.larksdk import Frame

CONTROL, DATA = 0, 1
SERVICE_ID = 1


def event_frame(frame_id: str, seq: int, payload: bytes) -> bytes:
    frame = Frame()
    frame.SeqID = seq
    frame.LogID = seq
    frame.service = SERVICE_ID
    frame.method = DATA
    for key, value in (
        ("type", "event"),
        ("message_id", frame_id),
        ("trace_id", frame_id),
        ("sum", "1"),
        ("seq", "0"),
    ):
        header = frame.headers.add()
        header.key = key
        header.value = value
    frame.payload = payload
    return bytes(frame.SerializeToString())


def pong_frame() -> bytes:
    frame = Frame()
    frame.SeqID = 0
    frame.LogID = 0
    frame.service = SERVICE_ID
    frame.method = CONTROL
    header = frame.headers.add()
    header.key = "type"
    header.value = "pong"
    return bytes(frame.SerializeToString())


def frame_headers(frame: Any) -> dict[str, str]:
    return {h.key: h.value for h in frame.headers}


class LongConnection:
    """The fake's WebSocket side: pushes events and collects the client's acknowledgements."""

    def __init__(self) -> None:
        self.sockets: list[web.WebSocketResponse] = []
        self.connections = 0
        self.acks: dict[str, int] = {}
        self.pushed: dict[str, bytes] = {}  # event_id → last payload pushed
        self._waiters: dict[str, asyncio.Future[int]] = {}
        self._connected = asyncio.Condition()
        self._seq = 0

    def endpoint_answer(self, base_ws_url: str, reconnect_interval_s: int) -> dict[str, Any]:
        device = secrets.token_hex(8)
        return {
            "code": 0,
            "msg": "ok",
            "data": {
                "URL": f"{base_ws_url}/ws?device_id={device}&service_id={SERVICE_ID}",
                "ClientConfig": {
                    "ReconnectCount": -1,
                    "ReconnectInterval": reconnect_interval_s,
                    "ReconnectNonce": 0,
                    "PingInterval": 120,
                },
            },
        }

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async with self._connected:
            self.sockets.append(ws)
            self.connections += 1
            self._connected.notify_all()
        try:
            async for msg in ws:
                if msg.type == WSMsgType.BINARY:
                    await self._on_frame(ws, msg.data)
        finally:
            async with self._connected:
                if ws in self.sockets:
                    self.sockets.remove(ws)
                self._connected.notify_all()
        return ws

    async def _on_frame(self, ws: web.WebSocketResponse, data: bytes) -> None:
        frame = Frame()
        frame.ParseFromString(data)
        headers = frame_headers(frame)
        if frame.method == CONTROL and headers.get("type") == "ping":
            await ws.send_bytes(pong_frame())
        elif frame.method == DATA:
            code = int(json.loads(frame.payload).get("code", 0))
            frame_id = headers.get("message_id", "")
            self.acks[frame_id] = code
            waiter = self._waiters.pop(frame_id, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(code)

    async def wait_connected(self, count: int = 1, timeout_s: float = 30.0) -> None:
        """Wait until ``count`` connections were made in total and one is open."""
        async with self._connected:
            await asyncio.wait_for(
                self._connected.wait_for(lambda: self.connections >= count and bool(self.sockets)), timeout_s
            )

    async def push(self, payload: Mapping[str, Any], timeout_s: float = 30.0) -> int:
        """Push one event to the open connection and wait for its acknowledgement code (200 = handled)."""
        if not self.sockets:
            raise RuntimeError("no long connection is open")
        body = json.dumps(payload, ensure_ascii=False).encode()
        event_id = str(payload.get("header", {}).get("event_id", ""))
        self.pushed[event_id] = body
        self._seq += 1
        frame_id = secrets.token_hex(16)
        waiter: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiters[frame_id] = waiter
        await self.sockets[-1].send_bytes(event_frame(frame_id, self._seq, body))
        try:
            return await asyncio.wait_for(waiter, timeout_s)
        finally:
            self._waiters.pop(frame_id, None)

    async def redeliver(self, event_id: str, timeout_s: float = 30.0) -> int:
        """Push the last payload of ``event_id`` again (Feishu's re-push: same event id, same body)."""
        return await self.push(json.loads(self.pushed[event_id]), timeout_s)

    async def drop(self) -> None:
        """Close every open connection from the server side (the client reconnects by itself)."""
        for ws in list(self.sockets):
            with contextlib.suppress(ConnectionError):
                await ws.close()

    async def close(self) -> None:
        for waiter in self._waiters.values():
            waiter.cancel()
        await self.drop()
