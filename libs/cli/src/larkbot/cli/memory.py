"""``larkbot memory``: an operator's view of the driver's per-person memories (SPEC §7).

larkbot memory export --person ID [--platform P]   the person's memories and their patches, as JSON
larkbot memory forget --person ID [--platform P] --yes
                                                   delete them (the one deletion there is), log the forget
larkbot memory stats                               counts, as JSON

The commands open the driver's database as the driver does (``services.driver.database_url``, else SQLite
under the data directory) through the driver's public API (``larkbot.driver.read``; the forget through
``larkbot.driver.forget``), and never migrate it: before the driver has created its tables they say so and
exit 1. Without ``--platform`` they act on every platform. Person ids are platform user ids (Feishu
open_id, Telegram user id), never names.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable, Coroutine
from dataclasses import asdict
from typing import Any

from larkbot.canonical.errors import ConfigError
from larkbot.canonical.names import Platform, Service
from larkbot.driver.forget import forget_person
from larkbot.driver.read import DriverNotReady, open_reads
from larkbot.runtime.config import load_config
from larkbot.runtime.service import database_url

#: What a command says, and its exit status, when the driver's database is not there yet.
NOT_READY_HINT = (
    "it does not answer, or the driver has not created (or not migrated) its tables yet: "
    "start the driver (or upgrade it to this version) and try again"
)


def not_ready(command: str, exc: DriverNotReady) -> int:
    print(f"larkbot {command}: {exc}: {NOT_READY_HINT}", file=sys.stderr)
    return 1


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
    commands: dict[str, Callable[[str, argparse.Namespace], Coroutine[Any, Any, int]]] = {
        "export": _export,
        "forget": _forget,
        "stats": _stats,
    }
    try:
        return asyncio.run(commands[args.memory_command](database_url(config, Service.DRIVER), args))
    except DriverNotReady as exc:
        return not_ready("memory", exc)


def _platforms(args: argparse.Namespace) -> list[str]:
    return [args.platform] if args.platform else [p.value for p in Platform]


async def _export(url: str, args: argparse.Namespace) -> int:
    out: list[dict[str, Any]] = []
    async with open_reads(url) as reads:
        for platform in _platforms(args):
            for found in await reads.memories_of_person(platform, args.person):
                patches = [patch.as_dict() for patch in found.patches]
                out.append({**asdict(found.memory), "patches": patches})
    print(json.dumps({"person_id": args.person, "memories": out}, ensure_ascii=False, indent=2))
    return 0


async def _forget(url: str, args: argparse.Namespace) -> int:
    now_ms = int(time.time() * 1000)
    for platform in _platforms(args):
        count = await forget_person(url, platform, args.person, now_ms=now_ms)
        print(f"{platform}: forgot {count} memories of {args.person}")
    return 0


async def _stats(url: str, _args: argparse.Namespace) -> int:
    async with open_reads(url) as reads:
        stats = await reads.memory_stats()
    print(json.dumps(asdict(stats), indent=2, sort_keys=True))
    return 0
