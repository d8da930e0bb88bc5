"""The inspector's pages, as escaped HTML (``web.markup``): the chats and one chat (its wake-ups, plots,
compactions and memories), and what every page shares; one wake-up's page is ``wakeview``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from urllib.parse import quote

from larkbot.driver.read import ChatActivity, Memory, Summary, Tokens, WakeAudit

from ..web import Markup, el, join, page
from .plots import LatencyPoint, TokenPoint, latency_plot, tokens_plot

STYLES = ("inspector.css",)


def when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000).astimezone().strftime("%Y-%m-%d %H:%M:%S")


def chat_href(platform: str, chat_id: str) -> str:
    return f"/chat/{quote(platform, safe='')}/{quote(chat_id, safe='')}"


def wake_href(wake_id: str) -> str:
    return f"/wake/{quote(wake_id, safe='')}"


def layout(title: str | Sequence[str], *body: object) -> str:
    """``title``: one string or its parts (a chat's platform and id, each isolated)."""
    parts = [title] if isinstance(title, str) else list(title)
    home = el("a", {"href": "/", "class": "home"}, "LarkBot inspector")
    nav = el("nav", None, home, el("span", None, parts))
    main = join(el("header", None, nav), el("main", None, *body))
    return page([*parts, " · LarkBot inspector"], main, styles=STYLES)


def chat_key(platform: str, chat_id: str) -> list[str]:
    """``platform:chat_id`` as parts, so that each is shown as its own string."""
    return [platform, ":", chat_id]


def table(head: Sequence[str] | None, rows: Sequence[Sequence[object]], css: str = "") -> Markup:
    return el(
        "table",
        {"class": css or None},
        el("thead", None, el("tr", None, [el("th", None, h) for h in head])) if head else None,
        el("tbody", None, [el("tr", None, [el("td", None, c) for c in row]) for row in rows]),
    )


def tokens_text(t: Tokens) -> str:
    hit = t.cache_hit
    share = f" ({hit:.0%} hit)" if hit is not None else ""
    return f"in {t.input:,} · cache read {t.cache_read:,}{share} · write {t.cache_write:,} · out {t.output:,}"


def badge(text: str, css: str) -> Markup:
    return el("span", {"class": f"badge {css}"}, text)


def decision(a: WakeAudit) -> Markup:
    if a.probe_decision is None:
        return el("span", {"class": "muted"}, "no probe")
    return badge(a.probe_decision, f"decision-{a.probe_decision}")


def index(chats: Sequence[ChatActivity]) -> str:
    if not chats:
        body: object = el(
            "p",
            {"class": "empty"},
            "No wake-ups recorded yet. Talk to the bot (the playground, or a configured group) and reload.",
        )
    else:
        rows = [
            [
                el("a", {"href": chat_href(c.platform, c.chat_id)}, chat_key(c.platform, c.chat_id)),
                c.wakeups,
                c.sends,
                badge(f"{c.dry_runs} dry run", "dry") if c.dry_runs else "",
                when(c.last_ms),
            ]
            for c in chats
        ]
        body = table(["chat", "wake-ups", "sends", "", "last wake-up"], rows, "chats")
    return layout("chats", el("h1", None, "Chats"), body)


def chat(
    platform: str,
    chat_id: str,
    wakeups: Sequence[WakeAudit],
    compactions: Sequence[Summary],
    memories: Sequence[Memory],
) -> str:
    key = chat_key(platform, chat_id)
    tokens = [
        TokenPoint(
            when(a.started_at_ms),
            a.tokens.cache_read + a.probe_tokens.cache_read,
            a.tokens.input - a.tokens.cache_read + a.probe_tokens.input - a.probe_tokens.cache_read,
            a.tokens.output + a.probe_tokens.output,
        )
        for a in wakeups
    ]
    latency = [LatencyPoint(when(a.started_at_ms), a.probe_latency_ms, a.primary_latency_ms) for a in wakeups]
    rows = [
        [
            el("a", {"href": wake_href(a.wake_id), "class": "wake"}, when(a.started_at_ms)),
            f"{a.path or '-'} ({a.wake_kind})",
            decision(a),
            el("span", {"class": "reason"}, a.probe_reason or ""),
            a.steps,
            a.sends,
            tokens_text(a.tokens),
            join(a.outcome, " ", badge("dry run", "dry") if a.dry_run else ""),
        ]
        for a in reversed(wakeups)
    ]
    compaction_rows = [
        [
            when(s.created_at_ms),
            s.cursor,
            s.segments,
            s.turns,
            f"{s.tokens_before:,} → {s.tokens_after:,}",
            s.model_identity,
            el("details", None, el("summary", None, f"{len(s.text):,} characters"), el("pre", None, s.text)),
        ]
        for s in reversed(compactions)
    ]
    memory_rows = [
        [
            m.id,
            m.person_id,
            m.content,
            m.scope,
            m.importance,
            "yes" if m.enabled else "no",
            when(m.created_at_ms),
        ]
        for m in memories
    ]
    return layout(
        key,
        el("h1", None, key),
        el("section", {"class": "plots"}, el("h2", None, "Tokens and cache hits"), tokens_plot(tokens)),
        el("section", {"class": "plots"}, el("h2", None, "Latency per hop"), latency_plot(latency)),
        el(
            "section",
            None,
            el("h2", None, f"Wake-ups (newest {len(wakeups)})"),
            table(
                ["started", "path", "probe", "reason", "steps", "sends", "tokens", "outcome"], rows, "wakeups"
            )
            if rows
            else el("p", {"class": "empty"}, "none recorded"),
        ),
        el(
            "section",
            None,
            el("h2", None, "Compactions"),
            table(
                ["when", "cursor", "segments", "turns", "history tokens", "model", "summary"], compaction_rows
            )
            if compaction_rows
            else el("p", {"class": "empty"}, "none yet"),
        ),
        el(
            "section",
            None,
            el("h2", None, "Memories learnt here"),
            table(
                ["id", "person", "content", "scope", "importance", "enabled", "saved"],
                memory_rows,
                "memories",
            )
            if memory_rows
            else el("p", {"class": "empty"}, "none"),
        ),
    )


def message(title: str, text: object, status_hint: str = "") -> str:
    """``text``: a string, or parts (``join``) where it quotes what the request named."""
    return layout(title, el("h1", None, title), el("p", None, text), el("p", {"class": "muted"}, status_hint))


__all__ = [
    "badge",
    "chat",
    "chat_href",
    "chat_key",
    "decision",
    "index",
    "layout",
    "message",
    "table",
    "tokens_text",
    "wake_href",
    "when",
]
