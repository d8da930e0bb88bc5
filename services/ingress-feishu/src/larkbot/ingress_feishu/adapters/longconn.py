"""The Feishu long connection: lark-oapi's WebSocket client on its own thread, bridged to our loop.

lark-oapi's ``ws.Client.start()`` blocks forever on a module-level loop captured at import time and has
no ``stop()``. So:

- each :class:`LongConnection` runs ``start()`` on a daemon thread that owns a fresh event loop, installed
  as ``lark_oapi.ws.client.loop`` before ``start()`` (one client per process: the SDK's loop is global);
- the SDK calls its handler's ``_do_without_validation(payload)`` synchronously for every event frame and
  acknowledges the frame when it returns (``{"code": 500}`` — Feishu re-pushes — when it raises).
  :class:`RawEventHandler` overrides exactly that method to hand the raw envelope to the service loop with
  ``run_coroutine_threadsafe`` and to wait for the result, bounded by ``ack_timeout_s`` (Feishu allows
  3 s). Raw bytes rather than the SDK's typed models: the pure adapter reads Feishu's documented JSON,
  dead-letters unknown types itself, and is shared with ``larkbot replay``;
- :meth:`stop` disables reconnects, cancels the SDK's tasks and closes the socket on the SDK's loop, then
  joins the thread.

The SDK can die silently (a ``ClientException`` during reconnect ends its receive task while ``start()``
keeps blocking); :attr:`connected` reads the SDK's socket so the service's watchdog can see it and start
a new connection.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

from .. import metrics
from .inbound import MAX_ENVELOPE_BYTES
from .larksdk import EventDispatcherHandlerBase, LogLevel, ws_client

log = logging.getLogger(__name__)

# lark-oapi installs its own unmasked stdout handler; route its records through ours instead.
logging.getLogger("Lark").handlers.clear()

_sdk_connect_kwargs: Callable[..., dict[str, Any]] = ws_client._ws_connect_kwargs


def _connect_kwargs(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """The SDK's ``websockets.connect`` arguments plus our frame limit. With the library's default
    (1 MiB) a larger event closes the socket (1009) before any handler sees it: it is neither
    acknowledged nor dead-lettered, and Feishu re-pushes it on every reconnect, for hours."""
    return {**_sdk_connect_kwargs(*args, **kwargs), "max_size": MAX_ENVELOPE_BYTES}


# The SDK builds the arguments in this module function on every (re)connect and offers no parameter.
ws_client._ws_connect_kwargs = _connect_kwargs

OnEvent = Callable[[bytes, int], Coroutine[Any, Any, None]]


class RawEventHandler(EventDispatcherHandlerBase):  # type: ignore[misc]
    """Hands every event frame's raw payload to ``deliver`` (which raises to make the SDK answer 500)."""

    def __init__(self, deliver: Callable[[bytes], None]) -> None:
        super().__init__()
        self._deliver = deliver

    def _do_without_validation(self, payload: bytes) -> None:
        self._deliver(payload)


class LongConnection:
    def __init__(
        self,
        app_id: str,
        app_secret: str,
        domain: str,
        service_loop: asyncio.AbstractEventLoop,
        on_event: OnEvent,
        *,
        ack_timeout_s: float = 2.5,
    ) -> None:
        self._app_id = app_id
        self._app_secret = app_secret
        self._domain = domain
        self._service_loop = service_loop
        self._on_event = on_event
        self._ack_timeout_s = ack_timeout_s
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: Any = None
        self._started = threading.Event()
        self.failure: BaseException | None = None
        self.last_event_at: float | None = None

    @property
    def connected(self) -> bool:
        client = self._client
        return client is not None and getattr(client, "_conn", None) is not None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="feishu-long-connection", daemon=True)
        self._thread.start()
        self._started.wait(10)

    def _deliver(self, payload: bytes) -> None:
        received_at_ms = time.time_ns() // 1_000_000
        self.last_event_at = time.time()
        metrics.LAST_FRAME_AGE.set(self.last_event_at)
        future = asyncio.run_coroutine_threadsafe(self._on_event(payload, received_at_ms), self._service_loop)
        try:
            future.result(timeout=self._ack_timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(
                f"event not persisted within {self._ack_timeout_s:g} s; Feishu will re-push"
            ) from None

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        ws_client.loop = loop  # the SDK schedules everything on this module global
        self._loop = loop
        client = ws_client.Client(
            self._app_id,
            self._app_secret,
            log_level=LogLevel.WARNING,  # INFO lines carry the connection URL and its one-time ticket
            event_handler=RawEventHandler(self._deliver),
            domain=self._domain,
            auto_reconnect=True,
        )
        client.on_reconnecting = self._on_reconnecting
        client.on_reconnected = self._on_reconnected
        self._client = client
        self._started.set()
        try:
            client.start()
        except asyncio.CancelledError:
            pass  # stop() cancelled the SDK's tasks
        except BaseException as exc:
            self.failure = exc
            log.error("feishu long connection ended: %s: %s", type(exc).__name__, exc)
        finally:
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()
            metrics.CONNECTED.set(0)

    def _on_reconnecting(self) -> None:
        metrics.CONNECTED.set(0)
        log.warning("feishu long connection lost; reconnecting")

    def _on_reconnected(self) -> None:
        metrics.CONNECTED.set(1)
        log.info("feishu long connection re-established")

    async def _shutdown(self) -> None:
        """Runs on the SDK's loop: no more reconnects, cancel its tasks, close the socket."""
        client = self._client
        client._auto_reconnect = False
        current = asyncio.current_task()
        others = [t for t in asyncio.all_tasks() if t is not current]
        # start() blocks on a task running the SDK's ``_select``; cancelling it ends start() on the thread,
        # whose clean-up cancels whatever is left — so it goes last, with no await after it. The receive
        # and ping loops go first, so that they never see the socket close (they would log and reconnect).
        blocking = [t for t in others if getattr(t.get_coro(), "__name__", "") == "_select"]
        loops = [t for t in others if t not in blocking]
        for task in loops:
            task.cancel()
        await asyncio.gather(*loops, return_exceptions=True)
        conn = client._conn
        client._conn = None
        if conn is not None:
            await conn.close()
        for task in blocking:
            task.cancel()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Blocking: call it through ``asyncio.to_thread`` from the service loop."""
        loop = self._loop
        if loop is not None and not loop.is_closed() and self._client is not None:
            try:
                asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout_s)
            except (concurrent.futures.TimeoutError, RuntimeError) as exc:
                log.warning("feishu long connection did not shut down cleanly: %s", type(exc).__name__)
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                log.error("feishu long-connection thread did not stop within %.0f s", timeout_s)
