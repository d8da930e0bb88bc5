"""``larkbot inspector``: the web inspector — why the bot spoke or stayed silent (docs/inspector.md).

Per chat it shows the wake-ups of the audit trail with their probe decisions and reasons, plots of tokens,
cache hits and latency, compactions and the memories learnt there; per wake-up, the primary's steps with
their tool calls, results, tokens and budget, and every model request as the model saw it, with the prefix
it shared with the chat's previous request of its kind marked. Read-only, served on loopback unless
``inspector.host`` says otherwise (which needs ``inspector.access_token``); nothing leaves the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys

from aiohttp import web

from larkbot.canonical.errors import ConfigError
from larkbot.canonical.names import Service
from larkbot.driver.read import open_reads
from larkbot.runtime.config import is_loopback, load_config
from larkbot.runtime.service import database_url

from .app import Inspector


async def serve(inspector: Inspector, host: str, port: int) -> None:
    runner = web.AppRunner(inspector.app(), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    shown = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host
    print(f"inspector on http://{shown}:{bound}/", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


async def _main(args: argparse.Namespace) -> int:
    config = load_config(args.config, service="inspector")
    host = args.host if args.host is not None else config.inspector.host
    port = args.port if args.port is not None else config.inspector.port
    if not is_loopback(host) and config.inspector.access_token is None:
        print(f"larkbot inspector: listening on {host!r} requires inspector.access_token", file=sys.stderr)
        return 2
    async with open_reads(database_url(config, Service.DRIVER)) as reads:
        await serve(Inspector(config, reads), host, port)
    return 0


def main(args: argparse.Namespace) -> int:
    try:
        with contextlib.suppress(KeyboardInterrupt):
            return asyncio.run(_main(args))
    except ConfigError as exc:
        print(f"larkbot inspector: {exc.report()}", file=sys.stderr)
        return 2
    return 0


__all__ = ["Inspector", "main", "serve"]
