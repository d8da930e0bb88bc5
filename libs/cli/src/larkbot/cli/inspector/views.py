"""The inspector's pages, as escaped HTML (``web.markup``): the chats, one chat (its wake-ups, plots,
compactions and memories), one wake-up (probe, steps, and every model request as sent, its prefix shared
with the chat's previous request of the same kind marked)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from urllib.parse import quote

from larkbot.canonical.llm import AssistantMessage, Message, TextPart, ToolCallPart, ToolResultMessage
from larkbot.driver.adapters.audit import ChatActivity
from larkbot.driver.core.audit import Tokens, WakeAudit
from larkbot.driver.core.compaction import Summary
from larkbot.driver.core.records import TurnRecord
from larkbot.driver.core.requestlog import Block
from larkbot.runtime.config import ChatSettings

from ..web import Markup, el, join, page
from .plots import LatencyPoint, TokenPoint, latency_plot, tokens_plot
from .reads import ChatMemory, ShownRequest, WakeDetail

STYLES = ("inspector.css",)


def when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000).astimezone().strftime("%Y-%m-%d %H:%M:%S")


def chat_href(platform: str, chat_id: str) -> str:
    return f"/chat/{quote(platform, safe='')}/{quote(chat_id, safe='')}"


def wake_href(wake_id: str) -> str:
    return f"/wake/{quote(wake_id, safe='')}"


def _layout(title: str, *body: object) -> str:
    nav = el(
        "nav", None, el("a", {"href": "/", "class": "home"}, "LarkBot inspector"), el("span", None, title)
    )
    return page(
        f"{title} · LarkBot inspector", join(el("header", None, nav), el("main", None, *body)), styles=STYLES
    )


def _table(head: Sequence[str] | None, rows: Sequence[Sequence[object]], css: str = "") -> Markup:
    return el(
        "table",
        {"class": css or None},
        el("thead", None, el("tr", None, [el("th", None, h) for h in head])) if head else None,
        el("tbody", None, [el("tr", None, [el("td", None, c) for c in row]) for row in rows]),
    )


def _tokens(t: Tokens) -> str:
    hit = t.cache_hit
    share = f" ({hit:.0%} hit)" if hit is not None else ""
    return f"in {t.input:,} · cache read {t.cache_read:,}{share} · write {t.cache_write:,} · out {t.output:,}"


def _badge(text: str, css: str) -> Markup:
    return el("span", {"class": f"badge {css}"}, text)


def _decision(a: WakeAudit) -> Markup:
    if a.probe_decision is None:
        return el("span", {"class": "muted"}, "no probe")
    return _badge(a.probe_decision, f"decision-{a.probe_decision}")


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
                el("a", {"href": chat_href(c.platform, c.chat_id)}, f"{c.platform}:{c.chat_id}"),
                c.wakeups,
                c.sends,
                _badge(f"{c.dry_runs} dry run", "dry") if c.dry_runs else "",
                when(c.last_ms),
            ]
            for c in chats
        ]
        body = _table(["chat", "wake-ups", "sends", "", "last wake-up"], rows, "chats")
    return _layout("chats", el("h1", None, "Chats"), body)


def chat(
    platform: str,
    chat_id: str,
    wakeups: Sequence[WakeAudit],
    compactions: Sequence[Summary],
    memories: Sequence[ChatMemory],
) -> str:
    key = f"{platform}:{chat_id}"
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
            _decision(a),
            el("span", {"class": "reason"}, a.probe_reason or ""),
            a.steps,
            a.sends,
            _tokens(a.tokens),
            join(a.outcome, " ", _badge("dry run", "dry") if a.dry_run else ""),
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
    return _layout(
        key,
        el("h1", None, key),
        el("section", {"class": "plots"}, el("h2", None, "Tokens and cache hits"), tokens_plot(tokens)),
        el("section", {"class": "plots"}, el("h2", None, "Latency per hop"), latency_plot(latency)),
        el(
            "section",
            None,
            el("h2", None, f"Wake-ups (newest {len(wakeups)})"),
            _table(
                ["started", "path", "probe", "reason", "steps", "sends", "tokens", "outcome"], rows, "wakeups"
            )
            if rows
            else el("p", {"class": "empty"}, "none recorded"),
        ),
        el(
            "section",
            None,
            el("h2", None, "Compactions"),
            _table(
                ["when", "cursor", "segments", "turns", "history tokens", "model", "summary"], compaction_rows
            )
            if compaction_rows
            else el("p", {"class": "empty"}, "none yet"),
        ),
        el(
            "section",
            None,
            el("h2", None, "Memories learnt here"),
            _table(
                ["id", "person", "content", "scope", "importance", "enabled", "saved"],
                memory_rows,
                "memories",
            )
            if memory_rows
            else el("p", {"class": "empty"}, "none"),
        ),
    )


def _part(message: Message) -> list[Markup]:
    out: list[Markup] = []
    if isinstance(message, AssistantMessage):
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                args = _pretty(part.arguments_json)
                out.append(
                    el(
                        "div",
                        {"class": "call"},
                        el("span", {"class": "tool"}, part.name),
                        el("pre", None, args),
                    )
                )
            elif isinstance(part, TextPart) and part.text:
                out.append(el("div", {"class": "said"}, el("pre", None, part.text)))
    elif isinstance(message, ToolResultMessage):
        texts = "\n".join(p.text for p in message.parts if isinstance(p, TextPart))
        css = "result error" if message.is_error else "result"
        out.append(el("div", {"class": css}, el("span", {"class": "tool"}, "result"), el("pre", None, texts)))
    return out


def _pretty(arguments_json: str) -> str:
    try:
        return json.dumps(json.loads(arguments_json), ensure_ascii=False, indent=2)
    except ValueError:
        return arguments_json


def _step(record: TurnRecord, settings: ChatSettings) -> Markup:
    usage = record.usage
    t = Tokens(usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens, usage.output_tokens)
    flags = [
        _badge("pending", "pending") if record.pending else "",
        _badge("sent", "sent") if record.sent else "",
        _badge("reacted", "sent") if record.reacted else "",
        _badge(record.mode, "mode") if record.mode != "normal" else "",
        _badge("shell tools exposed", "shell") if record.shell_tools_exposed else "",
    ]
    budget = (
        f"work tools {record.work_calls}/{settings.max_work_tool_calls} · "
        f"send attempts {record.participation_attempts}/{settings.max_send_attempts}"
    )
    return el(
        "div",
        {"class": "step", "data-step": record.step},
        el(
            "h3",
            None,
            f"step {record.step} · {record.model_identity} · {when(record.requested_at_ms)} ",
            flags,
        ),
        el("p", {"class": "tokens"}, _tokens(t)),
        el("p", {"class": "budget"}, budget),
        [_part(m) for m in record.entries],
    )


def _block(block: Block, index: int, prefix_blocks: int, prefix_chars_in: int) -> Markup:
    caption = f"{block.label} · {block.chars:,} chars · {block.sha256[:12]}"
    label = el("div", {"class": "label"}, caption)
    if block.text is None:
        body: object = el("pre", {"class": "hashed"}, f"(content not stored: sha256 {block.sha256})")
    elif index == prefix_blocks and prefix_chars_in:
        body = el(
            "pre",
            None,
            el("span", {"class": "cached"}, block.text[:prefix_chars_in]),
            el("span", {"class": "fresh"}, block.text[prefix_chars_in:]),
        )
    else:
        body = el("pre", None, block.text)
    css = (
        "cached"
        if index < prefix_blocks
        else ("partial" if index == prefix_blocks and prefix_chars_in else "fresh")
    )
    big = block.kind in ("tools", "system")
    inner = join(label, body)
    if big:
        inner = el("details", None, el("summary", {"class": "label"}, caption, " (click to show)"), body)
    return el("div", {"class": f"block {css}", "data-kind": block.kind}, inner)


def _request(shown: ShownRequest) -> Markup:
    r, prefix = shown.request, shown.prefix
    total_chars = sum(b.chars for b in r.blocks) or 1
    inside = prefix.chars - sum(b.chars for b in r.blocks[: prefix.blocks])
    if shown.previous_id is None:
        match = f"first {r.purpose} request recorded for this chat: nothing to match"
    else:
        match = (
            f"shared with the previous {r.purpose} request: {prefix.blocks} of {len(r.blocks)} blocks, "
            f"{prefix.chars:,} of {total_chars:,} characters ({prefix.chars / total_chars:.0%})"
        )
    step = f" step {r.step}" if r.step is not None else ""
    return el(
        "section",
        {"class": "request", "data-purpose": r.purpose, "data-prefix-blocks": prefix.blocks},
        el(
            "h3",
            None,
            f"{r.purpose}{step} request · {when(r.at_ms)} · {r.endpoint} · ~{r.estimated_tokens:,} tokens",
        ),
        el("p", {"class": "match"}, match),
        [_block(b, i, prefix.blocks, inside) for i, b in enumerate(r.blocks)],
    )


def wake(detail: WakeDetail, settings: ChatSettings) -> str:
    a = detail.audit
    key = f"{a.platform}:{a.chat_id}"
    c = a.context
    facts = [
        ["chat", el("a", {"href": chat_href(a.platform, a.chat_id)}, key)],
        ["wake-up", f"{a.wake_id} ({a.wake_kind})"],
        ["path", a.path or "-"],
        ["started", f"{when(a.started_at_ms)} · {a.ended_at_ms - a.started_at_ms:,} ms"],
        [
            "context",
            f"seq {c.first_seq}..{c.last_seq}, {c.count} segments, sha256 {c.sha256[:16]}"
            if c.count
            else "empty",
        ],
        ["outcome", a.outcome],
        ["primary", f"{a.steps} steps · sends {a.sends} · reactions {a.reactions} · {_tokens(a.tokens)}"],
        ["models", ", ".join(a.primary_models) or "-"],
    ]
    if a.dry_run:
        withheld = ", ".join(a.withheld) or "nothing"
        called = "" if a.model_called else " · the primary model was not called"
        facts.insert(0, ["dry run", join(_badge("DRY RUN", "dry"), f" withheld: {withheld}{called}")])
    probe_rows = [
        [
            _badge("failed closed", "decision-failed_closed")
            if p.failed_closed
            else _badge(p.decision, f"decision-{p.decision}"),
            el("span", {"class": "reason"}, p.reason),
            p.model_identity or "-",
            _tokens(Tokens().plus(p.usage)),
            f"{p.omitted} omitted" if p.omitted else "",
        ]
        for p in detail.probes
    ]
    probe: object
    if probe_rows:
        probe = _table(["decision", "reason", "model", "tokens", "window"], probe_rows, "probe")
    elif a.probe_decision is not None:
        probe = el("p", {"class": "probe"}, _decision(a), " ", a.probe_reason or "")
    else:
        probe = el("p", {"class": "empty"}, "no probe in this wake-up")
    latency = f"{a.probe_latency_ms:,} ms" if a.probe_latency_ms is not None else "-"
    return _layout(
        f"wake-up {a.wake_id}",
        el("h1", None, "Wake-up ", el("code", None, a.wake_id)),
        _table(None, facts, "facts"),
        el("section", {"id": "probe"}, el("h2", None, f"Probe · {latency}"), probe),
        el(
            "section",
            {"id": "steps"},
            el("h2", None, "Primary steps"),
            [_step(s, settings) for s in detail.steps] or el("p", {"class": "empty"}, "no primary step"),
        ),
        el(
            "section",
            {"id": "requests"},
            el("h2", None, "Requests as the model saw them"),
            el(
                "p",
                {"class": "legend"},
                el(
                    "span",
                    {"class": "cached"},
                    "shared with the previous request of the same kind (cacheable prefix)",
                ),
                " ",
                el("span", {"class": "fresh"}, "new in this request"),
            ),
            [_request(r) for r in detail.requests] or el("p", {"class": "empty"}, "no request recorded"),
        ),
    )


def message(title: str, text: str, status_hint: str = "") -> str:
    return _layout(
        title, el("h1", None, title), el("p", None, text), el("p", {"class": "muted"}, status_hint)
    )


__all__ = ["chat", "chat_href", "index", "message", "wake", "wake_href", "when"]
