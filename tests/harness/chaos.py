"""Fault injection: traffic through the real ingress paths while services are SIGKILLed, NATS restarts and
the platforms redeliver — then the guarantees of DESIGN §8 checked and printed as one report.

Input: per chat, a plan drawn from ``Random(f"{seed}:{chat}")`` (messages, replies, Feishu reactions and
recalls, Telegram edits; ``#send`` triggers for the bot). Feishu events are pushed over the long
connection one chat-event at a time, re-pushed (same ``event_id``, same body) until acknowledged with 200
— the platform's own behaviour compressed in time — and a share of them re-pushed again immediately and
later. Telegram updates are queued at the fake Bot API, and a share is repeated after confirmation.
Faults come from ``Random(f"{seed}:faults")``: each service killed ``kills_per_service`` times, NATS
restarted once; a supervisor restarts any service that exits by itself (and reports it).

The checks are in :mod:`.verdict`.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from dataclasses import dataclass, field
from typing import Any

from larkbot.ingress_feishu.fake.server import FakeFeishu
from larkbot.ingress_telegram.fake import FakeBotApi
from larkbot.testkit.ingress_feishu.pushing import push_until_accepted as pushed
from larkbot.testkit.payloads import (
    feishu_message_id,
    feishu_reaction,
    feishu_recall,
    feishu_text,
    feishu_user,
    telegram_edit,
    telegram_text,
)
from larkbot.testkit.stack import Stack, until

PUSH_TIMEOUT_S = 6.0


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    feishu_chats: int
    telegram_chats: int
    events: int
    kills_per_service: int
    redeliver_share: float
    mean_gap_s: float
    settle_timeout_s: float = 240.0
    #: NATS faults spread over the traffic: a restart of the one server, or on a cluster one kill each
    #: of the victims :class:`~tests.harness.nats.ClusterNats` is given.
    nats_faults: int = 1
    #: Services run as several processes (the first of each is the one the faults kill); PostgreSQL.
    replicas: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Step:
    """One planned platform event of a chat: ``kind`` message|reply|reaction|recall|edit."""

    kind: str
    n: int  # the chat-local number of the message it creates or targets
    text: str = ""
    target: int | None = None
    user: int = 0
    redeliver: bool = False
    later_s: float = 0.0
    gap_s: float = 0.0


def feishu_chat_id(i: int) -> str:
    return f"oc_chaos_{i:03d}"


def telegram_chat_id(i: int) -> int:
    return -1002000000000 - i


def token(chat_index: str, n: int) -> str:
    return f"k{chat_index}n{n}"


def plan_chat(seed: int, key: str, events: int, profile: Profile, platform: str) -> list[Step]:
    rng = random.Random(f"{seed}:{key}")
    steps: list[Step] = []
    live: list[int] = []  # messages not recalled
    reacted: set[tuple[int, int, str]] = set()
    author: dict[int, int] = {}
    n = 0
    for _ in range(events):
        roll = rng.random()
        user = rng.randrange(3)
        gap = rng.expovariate(1 / profile.mean_gap_s)
        redeliver = rng.random() < profile.redeliver_share
        later = rng.uniform(3.0, 20.0)
        if live and roll < 0.05 and platform == "feishu":
            target = rng.choice(live)
            emoji = rng.choice(["THUMBSUP", "SMILE", "OK", "HEART"])
            if (target, user, emoji) not in reacted:
                reacted.add((target, user, emoji))
                steps.append(Step("reaction", target, emoji, None, user, redeliver, later, gap))
                continue
        if len(live) > 3 and 0.05 <= roll < 0.08:
            target = rng.choice(live[:-1])
            if platform == "feishu":
                live.remove(target)
                steps.append(Step("recall", target, "", None, user, redeliver, later, gap))
            else:
                # Unique text: an edit that changes nothing is a "phantom" the adapter drops, but only
                # while the ingress process remembers the message (see docs/testing.md).
                text = f"edited {token(key, target)} v{len(steps)}"
                steps.append(Step("edit", target, text, None, author[target], redeliver, later, gap))
            continue
        n += 1
        body = f"{token(key, n)} hello {rng.randrange(10**6)}"
        if rng.random() < 0.04:
            body = f"#send {token(key, n)} please answer"
        reply_to = rng.choice(live) if live and rng.random() < 0.1 else None
        kind = "reply" if reply_to is not None else "message"
        steps.append(Step(kind, n, body, reply_to, user, redeliver, later, gap))
        live.append(n)
        author[n] = user
    return steps


@dataclass
class Traffic:
    """What was sent and what the platforms accepted, in acceptance order."""

    feishu_accepted: list[tuple[dict[str, Any], int]] = field(default_factory=list)
    telegram_accepted: list[tuple[dict[str, Any], int]] = field(default_factory=list)
    newest_token: dict[str, str] = field(default_factory=dict)  # chat → token of its newest message
    push_failures: int = 0
    repushes: int = 0
    repeats: int = 0
    later: list[asyncio.Task[None]] = field(default_factory=list)


async def push_until_accepted(fake: FakeFeishu, envelope: dict[str, Any], traffic: Traffic) -> None:
    traffic.push_failures += await pushed(fake, envelope, PUSH_TIMEOUT_S)


async def repush_later(fake: FakeFeishu, envelope: dict[str, Any], delay_s: float, traffic: Traffic) -> None:
    await asyncio.sleep(delay_s)
    await push_until_accepted(fake, envelope, traffic)
    traffic.repushes += 1


async def run_feishu_chat(fake: FakeFeishu, chat_id: str, steps: list[Step], traffic: Traffic) -> None:
    for step in steps:
        await asyncio.sleep(step.gap_s)
        now = time.time_ns() // 1_000_000
        sender = feishu_user(step.user)
        if step.kind in ("message", "reply"):
            target = feishu_message_id(chat_id, step.target) if step.target is not None else None
            envelope = feishu_text(
                chat_id, step.n, step.text, sender=sender, create_time_ms=now, reply_to=target
            )
            fake.message_chats[feishu_message_id(chat_id, step.n)] = chat_id
            traffic.newest_token[chat_id] = step.text.split()[1 if step.text.startswith("#") else 0]
        elif step.kind == "reaction":
            envelope = feishu_reaction(
                feishu_message_id(chat_id, step.n), step.text, operator=sender, create_time_ms=now
            )
        else:
            envelope = feishu_recall(chat_id, feishu_message_id(chat_id, step.n), create_time_ms=now)
        await push_until_accepted(fake, envelope, traffic)
        traffic.feishu_accepted.append((envelope, now))
        if step.redeliver:
            await push_until_accepted(fake, envelope, traffic)
            traffic.repushes += 1
            traffic.later.append(asyncio.create_task(repush_later(fake, envelope, step.later_s, traffic)))


def confirmed_offset(fake: FakeBotApi) -> int:
    """The highest ``getUpdates`` offset the ingress has sent: every update below it is confirmed."""
    return max((int(p.get("offset") or 0) for p in fake.calls("getUpdates")), default=0)


async def repeat_confirmed(
    fake: FakeBotApi, update: dict[str, Any], later_s: float, traffic: Traffic
) -> None:
    """Telegram sends an update again only when the bot crashed between handling and confirming it, so
    only a confirmed update is repeated: once as soon as it is confirmed, once ``later_s`` after."""
    await until(lambda: confirmed_offset(fake) > update["update_id"], "confirmation", timeout_s=600)
    fake.repeat(update)
    await asyncio.sleep(later_s)
    fake.repeat(update)
    traffic.repeats += 2


async def run_telegram_chat(fake: FakeBotApi, chat_id: int, steps: list[Step], traffic: Traffic) -> None:
    for step in steps:
        await asyncio.sleep(step.gap_s)
        now = time.time_ns() // 1_000_000
        message_id = 10_000 + step.n
        if step.kind in ("message", "reply"):
            reply_to = 10_000 + step.target if step.target is not None else None
            update = telegram_text(
                chat_id, message_id, step.text, user=step.user, date=now // 1000, reply_to=reply_to
            )
            traffic.newest_token[str(chat_id)] = step.text.split()[1 if step.text.startswith("#") else 0]
        else:
            update = telegram_edit(
                chat_id, message_id, step.text, user=step.user, date=now // 1000, edit_date=now // 1000
            )
        update_id = fake.enqueue(update)
        update = {"update_id": update_id, **update}
        traffic.telegram_accepted.append((update, now))
        if step.redeliver:
            traffic.later.append(asyncio.create_task(repeat_confirmed(fake, update, step.later_s, traffic)))


@dataclass
class FaultLog:
    kills: list[tuple[float, str]] = field(default_factory=list)
    self_exits: list[tuple[float, str, int, str]] = field(default_factory=list)
    nats_restarts: list[float] = field(default_factory=list)


def fault_plan(
    seed: int, services: tuple[str, ...], kills: int, duration_s: float, nats_faults: int = 1
) -> list[tuple[float, str, float]]:
    rng = random.Random(f"{seed}:faults")
    plan = [
        (rng.uniform(0.08, 0.92) * duration_s, name, rng.uniform(0.1, 1.5))
        for name in services
        for _ in range(kills)
    ]
    # NATS faults in their own slices of the traffic, so that one election is over before the next kill.
    for index in range(nats_faults):
        low, high = (
            (0.35, 0.65)
            if nats_faults == 1
            else (0.15 + 0.7 * index / nats_faults, 0.15 + 0.7 * (index + 0.6) / nats_faults)
        )
        plan.append((rng.uniform(low, high) * duration_s, "nats", rng.uniform(0.5, 2.0)))
    return sorted(plan)


async def inject(
    stack: Stack, nats: Any, plan: list[tuple[float, str, float]], log: FaultLog, t0: float
) -> None:
    for at, target, down_s in plan:
        await asyncio.sleep(max(0.0, t0 + at - time.monotonic()))
        if target == "nats":
            log.nats_restarts.append(time.monotonic() - t0)
            await nats.restart(down_s)
            continue
        log.kills.append((time.monotonic() - t0, target))
        await stack.kill(target)
        await asyncio.sleep(down_s)
        await stack.start(target)


async def supervise(stack: Stack, log: FaultLog, t0: float, stop: asyncio.Event) -> None:
    """Restart a service that exited by itself, as a process supervisor would, and remember it."""
    while not stop.is_set():
        for name, svc in stack.services.items():
            proc = svc.proc
            if proc is not None and proc.returncode is not None and proc.returncode != -9:
                log.self_exits.append((time.monotonic() - t0, name, proc.returncode, stack.tail(name, 8)))
                await stack.start(name)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.5)
