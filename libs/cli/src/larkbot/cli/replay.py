"""``larkbot replay``: the offline face of the pipeline, for debugging and evaluation.

Input: JSON lines ``{"received_at_ms": int, "payload": <raw platform JSON>}`` — a Feishu event envelope
(schema 2.0) or a Telegram Bot API ``Update``, exactly as the platform delivers it. Each line goes through
the same adaptation code as the ingress service and the same reduce/render as the pipeline, with no
network. A line the adapter refuses is reported on stderr with its reason (as the service would
dead-letter it) and the replay goes on.

Output: per chat, ``<!-- chat: ID -->`` and its rendered context; with ``--every``, one JSON line
``{"chat": ID, "line": N, "rc": XML}`` after every input line that reaches a projected chat.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from larkbot.canonical.errors import ConfigError, ContractError
from larkbot.canonical.events import BotIdentity, CanonicalEvent
from larkbot.canonical.names import Platform
from larkbot.runtime.config import ChatSettings, LarkbotConfig, load_config

#: Telegram chat types that are groups; without ``--chat`` only groups are projected.
_GROUP_TYPES = frozenset({"group", "supergroup", None})

Adapt = Callable[[Mapping[str, Any], int], tuple[CanonicalEvent, ...]]


class ReplayInputError(Exception):
    """A line of the input file is not ``{"received_at_ms": int, "payload": {...}}``."""


@dataclass
class _Chat:
    projection: Any
    seen: set[str] = field(default_factory=set)


def _feishu_adapter(bot_id: str, chats: frozenset[str] | None, offset: int) -> Adapt:
    from larkbot.ingress_feishu.core import Adapted, FeishuAdapter

    adapter = FeishuAdapter(bot_open_id=bot_id, configured_chats=chats, utc_offset_min=offset)
    names: dict[str, str] = {}

    def adapt(payload: Mapping[str, Any], received_at_ms: int) -> tuple[CanonicalEvent, ...]:
        result = adapter.adapt(payload, received_at_ms, names)
        if not isinstance(result, Adapted):
            return ()  # dropped (private or unconfigured chat) or a reaction to a message never seen
        names.update(result.seen_names)
        return tuple(result.events)

    return adapt


def _telegram_adapter(bot_id: str, chats: frozenset[str] | None, offset: int) -> Adapt:
    from larkbot.ingress_telegram.core import TelegramAdapter

    adapter = TelegramAdapter(bot_id=bot_id, configured_chats=chats, utc_offset_min=offset)

    def adapt(payload: Mapping[str, Any], received_at_ms: int) -> tuple[CanonicalEvent, ...]:
        return tuple(adapter.adapt(payload, received_at_ms).events)

    return adapt


def _lines(stream: TextIO) -> Iterator[tuple[int, int, Mapping[str, Any]]]:
    for number, raw in enumerate(stream):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ReplayInputError(f"line {number}: not JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise ReplayInputError(f"line {number}: expected an object")
        received, payload = record.get("received_at_ms"), record.get("payload")
        if not isinstance(received, int) or isinstance(received, bool) or not isinstance(payload, dict):
            raise ReplayInputError(f"line {number}: expected received_at_ms (int) and payload (object)")
        yield number, received, payload


def replay(
    *,
    platform: str,
    stream: TextIO,
    out: TextIO,
    err: TextIO,
    bot_id: str,
    chats: list[str],
    config: LarkbotConfig,
    utc_offset_min: int,
    every: bool,
) -> int:
    from larkbot.pipeline.core import Projection
    from larkbot.pipeline.settings import render_params

    plat = Platform(platform)
    wanted = frozenset(chats) if chats else None
    factory = _feishu_adapter if plat is Platform.FEISHU else _telegram_adapter
    adapt = factory(bot_id, wanted, utc_offset_min)
    identity = BotIdentity(platform=plat, bot_id=bot_id, name=bot_id, updated_at_ms=int(time.time() * 1000))
    projected: dict[str, _Chat] = {}
    refused = 0
    for number, received_at_ms, payload in _lines(stream):
        try:
            events = adapt(payload, received_at_ms)
        except ContractError as exc:
            refused += 1
            print(f"line {number}: refused: {exc}", file=err)
            continue
        touched: list[str] = []
        for event in events:
            if wanted is not None and event.chat_id not in wanted:
                continue
            chat = projected.get(event.chat_id)
            if chat is None:
                if wanted is None and event.chat_type not in _GROUP_TYPES:
                    continue
                settings = (
                    config.chat(platform, event.chat_id) or config.chats.get("default") or ChatSettings()
                )
                params = render_params(config, settings, plat, event.chat_id, identity, utc_offset_min)
                chat = projected[event.chat_id] = _Chat(Projection(params))
            if event.dedup_key in chat.seen:
                continue  # a redelivery: the events table's unique key makes it a no-op in the service
            chat.seen.add(event.dedup_key)
            chat.projection.apply(event)
            if event.chat_id not in touched:
                touched.append(event.chat_id)
        if every:
            for chat_id in touched:
                line = {"chat": chat_id, "line": number, "rc": projected[chat_id].projection.xml()}
                out.write(json.dumps(line, ensure_ascii=False) + "\n")
    if not every:
        for chat_id, chat in projected.items():
            out.write(f"<!-- chat: {chat_id} -->\n")
            xml = chat.projection.xml()
            out.write(xml + ("\n" if xml and not xml.endswith("\n") else ""))
    if refused:
        print(f"{refused} line(s) refused", file=err)
    return 0


def main(args: Any) -> int:
    try:
        config = load_config(args.config) if args.config else LarkbotConfig()
    except ConfigError as exc:
        print(exc.report(), file=sys.stderr)
        return 2
    offset = args.utc_offset_min if args.utc_offset_min is not None else (config.utc_offset_min or 0)
    try:
        with open(args.input, encoding="utf-8") as stream:
            return replay(
                platform=args.platform,
                stream=stream,
                out=sys.stdout,
                err=sys.stderr,
                bot_id=args.bot_id,
                chats=args.chat or [],
                config=config,
                utc_offset_min=offset,
                every=args.every,
            )
    except (OSError, ReplayInputError) as exc:
        print(f"larkbot replay: {exc}", file=sys.stderr)
        return 2
