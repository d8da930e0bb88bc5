"""``larkbot audit show``: the driver's audit trail of a chat, one block per wake-up (docs/driver.md
"Audit trail").

larkbot audit show --chat PLATFORM:CHAT_ID [--since ISO-TIME|2h|30m|7d] [--json]

Reads the driver's database as ``larkbot memory`` does (``services.driver.database_url``, else SQLite
under the data directory, through ``larkbot.driver.read``), and never migrates it: before the driver has
created its tables it says so and exits 1. Times print in local time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from dataclasses import asdict
from datetime import datetime

from larkbot.canonical.errors import ConfigError
from larkbot.canonical.names import Service
from larkbot.driver.read import DriverNotReady, Tokens, WakeAudit, open_reads
from larkbot.runtime.config import load_config
from larkbot.runtime.service import database_url

from .memory import not_ready

_RELATIVE = re.compile(r"^(\d+)([smhd])$")
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def since_ms(text: str | None, now_ms: int) -> int:
    """``2h``/``30m``/``7d``/``45s`` before ``now_ms``, or an ISO time (local time when it names no
    offset); ``None``: everything."""
    if text is None:
        return 0
    relative = _RELATIVE.match(text.strip())
    if relative:
        return now_ms - int(relative.group(1)) * _UNIT_MS[relative.group(2)]
    try:
        return round(datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise ValueError(f"--since {text!r}: expected an ISO time or a duration like 2h, 30m, 7d") from None


def main(args: argparse.Namespace) -> int:
    platform, sep, chat_id = args.chat.partition(":")
    if not sep or not platform or not chat_id:
        print(f"--chat {args.chat!r}: expected <platform>:<chat_id>", file=sys.stderr)
        return 2
    try:
        since = since_ms(args.since, int(time.time() * 1000))
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(exc.report(), file=sys.stderr)
        return 2
    try:
        records = asyncio.run(_load(database_url(config, Service.DRIVER), platform, chat_id, since))
    except DriverNotReady as exc:
        return not_ready("audit", exc)
    if args.json:
        print(json.dumps([asdict(r) for r in records], ensure_ascii=False, indent=2))
    elif not records:
        print(f"no wake-ups of {args.chat} recorded" + (f" since {args.since}" if args.since else ""))
    else:
        print("\n\n".join(render(r) for r in records))
    return 0


async def _load(url: str, platform: str, chat_id: str, since: int) -> tuple[WakeAudit, ...]:
    async with open_reads(url) as reads:
        return await reads.wakeups_since(platform, chat_id, since_ms=since)


def _time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000).astimezone().strftime("%Y-%m-%d %H:%M:%S %z")


def _ms(ms: int | None) -> str:
    return "-" if ms is None else f"{ms} ms"


def _tokens(t: Tokens) -> str:
    hit = t.cache_hit
    share = f" = {hit:.0%}" if hit is not None else ""
    return f"in {t.input} (cache read {t.cache_read}{share}, write {t.cache_write}), out {t.output}"


def render(r: WakeAudit) -> str:
    """One wake-up as a block of aligned lines."""
    head = f"{_time(r.started_at_ms)}  {r.path or '-'} ({r.wake_kind})  wake {r.wake_id}"
    if r.dry_run:
        head += "  [DRY RUN]"
    c = r.context
    seqs = f"seq {c.first_seq}..{c.last_seq}" if c.count else "empty"
    lines = [head, f"  context   {seqs}, {c.count} segments, sha256 {c.sha256[:16]}"]
    if r.probe_decision is not None:
        reason = f": {r.probe_reason}" if r.probe_reason else ""
        lines.append(f"  probe     {r.probe_decision}{reason}")
        lines.append(
            f"            {_tokens(r.probe_tokens)}, {_ms(r.probe_latency_ms)}, model {r.probe_model or '-'}"
        )
    else:
        lines.append("  probe     none")
    if r.steps or r.tool_calls:
        called = ", ".join(f"{name}×{n}" for name, n in r.tool_calls) or "none"
        models = ", ".join(r.primary_models) or "-"
        not_called = " (not called: dry run)" if not r.model_called else ""
        lines.append(f"  primary   {r.steps} steps, sends {r.sends}, reactions {r.reactions}, tools {called}")
        lines.append(
            f"            {_tokens(r.tokens)}, {_ms(r.primary_latency_ms)}, model {models}{not_called}"
        )
    if r.withheld:
        lines.append(f"  withheld  {', '.join(r.withheld)}")
    lines.append(f"  outcome   {r.outcome}  ({r.ended_at_ms - r.started_at_ms} ms)")
    return "\n".join(lines)
