"""Builders of canonical events for tests, the benchmark and the local playground.

Short keyword-only constructors with deterministic defaults (clock, offset, dedup keys), so that a test
spells only what it is about, plus :func:`chat_traffic`, a seeded generator of realistic chat traffic
(messages, replies, edits, deletes, reactions, renames, redeliveries) for the benchmark.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

from larkbot.canonical.content import Attachment, AttachmentType, Content, Inline, Mention, Text
from larkbot.canonical.events import (
    CanonicalEvent,
    DeleteEvent,
    EditEvent,
    MessageEvent,
    ReactionEvent,
    RuntimeEvent,
    Sender,
    ServiceAction,
    ServiceEvent,
)
from larkbot.canonical.names import Platform

#: 2026-01-02 03:04:05 UTC.
BASE_SEC = 1_767_323_045
OFFSET_MIN = 480


def person(
    user_id: str, name: str | None = None, *, is_bot: bool = False, username: str | None = None
) -> Sender:
    return Sender(
        id=user_id,
        display_name=name if name is not None else user_id.upper(),
        username=username,
        is_bot=is_bot,
    )


def _common(
    platform: Platform, chat: str, dedup: str, at: float, received_ms: int | None, offset: int
) -> dict[str, Any]:
    return {
        "platform": platform,
        "chat_id": chat,
        "dedup_key": dedup,
        "timestamp_sec": at,
        "received_at_ms": received_ms if received_ms is not None else int(at * 1000) + 150,
        "utc_offset_min": offset,
    }


def message(
    message_id: str,
    text: str | Content = "",
    *,
    sender: Sender | None = None,
    chat: str = "oc_chat",
    platform: Platform = Platform.FEISHU,
    at: float = BASE_SEC,
    received_ms: int | None = None,
    offset: int = OFFSET_MIN,
    attachments: tuple[Attachment, ...] = (),
    reply_to: str | None = None,
    quote: str | None = None,
    self_sent: bool = False,
    dedup: str | None = None,
    nodes: tuple[Inline, ...] | None = None,
) -> MessageEvent:
    content = text if isinstance(text, Content) else Content.from_text(text)
    if nodes is not None:
        content = Content(nodes=nodes)
    return MessageEvent(
        **_common(platform, chat, dedup or message_id, at, received_ms, offset),
        message_id=message_id,
        sender=sender or person("ou_alice", "Alice"),
        content=content,
        attachments=attachments,
        reply_to_message_id=reply_to,
        reply_quote=Content.from_text(quote) if quote else None,
        is_self_sent=self_sent,
    )


def edit(
    message_id: str,
    text: str,
    *,
    chat: str = "oc_chat",
    platform: Platform = Platform.FEISHU,
    at: float = BASE_SEC + 60,
    offset: int = OFFSET_MIN,
    dedup: str | None = None,
    sender: Sender | None = None,
    sent_at: float | None = None,
    received_ms: int | None = None,
    nodes: tuple[Inline, ...] | None = None,
) -> EditEvent:
    return EditEvent(
        **_common(platform, chat, dedup or f"edit:{message_id}:{at}", at, received_ms, offset),
        message_id=message_id,
        sender=sender,
        content=Content(nodes=nodes) if nodes is not None else Content.from_text(text),
        edited_at_sec=at,
        sent_at_sec=sent_at,
    )


def delete(
    *message_ids: str,
    chat: str = "oc_chat",
    platform: Platform = Platform.FEISHU,
    at: float = BASE_SEC + 120,
    dedup: str | None = None,
) -> DeleteEvent:
    return DeleteEvent(
        **_common(platform, chat, dedup or f"recall:{','.join(message_ids)}", at, None, OFFSET_MIN),
        message_ids=message_ids,
    )


def reaction(
    message_id: str,
    emoji: str,
    *,
    actor: Sender | None = None,
    removed: bool = False,
    chat: str = "oc_chat",
    platform: Platform = Platform.FEISHU,
    at: float = BASE_SEC + 30,
    dedup: str | None = None,
) -> ReactionEvent:
    who = actor or person("ou_bob", "Bob")
    key = dedup or f"reaction:{message_id}:{emoji}:{who.id}:{'del' if removed else 'add'}:{at}"
    return ReactionEvent(
        **_common(platform, chat, key, at, None, OFFSET_MIN),
        message_id=message_id,
        actor=who,
        emoji=emoji,
        removed=removed,
    )


def service(
    action: ServiceAction,
    *,
    chat: str = "oc_chat",
    platform: Platform = Platform.FEISHU,
    at: float = BASE_SEC + 40,
    dedup: str | None = None,
) -> ServiceEvent:
    return ServiceEvent(
        **_common(platform, chat, dedup or f"service:{action.kind}:{at}", at, None, OFFSET_MIN),
        action=action,
    )


def runtime(
    type_: str,
    *,
    attributes: tuple[tuple[str, str], ...] = (),
    text: str | None = None,
    chat: str = "oc_chat",
    platform: Platform = Platform.FEISHU,
    at: float = BASE_SEC + 50,
    dedup: str | None = None,
) -> RuntimeEvent:
    return RuntimeEvent(
        **_common(platform, chat, dedup or f"runtime:{type_}:{at}", at, None, OFFSET_MIN),
        type=type_,
        attributes=attributes,
        text=text,
    )


def photo(file_id: str = "img_1", **fields: Any) -> Attachment:
    return Attachment(type=AttachmentType.PHOTO, file_id=file_id, mime="image/jpeg", **fields)


def voice(file_id: str = "voice_1", **fields: Any) -> Attachment:
    """A voice note as Telegram describes one: OGG/Opus with its duration and size."""
    fields.setdefault("duration_s", 2.0)
    fields.setdefault("size_bytes", 19_000)
    return Attachment(type=AttachmentType.VOICE, file_id=file_id, mime="audio/ogg", **fields)


_WORDS = (
    "hello",
    "world",
    "lark",
    "bot",
    "media",
    "context",
    "render",
    "reduce",
    "queue",
    "chat",
    "lunch",
    "meeting",
    "deploy",
    "why",
    "how",
)


def chat_traffic(
    chat: str, count: int, *, seed: int = 0, platform: Platform = Platform.FEISHU, users: int = 8
) -> Iterator[CanonicalEvent]:
    """``count`` events of one chat: ~80 % messages (a third of them replies, some with mentions),
    edits, deletes, reactions, the odd rename and ~2 % redeliveries of an earlier event."""
    rng = random.Random(f"{seed}:{chat}")
    people = [person(f"ou_u{i}", f"User {i}") for i in range(users)]
    sent: list[str] = []
    emitted: list[CanonicalEvent] = []
    at = float(BASE_SEC)
    for n in range(count):
        at += rng.uniform(0.5, 20)
        roll = rng.random()
        event: CanonicalEvent
        if emitted and roll < 0.02:
            event = rng.choice(emitted)
        elif sent and roll < 0.08:
            target = rng.choice(sent)
            event = edit(
                target, " ".join(rng.choices(_WORDS, k=6)), chat=chat, platform=platform, at=at, dedup=f"e{n}"
            )
        elif sent and roll < 0.10:
            event = delete(rng.choice(sent), chat=chat, platform=platform, at=at, dedup=f"d{n}")
        elif sent and roll < 0.18:
            event = reaction(
                rng.choice(sent),
                rng.choice("👍🎉😂"),
                actor=rng.choice(people),
                chat=chat,
                platform=platform,
                at=at,
                dedup=f"r{n}",
            )
        else:
            who = rng.choice(people)
            if rng.random() < 0.01:
                who = person(who.id, f"{who.display_name}!")
                people[int(who.id[4:])] = who
            words = " ".join(rng.choices(_WORDS, k=rng.randint(3, 25)))
            nodes: tuple[Inline, ...] = (Text(text=words),)
            if rng.random() < 0.1:
                other = rng.choice(people)
                nodes = (Mention(user_id=other.id, text=f"@{other.display_name}"), Text(text=" " + words))
            message_id = f"om_{chat}_{n:08d}"
            reply_to = rng.choice(sent) if sent and rng.random() < 0.3 else None
            event = message(
                message_id, sender=who, chat=chat, platform=platform, at=at, reply_to=reply_to, nodes=nodes
            )
            sent.append(message_id)
            if len(sent) > 200:
                del sent[:100]
        emitted.append(event)
        if len(emitted) > 200:
            del emitted[:100]
        yield event
