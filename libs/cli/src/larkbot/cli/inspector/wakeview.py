"""One wake-up's page: its record, the probe, the primary's steps, and every model request as the model
saw it, with the prefix shared with the chat's previous request of its kind marked (docs/inspector.md)."""

from __future__ import annotations

import json

from larkbot.canonical.llm import AssistantMessage, Message, TextPart, ToolCallPart, ToolResultMessage
from larkbot.driver.read import Block, CacheBreak, ShownRequest, Tokens, TurnRecord, WakeDetail
from larkbot.runtime.config import ChatSettings

from ..web import Markup, el, join
from .views import badge, chat_href, chat_key, decision, layout, table, tokens_text, when


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


def _listed(names: tuple[str, ...]) -> Markup:
    """Names separated by commas, each shown as its own string."""
    parts: list[str] = []
    for name in names:
        parts += [", ", name] if parts else [name]
    return join(parts)


def _step(record: TurnRecord, settings: ChatSettings) -> Markup:
    usage = record.usage
    t = Tokens(usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens, usage.output_tokens)
    flags = [
        badge("pending", "pending") if record.pending else "",
        badge("sent", "sent") if record.sent else "",
        badge("reacted", "sent") if record.reacted else "",
        badge(record.mode, "mode") if record.mode != "normal" else "",
        badge("shell tools exposed", "shell") if record.shell_tools_exposed else "",
        badge(f"fallback from {', '.join(record.fallback_from)}", "fallback") if record.fallback_from else "",
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
            f"step {record.step} · ",
            record.model_identity,
            f" · {when(record.requested_at_ms)} ",
            flags,
        ),
        el("p", {"class": "tokens"}, tokens_text(t)),
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


#: Why a primary request's prefix broke, by cause (docs/driver.md "Cache-break watch").
_WHY = {
    "model": "the request went to another endpoint: a provider caches per model",
    "tool_offer": "other tools were offered (a wrap-up or react-only step, the shell gate, a chat switch)",
    "tools": "a tool's definition changed (or the tools changed and their texts are not stored)",
    "system": "the system prompt changed (the bot's name, the persona texts or the memory switch)",
    "compaction": "a compaction was applied in between: the history starts from the new summary",
    "trimmed": "the history is trimmed and its start moved",
    "reasoning": "an older turn's reasoning is no longer replayed",
    "history": "a member's earlier message was edited or deleted",
    "unexplained": "the bot's own earlier turn differs, which nothing in the design explains",
}


def _broken(found: CacheBreak) -> Markup:
    verdict = (
        badge("expected", "break-expected") if found.expected else badge("unexpected", "break-unexpected")
    )
    return el(
        "p",
        {"class": "break", "data-cause": found.cause},
        "prefix broken at block ",
        str(found.index),
        " (",
        found.label,
        f") · {found.cause}: {_WHY[found.cause]} ",
        verdict,
    )


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
            f"{r.purpose}{step} request · {when(r.at_ms)} · ",
            r.endpoint,
            f" · ~{r.estimated_tokens:,} tokens",
        ),
        el("p", {"class": "match"}, match),
        _broken(shown.cache_break) if shown.cache_break is not None else "",
        [_block(b, i, prefix.blocks, inside) for i, b in enumerate(r.blocks)],
    )


def wake(detail: WakeDetail, settings: ChatSettings) -> str:
    a = detail.audit
    c = a.context
    facts = [
        ["chat", el("a", {"href": chat_href(a.platform, a.chat_id)}, chat_key(a.platform, a.chat_id))],
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
        ["primary", f"{a.steps} steps · sends {a.sends} · reactions {a.reactions} · {tokens_text(a.tokens)}"],
        ["models", _listed(a.primary_models) or "-"],
    ]
    if a.dry_run:
        withheld = ", ".join(a.withheld) or "nothing"
        called = "" if a.model_called else " · the primary model was not called"
        facts.insert(0, ["dry run", join(badge("DRY RUN", "dry"), f" withheld: {withheld}{called}")])
    probe_rows = [
        [
            badge("failed closed", "decision-failed_closed")
            if p.failed_closed
            else badge(p.decision, f"decision-{p.decision}"),
            el("span", {"class": "reason"}, p.reason),
            p.model_identity or "-",
            tokens_text(Tokens().plus(p.usage)),
            f"{p.omitted} omitted" if p.omitted else "",
        ]
        for p in detail.probes
    ]
    probe: object
    if probe_rows:
        probe = table(["decision", "reason", "model", "tokens", "window"], probe_rows, "probe")
    elif a.probe_decision is not None:
        probe = el("p", {"class": "probe"}, decision(a), " ", a.probe_reason or "")
    else:
        probe = el("p", {"class": "empty"}, "no probe in this wake-up")
    latency = f"{a.probe_latency_ms:,} ms" if a.probe_latency_ms is not None else "-"
    return layout(
        f"wake-up {a.wake_id}",
        el("h1", None, "Wake-up ", el("code", None, a.wake_id)),
        table(None, facts, "facts"),
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


__all__ = ["wake"]
