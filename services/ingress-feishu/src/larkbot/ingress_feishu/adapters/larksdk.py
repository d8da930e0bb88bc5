"""Importing lark-oapi without leaking an event loop.

``lark_oapi.ws.client`` runs ``asyncio.get_event_loop()`` at import time. Outside a running loop that
creates a fresh loop and sets it as the thread's current loop, and nobody ever closes it (a
``ResourceWarning`` at exit, an error under ``-W error``). We close that loop right after the import when
the import created it; :class:`~.longconn.LongConnection` installs its own loop before every start anyway.
Importing ``lark_oapi`` costs seconds: only the long connection and the fake Feishu import this module.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any


def _import_ws_client() -> Any:
    if "lark_oapi.ws.client" in sys.modules:
        return sys.modules["lark_oapi.ws.client"]
    local = getattr(asyncio.get_event_loop_policy(), "_local", None)
    had_loop = getattr(local, "_loop", None) is not None
    import lark_oapi.ws.client as ws_client

    loop = ws_client.loop
    if not had_loop and not loop.is_running() and not loop.is_closed():
        loop.close()
        asyncio.set_event_loop(None)
    return ws_client


ws_client: Any = _import_ws_client()

from lark_oapi.core.enum import LogLevel  # noqa: E402
from lark_oapi.event.dispatcher_handler import EventDispatcherHandler  # noqa: E402
from lark_oapi.ws.pb.pbbp2_pb2 import Frame  # noqa: E402

EventDispatcherHandlerBase: Any = EventDispatcherHandler

__all__ = ["EventDispatcherHandlerBase", "Frame", "LogLevel", "ws_client"]
