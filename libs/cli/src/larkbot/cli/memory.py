"""``larkbot memory``: an operator's view of the driver's per-person memories (SPEC §7).

larkbot memory export --person ID [--platform P]   the person's memories and their patches, as JSON
larkbot memory forget --person ID [--platform P] --yes
                                                   delete them (the one deletion there is), log the forget
larkbot memory stats                               counts, as JSON

The commands open the driver's database as the driver does (``services.driver.database_url``, else SQLite
under the data directory) and bring it to the current migration first. Without ``--platform`` they act on
every platform. Person ids are platform user ids (Feishu open_id, Telegram user id), never names.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import larkbot.driver
from larkbot.canonical.errors import ConfigError
from larkbot.canonical.names import Platform, Service
from larkbot.driver.adapters.memories import MemoryStore
from larkbot.runtime.config import load_config
from larkbot.runtime.db import create_engine, migrate
from larkbot.runtime.service import database_url

MIGRATIONS = Path(larkbot.driver.__file__).parent / "migrations"


def main(args: argparse.Namespace) -> int:
    if args.memory_command == "forget" and not args.yes:
        print(
            f"refusing to forget the memories of {args.person} without --yes (this deletes them for good)",
            file=sys.stderr,
        )
        return 2
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(exc.report(), file=sys.stderr)
        return 2
    commands: dict[str, Callable[[MemoryStore, argparse.Namespace], Awaitable[int]]] = {
        "export": _export,
        "forget": _forget,
        "stats": _stats,
    }
    return asyncio.run(_with_store(database_url(config, Service.DRIVER), commands[args.memory_command], args))


async def _with_store(
    url: str, command: Callable[[MemoryStore, argparse.Namespace], Awaitable[int]], args: argparse.Namespace
) -> int:
    engine = create_engine(url)
    try:
        await migrate(engine, MIGRATIONS)
        return await command(MemoryStore(engine), args)
    finally:
        await engine.dispose()


def _platforms(args: argparse.Namespace) -> list[str]:
    return [args.platform] if args.platform else [p.value for p in Platform]


async def _export(store: MemoryStore, args: argparse.Namespace) -> int:
    out: list[dict[str, Any]] = []
    for platform in _platforms(args):
        patches: dict[int, list[dict[str, Any]]] = {}
        for patch in await store.patches_for_person(platform, args.person):
            patches.setdefault(patch["memory_id"], []).append(patch)
        for memory in await store.for_person(platform, args.person):
            out.append({**asdict(memory), "patches": patches.get(memory.id, [])})
    print(json.dumps({"person_id": args.person, "memories": out}, ensure_ascii=False, indent=2))
    return 0


async def _forget(store: MemoryStore, args: argparse.Namespace) -> int:
    now_ms = int(time.time() * 1000)
    for platform in _platforms(args):
        count = await store.forget(platform, args.person, actor="operator", now_ms=now_ms)
        print(f"{platform}: forgot {count} memories of {args.person}")
    return 0


async def _stats(store: MemoryStore, _args: argparse.Namespace) -> int:
    print(json.dumps(asdict(await store.stats()), indent=2, sort_keys=True))
    return 0
