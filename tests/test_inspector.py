"""The inspector's pages over a driver's database (docs/inspector.md): a chat's wake-ups, one wake-up's
probe, steps and requests with the shared prefix marked and a broken one's first differing block named,
the link from a sent message, dry-run and hashed-content marks, hostile text escaped and shown as stored
(each string its own bidi isolate, its invisible controls visible), and a database the driver has not
created yet."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from pathlib import Path

import aiohttp
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine
from tests.harness.web import read_page, unisolated
from tests.harness.web import serving as serve_app

from larkbot.canonical.llm import Usage
from larkbot.cli.inspector import Inspector
from larkbot.cli.web import CSP, FAVICON
from larkbot.driver.app import MIGRATIONS
from larkbot.driver.compaction.core.compaction import Summary
from larkbot.driver.memory.core.memory import NewMemory
from larkbot.driver.memory.memories import MemoryStore
from larkbot.driver.read import CacheBreak, DriverReads
from larkbot.driver.tables import sent_messages
from larkbot.driver.tools.core import tools
from larkbot.driver.wake.repository import DriverRepository
from larkbot.runtime.bus import Bus
from larkbot.runtime.config import LarkbotConfig, parse_config
from larkbot.runtime.db import create_engine, migrate
from larkbot.testkit.driver.harness import CHAT_ID, decide, world
from larkbot.testkit.driver.synthetic import response, tool_call

HOSTILE = "<img src=x onerror=alert(1)>"
RLO = "\u202e"


def serving(config: LarkbotConfig, engine: AsyncEngine) -> AbstractAsyncContextManager[str]:
    return serve_app(Inspector(config, DriverReads(engine)).app())


async def _get(http: aiohttp.ClientSession, url: str, status: int = 200) -> str:
    async with http.get(url, allow_redirects=False) as resp:
        assert resp.status == status, (url, resp.status, await resp.text())
        return await resp.text()


def _shown(html: str) -> str:
    """The page's text as a reader sees it (its elements' text, in order)."""
    texts, _ = read_page(html)
    return "".join(t.text for t in texts)


def _engine(w: object) -> AsyncEngine:
    return w.driver.audit.engine  # type: ignore[attr-defined,no-any-return]


async def test_a_chat_and_its_wake_ups_as_the_model_saw_them(
    bus: Bus, nats_url: str, database_url: str
) -> None:
    # Also runs on PostgreSQL when TEST_DATABASE_URL is set.
    async with world(bus, nats_url, database_url) as w:
        await w.quiet_then_asked(
            reason="asked the bot <b>directly</b>",
            answer=response(tool_call(tools.SEND, "c0", text="hi <script>x()</script>")),
            asked="@Lark are you there? <script>alert(2)</script>",
            name=HOSTILE,
        )
        (quiet, spoke) = await w.driver.audit.of_chat("feishu", CHAT_ID)
        async with serving(parse_config({}, {}), _engine(w)) as base, aiohttp.ClientSession() as http:
            index = await _get(http, base + "/")
            chat = await _get(http, f"{base}/chat/feishu/{CHAT_ID}")
            page = await _get(http, f"{base}/wake/{spoke.wake_id}")
            quiet_page = await _get(http, f"{base}/wake/{quiet.wake_id}")
            missing = await _get(http, f"{base}/wake/nope", 404)
            bad = await _get(http, f"{base}/find?platform=feishu", 400)
            unknown = await _get(http, f"{base}/find?platform=feishu&chat={CHAT_ID}&message=om_x", 404)

    assert f'href="/chat/feishu/{CHAT_ID}"' in index
    # The chat: both wake-ups, newest first, with their decisions; the plots; nothing unescaped.
    assert chat.index(spoke.wake_id) < chat.index(quiet.wake_id)
    assert "decision-send_message" in chat
    assert "decision-no_action" in chat
    assert chat.count("<svg") == 2
    assert "asked the bot &lt;b&gt;directly&lt;/b&gt;" in chat
    # The wake-up: probe, step with its tool call and result, and every request with its blocks.
    assert "asked the bot &lt;b&gt;directly&lt;/b&gt;" in page
    assert "send_message" in page
    assert "hi &lt;script&gt;x()&lt;/script&gt;" in page
    assert page.count('class="request"') == 2  # the probe and the primary
    assert "are you there?" in page
    # The second wake-up's probe repeats the first's tools, system prompt and first message.
    probe_section = page[page.index('data-purpose="probe"') :]
    assert 'class="block cached"' in probe_section
    assert "shared with the previous probe request" in page
    assert "first primary request recorded for this chat" in page
    # The first wake-up had nothing before it.
    assert "first probe request recorded for this chat" in quiet_page
    assert "no primary step" in quiet_page
    for body in (index, chat, page, quiet_page):
        assert "<script>" not in body
        assert "<img" not in body
        assert "<b>" not in body
    assert "No such wake-up" in missing
    assert "are required" in bad
    assert "No recorded wake-up sent message om_x in feishu:" in _shown(unknown)


async def test_strings_from_a_chat_are_isolated_and_their_bidi_controls_shown(
    bus: Bus, nats_url: str, tmp_path: Path
) -> None:
    # Each carries a right-to-left override (shown as it acts, "gnp.exe" reads "exe.png") and a word of a
    # right-to-left script, which must not reorder what stands beside it.
    async with world(bus, nats_url, f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}") as w:
        await w.quiet_then_asked(
            reason=f"{RLO}<b/>dlob<b> desrever שלום-reason",
            answer=response(tool_call(tools.SEND, "c0", text=f"hi {RLO}שלום-reply")),
            asked=f"@Lark {RLO}שלום-asked?",
            name=f"Eve {RLO}gnp.exe שלום-name",
        )
        (_quiet, spoke) = await w.driver.audit.of_chat("feishu", CHAT_ID)
        async with serving(parse_config({}, {}), _engine(w)) as base, aiohttp.ClientSession() as http:
            pages = {
                "index": await _get(http, base + "/"),
                "chat": await _get(http, f"{base}/chat/feishu/{CHAT_ID}"),
                "wake": await _get(http, f"{base}/wake/{spoke.wake_id}"),
                # What a request names is shown too: a crafted link must not reorder the page.
                "missing": await _get(http, f"{base}/wake/{RLO}שלום-id", 404),
                "unknown": await _get(
                    http, f"{base}/find?platform=feishu&chat={CHAT_ID}&message={RLO}שלום-message", 404
                ),
                "chat-link": await _get(http, f"{base}/chat/{RLO}שלום-platform/x"),
            }
    for name, html in pages.items():
        texts, attributes = read_page(html)
        assert all(RLO not in t.text for t in texts), name
        assert all(RLO not in value for _tag, _name, value in attributes), name
        assert unisolated(html, "שלום") == [], name
        assert unisolated(html, "⟨U+202E⟩") == [], name
        # The control is drawn as its marker, in a span of its own (left to right, styled apart); the page's
        # title holds text only.
        markers = [t for t in texts if "⟨U+202E⟩" in t.text and not t.inside("title")]
        assert markers or name == "index", name  # the chats list names no member, reason or text
        for marker in markers:
            assert marker.text == "⟨U+202E⟩", (name, marker)
            assert marker.inside("span", **{"class": "ctl", "dir": "ltr"}), (name, marker)
        assert f'<link rel="icon" href="{FAVICON}"' in html, name
    assert "⟨U+202E⟩<b/>dlob<b> desrever שלום-reason" in _shown(pages["chat"])
    wake = _shown(pages["wake"])
    assert "⟨U+202E⟩<b/>dlob<b> desrever שלום-reason" in wake  # the probe's reason
    assert "Eve ⟨U+202E⟩gnp.exe שלום-name" in wake  # the member's name in the rendered messages
    assert "hi ⟨U+202E⟩שלום-reply" in wake  # the tool call's arguments
    assert "No wake-up '⟨U+202E⟩שלום-id' is recorded." in _shown(pages["missing"])
    assert "sent message ⟨U+202E⟩שלום-message in feishu:" in _shown(pages["unknown"])
    assert "⟨U+202E⟩שלום-platform:x" in _shown(pages["chat-link"])


async def test_the_pages_icon_is_served_under_the_strict_csp(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}")
    try:
        async with (
            serving(parse_config({}, {}), engine) as base,
            aiohttp.ClientSession() as http,
            http.get(base + "/favicon.ico") as resp,
        ):
            assert resp.status == 200
            assert str(resp.url) == base + FAVICON
            assert resp.content_type == "image/svg+xml"
            assert resp.headers["Content-Security-Policy"] == CSP
    finally:
        await engine.dispose()


async def test_a_sent_message_leads_to_its_wake_up(bus: Bus, nats_url: str, tmp_path: Path) -> None:
    async with world(bus, nats_url, f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}") as w:
        w.probe_answers.append(decide("send_message", "asked"))
        w.primary_answers.append(response(tool_call(tools.SEND, "c0", text="hi!")))
        await w.say(1, 0, text="@Lark hi", mentions_me=True)
        await w.tick(1000)
        await w.synced()
        (record,) = await w.driver.audit.of_chat("feishu", CHAT_ID)
        store = w.driver.requests
        (request, *_) = await store.of_wake(record.wake_id)
        sent = await _sent_ids(_engine(w), record.wake_id)
        find = f"/find?platform=feishu&chat={CHAT_ID}&message={sent[0]}"
        async with (
            serving(parse_config({}, {}), _engine(w)) as base,
            aiohttp.ClientSession() as http,
            http.get(base + find, allow_redirects=False) as resp,
        ):
            assert resp.status == 303
            assert resp.headers["Location"] == f"/wake/{record.wake_id}"
    assert request.wake_id == record.wake_id


async def test_a_broken_prefix_names_its_first_differing_block_and_why(
    bus: Bus, nats_url: str, tmp_path: Path
) -> None:
    async with world(bus, nats_url, f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}") as w:
        for n, at in ((1, 0), (2, 3000)):
            if n == 2:
                # What a persona edit does to the system prompt.
                w.chat.persona = replace(w.chat.persona, texts=("You are terse.",))
            w.probe_answers.append(decide("send_message", "asked"))
            w.primary_answers.append(
                response(tool_call(tools.SEND, f"c{n}", text="on it", still_working=True))
            )
            w.primary_answers.append(response(tool_call(tools.END, f"e{n}")))
            await w.say(n, at, text=f"@Lark question {n}", mentions_me=True)
            await w.tick(at + 1000)
        first, second = await w.driver.audit.of_chat("feishu", CHAT_ID)
        reads = DriverReads(_engine(w))
        detail = await reads.wake(second.wake_id)
        async with serving(parse_config({}, {}), _engine(w)) as base, aiohttp.ClientSession() as http:
            first_page = await _get(http, f"{base}/wake/{first.wake_id}")
            page = await _get(http, f"{base}/wake/{second.wake_id}")
    assert detail is not None
    # The probe is not watched; the first step broke at the system prompt; the second extends it.
    assert [(s.request.purpose, s.cache_break) for s in detail.requests] == [
        ("probe", None),
        ("primary", CacheBreak("system", 1, "system", "system")),
        ("primary", None),
    ]
    assert 'class="break"' not in first_page
    assert page.count('class="break"') == 1
    shown = _shown(page)
    assert "prefix broken at block 1 (system) · system: the system prompt changed" in shown
    assert "unexpected" in shown


async def test_a_step_answered_by_a_fallback_endpoint_says_so(
    bus: Bus, nats_url: str, tmp_path: Path
) -> None:
    fell_back = response(tool_call(tools.SEND, "c1", text="on it")).model_copy(
        update={"fallback_from": ("main",), "endpoint": "backup"}
    )
    async with world(bus, nats_url, f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}") as w:
        w.probe_answers.append(decide("send_message", "asked"))
        w.primary_answers.append(fell_back)
        await w.say(1, 0, text="@Lark question", mentions_me=True)
        await w.tick(1000)
        (record,) = await w.driver.audit.of_chat("feishu", CHAT_ID)
        async with serving(parse_config({}, {}), _engine(w)) as base, aiohttp.ClientSession() as http:
            page = await _get(http, f"{base}/wake/{record.wake_id}")
    assert "fallback from main" in _shown(page)


async def _sent_ids(engine: AsyncEngine, wake_id: str) -> list[str]:
    async with engine.connect() as conn:
        rows = (
            await conn.execute(select(sent_messages.c.message_id).where(sent_messages.c.wake_id == wake_id))
        ).all()
    assert rows, "the send was not recorded"
    return [r[0] for r in rows]


async def test_dry_runs_and_hashed_content_are_marked(bus: Bus, nats_url: str, tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}"
    async with world(bus, nats_url, url, dry_run=True, audit={"store_content": False}) as w:
        w.probe_answers.append(decide("send_message", "Alice's secret plan"))
        w.primary_answers.append(response(tool_call(tools.SEND, "c0", text="hi!")))
        await w.say(1, 0, text="@Lark the secret plan", mentions_me=True)
        await w.tick(1000)
        await w.synced()
        (record,) = await w.driver.audit.of_chat("feishu", CHAT_ID)
        async with serving(parse_config({}, {}), _engine(w)) as base, aiohttp.ClientSession() as http:
            index = await _get(http, base + "/")
            page = await _get(http, f"{base}/wake/{record.wake_id}")
    assert "1 dry run" in index
    assert "DRY RUN" in page
    assert "withheld: typing, send_message" in page
    assert "content not stored: sha256" in page
    assert "the secret plan" not in page.split('id="requests"')[1]  # the blocks hold hashes only


async def test_a_database_the_driver_has_not_created_is_reported(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}")
    try:
        async with serving(parse_config({}, {}), engine) as base, aiohttp.ClientSession() as http:
            body = await _get(http, base + "/", 503)
            ready = await _get(http, base + "/readyz")
    finally:
        await engine.dispose()
    assert "Driver database not ready" in body
    assert '"ok": true' in ready


async def test_compactions_and_memories_learnt_in_the_chat_are_listed(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}")
    try:
        await migrate(engine, MIGRATIONS)
        summary = Summary(
            platform="feishu",
            chat_id=CHAT_ID,
            cursor=120,
            turns_from_ms=5_000,
            text="Alice planned the <b>trip</b>; Bob asked about tickets.",
            created_at_ms=1_700_000_000_000,
            model_identity="fake-compaction",
            usage=Usage(input_tokens=900, output_tokens=40),
            segments=118,
            turns=6,
            tokens_before=31_000,
            tokens_after=2_400,
        )
        await DriverRepository(engine).add_summary(summary)
        memories = MemoryStore(engine)
        fact = NewMemory("feishu", "ou_alice", "likes <i>green</i> tea", ("om_1",), CHAT_ID, "group", "high")
        await memories.save(fact, now_ms=1_700_000_000_000)
        elsewhere = NewMemory(
            "feishu", "ou_bob", "from another chat", ("om_2",), "oc_other", "group", "normal"
        )
        await memories.save(elsewhere, now_ms=1_700_000_000_000)
        async with serving(parse_config({}, {}), engine) as base, aiohttp.ClientSession() as http:
            chat = await _get(http, f"{base}/chat/feishu/{CHAT_ID}")
    finally:
        await engine.dispose()
    assert "31,000 → 2,400" in chat
    assert "Alice planned the &lt;b&gt;trip&lt;/b&gt;; Bob asked about tickets." in chat
    assert "likes &lt;i&gt;green&lt;/i&gt; tea" in chat
    assert "ou_alice" in chat
    assert "from another chat" not in chat
    assert "none recorded" in chat  # no wake-ups: the rest of the page still renders
