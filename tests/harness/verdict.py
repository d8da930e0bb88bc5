"""The guarantees after a fault-injection run, checked against the system's own records and a clean run.

Clean run: the accepted platform events, each once, in acceptance order, through the same pure adapters the
ingress services use (``FeishuAdapter``, ``TelegramAdapter``) and the pipeline's pure projection — what a
fault-free system renders from the same input. Bot messages are compared separately (when the bot speaks
depends on timing, which faults change); ``received="…"`` attributes (arrival more than 120 s after the
platform time) are stripped before comparing and counted.

Checks, per chat: no accepted event lost, none duplicated (``events`` table and rendered context), order
of record equal to acceptance order, rendered context equal to the clean run; every send the driver asked
for reached the platform exactly once and its self-event is in the context exactly once; no stuck chat (the
newest member message reached the probe).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from larkbot.canonical.actions import SendMessageAction
from larkbot.canonical.events import CanonicalEvent
from larkbot.canonical.names import Platform
from larkbot.ingress_feishu.core import FeishuAdapter
from larkbot.ingress_feishu.core.adapter import Adapted as FeishuAdapted
from larkbot.ingress_feishu.core.outbound import feishu_uuid
from larkbot.ingress_telegram.core import TelegramAdapter
from larkbot.pipeline.core import Projection
from larkbot.pipeline.settings import render_params
from larkbot.runtime.config import LarkbotConfig
from larkbot.testkit.botscript import BotScript
from larkbot.testkit.payloads import TELEGRAM_BOT_ID

from .chaos import Traffic
from .world import World

_RECEIVED = re.compile(r' received="[^"]*"')


@dataclass
class ChatVerdict:
    chat: str
    expected: int
    committed: int
    lost: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    duplicated_in_context: list[str] = field(default_factory=list)
    order_violations: list[str] = field(default_factory=list)
    context_diff: str | None = None
    late_received: int = 0
    bot_sent: int = 0
    bot_duplicates: list[str] = field(default_factory=list)
    bot_lost: list[str] = field(default_factory=list)
    bot_unknown: list[str] = field(default_factory=list)
    bot_missing_in_context: list[str] = field(default_factory=list)
    stuck: str | None = None

    def failures(self) -> list[str]:
        out = []
        for name in ("lost", "unexpected", "duplicated_in_context", "order_violations", "bot_duplicates",
                     "bot_lost", "bot_missing_in_context"):  # fmt: skip
            value = getattr(self, name)
            if value:
                out.append(f"{self.chat}: {name} {value[:5]}{' …' if len(value) > 5 else ''}")
        if self.context_diff:
            out.append(f"{self.chat}: rendered context differs from the clean run: {self.context_diff}")
        if self.stuck:
            out.append(f"{self.chat}: stuck: {self.stuck}")
        return out


def clean_events(
    config: LarkbotConfig, feishu_bot: str, feishu_app: str, traffic: Traffic
) -> dict[tuple[str, str], list[CanonicalEvent]]:
    out: dict[tuple[str, str], list[CanonicalEvent]] = {}
    seen: set[tuple[str, str, str]] = set()

    def add(event: CanonicalEvent) -> None:
        key = (event.platform.value, event.chat_id, event.dedup_key)
        if key not in seen:
            seen.add(key)
            out.setdefault((event.platform.value, event.chat_id), []).append(event)

    offset = config.utc_offset_min or 0
    feishu = FeishuAdapter(feishu_bot, config.chat_ids("feishu"), offset, bot_app_id=feishu_app)
    for envelope, received in traffic.feishu_accepted:
        result = feishu.adapt(envelope, received)
        assert isinstance(result, FeishuAdapted), result
        for event in result.events:
            add(event)
    telegram = TelegramAdapter(str(TELEGRAM_BOT_ID), config.chat_ids("telegram"), offset)
    for update, received in traffic.telegram_accepted:
        for tg_event in telegram.adapt(update, received).events:
            add(tg_event)
    return out


def clean_render(config: LarkbotConfig, platform: str, chat_id: str, events: list[CanonicalEvent],
                 identity: Any) -> list[str]:  # fmt: skip
    settings = config.chat(platform, chat_id)
    assert settings is not None
    params = render_params(
        config, settings, Platform(platform), chat_id, identity, config.utc_offset_min or 0
    )
    projection = Projection(params)
    for event in events:
        projection.apply(event)
    return [_RECEIVED.sub("", s.xml) for s in projection.segments]


def _first_diff(live: list[str], clean: list[str]) -> str | None:
    if live == clean:
        return None
    for i, (a, b) in enumerate(zip(live, clean, strict=False)):
        if a != b:
            return f"segment {i}: live {a[:160]!r} vs clean {b[:160]!r}"
    return f"live has {len(live)} member segments, clean {len(clean)}"


async def judge(
    w: World,
    script: BotScript,
    config: LarkbotConfig,
    traffic: Traffic,
    identities: dict[str, Any],
) -> list[ChatVerdict]:
    clean = clean_events(config, w.feishu.bot_open_id, w.feishu.app_id, traffic)
    rows = await w.event_rows()
    by_chat: dict[tuple[str, str], list[Any]] = {}
    for row in rows:
        by_chat.setdefault((row.platform, row.chat_id), []).append(row)
    verdicts = []
    chats = [(p, c) for p in ("feishu", "telegram") for c in sorted(config.chat_ids(p))]
    for platform, chat_id in chats:
        expected = clean.get((platform, chat_id), [])
        expected_keys = [e.dedup_key for e in expected]
        live_rows = by_chat.get((platform, chat_id), [])
        bot_rows = [r for r in live_rows if r.dedup_key not in set(expected_keys) and _is_self(r)]
        member_rows = [r for r in live_rows if r.dedup_key in set(expected_keys)]
        v = ChatVerdict(f"{platform}:{chat_id}", len(expected_keys), len(member_rows))
        present = [r.dedup_key for r in member_rows]
        v.lost = [k for k in expected_keys if k not in set(present)]
        v.unexpected = [
            r.dedup_key for r in live_rows if r.dedup_key not in set(expected_keys) and not _is_self(r)
        ]
        position = {k: i for i, k in enumerate(expected_keys)}
        v.order_violations = [
            f"{a} committed before {b}" for a, b in itertools.pairwise(present) if position[a] > position[b]
        ]
        snap = await w.snapshot(Platform(platform), chat_id)
        ids = Counter(s.message_id for s in snap.segments if s.node_type == "message")
        v.duplicated_in_context = [m for m, n in ids.items() if m is not None and n > 1]
        member_xml = [s.xml for s in snap.segments if not s.is_myself]
        v.late_received = sum(bool(_RECEIVED.search(x)) for x in member_xml)
        v.context_diff = _first_diff(
            [_RECEIVED.sub("", x) for x in member_xml],
            clean_render(config, platform, chat_id, expected, identities.get(platform)),
        )
        in_context = {s.message_id for s in snap.segments if s.is_myself}
        await _bot_checks(w, v, platform, chat_id, bot_rows, in_context)
        newest = traffic.newest_token.get(chat_id)
        if newest is not None and not any(newest in c.raw.decode("utf-8", "replace") for c in script.probes):
            v.stuck = f"newest message {newest} never reached the probe"
        verdicts.append(v)
    return verdicts


def _is_self(row: Any) -> bool:
    if row.kind != "message":
        return False
    return bool(json.loads(row.payload).get("is_self_sent"))


async def _bot_checks(
    w: World,
    v: ChatVerdict,
    platform: str,
    chat_id: str,
    bot_rows: list[Any],
    in_context: set[str | None],
) -> None:
    sends = [a for a in w.tap.of_kind("send_message", chat_id) if isinstance(a, SendMessageAction)]
    if platform == "feishu":
        sent = [s for s in w.feishu.sent.values() if s.chat_id == chat_id]
        texts = Counter(s.content for s in sent)
        uuids = {s.uuid for s in sent}
        v.bot_lost = sorted({a.idempotency_key for a in sends if feishu_uuid(a.idempotency_key) not in uuids})
        sent_ids = [s.message_id for s in sent]
    else:
        tg = [m for m in w.telegram.sent if str(m["chat"]["id"]) == chat_id]
        texts = Counter(m["text"] for m in tg)
        delivered = set(texts)
        missing = sorted({a.idempotency_key for a in sends if a.text not in delivered})
        for key in missing:
            state = await _ledger_state(w, key)
            (v.bot_unknown if state in ("pending", "unknown") else v.bot_lost).append(f"{key} ({state})")
        sent_ids = [str(m["message_id"]) for m in tg]
    v.bot_sent = len(sent_ids)
    v.bot_duplicates = [t for t, n in texts.items() if n > 1]
    committed = Counter(r.message_id for r in bot_rows)
    v.bot_missing_in_context = [m for m in sent_ids if m not in in_context or committed[m] != 1]


async def _ledger_state(w: World, idempotency_key: str) -> str:
    kv = await w.bus.js.key_value("telegram-sent-ledger")
    try:
        entry = await kv.get(hashlib.sha256(idempotency_key.encode()).hexdigest())
    except Exception as exc:
        return f"no record ({type(exc).__name__})"
    return str(json.loads(entry.value or b"{}").get("state"))
