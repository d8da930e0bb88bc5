"""The playground and the inspector in a real browser (Debian's headless Chromium, driven by playwright):
the real ingress-telegram, pipeline, driver and gateway behind the playground's fake Bot API and demo model,
and ``larkbot inspector`` as a process over the driver's database. Every test runs with no console error
and no page error (a missing icon, a refused style or script, a failing script).

With ``LARKBOT_SCREENSHOTS=<dir>`` the tests also save the screenshots shown in the README
(``LARKBOT_SCREENSHOTS=docs/img .venv/bin/pytest tests/e2e/test_e2e_browser.py``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from playwright.async_api import async_playwright
from tests.harness.web import serving

from larkbot.cli.inspector import Inspector
from larkbot.cli.playground import PLAYGROUND_CHAT_ID, Playground
from larkbot.cli.playground_group import MAX_NAME
from larkbot.driver.app import MIGRATIONS
from larkbot.driver.audit.audit import AuditStore
from larkbot.driver.audit.core.audit import ContextRange, Tokens, WakeAudit
from larkbot.driver.read import DriverReads
from larkbot.driver.wake.core.records import ProbeRecord
from larkbot.driver.wake.repository import DriverRepository
from larkbot.runtime.config import parse_config
from larkbot.runtime.db import create_engine, migrate
from larkbot.testkit.media import samples
from larkbot.testkit.stack import Stack, free_port, until

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium is not installed (Debian package chromium; .ci/run installs it)",
)
#: Flags for a machine with no network beyond loopback (background fetches would be refused, noisily).
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
)
SERVICES = ("llm-gateway", "media", "pipeline", "driver", "ingress-telegram")
WAIT_MS = 90_000
HOSTILE_NAME = "<img src=x onerror=alert(1)>"
HOSTILE_TEXT = "<script>alert('x')</script> \"quoted\" & <b>bold</b> @LarkBot?"
#: A right-to-left override: shown as it acts, ``gnp.exe`` reads ``exe.png`` and this reason
#: ``reversed <b>bold</b>``.
RLO, RLO_SHOWN = "\u202e", "⟨U+202E⟩"
BIDI_NAME = f"Eve {RLO}gnp.exe"
BIDI_TEXT = f"{RLO}<b/>dlob<b> desrever"
#: One unbroken word of 278 characters (no hyphen: a line may break after one), and a name as long as the
#: playground takes, of wide letters.
LONG_WORD = "https://example.org/?q=" + "0123456789abcdefghijklmnopqrstuvwxyz" * 7 + "end"
LONG_NAME = "W" * MAX_NAME
VIEWPORT = {"width": 1280, "height": 860}
SHOTS = os.environ.get("LARKBOT_SCREENSHOTS")


@dataclass
class Site:
    playground: str
    inspector: str
    playground_app: Playground


def _config(root: Path, telegram: int, llm: int, inspector: int) -> dict[str, Any]:
    endpoint = {
        "format": "openai-chat",
        "base_url": f"http://127.0.0.1:{llm}/v1",
        "model": "playground",
        "fake": True,
        "timeout_s": 20,
    }
    return {
        "data_dir": str(root / "data"),
        "telegram": {
            "bot_token": "7000000001:AAFakeTokenForTestsOnly_abcdefghijklmno",
            "api_base": f"http://127.0.0.1:{telegram}",
            "polling_timeout_s": 2,
        },
        "llm": {
            "endpoints": {
                "playground": endpoint,
                "speech": {**endpoint, "format": "openai-transcription", "model": "playground-whisper"},
            },
            **{role: "playground" for role in ("probe", "primary", "compaction", "vision", "memory")},
            "transcription": "speech",
        },
        "inspector": {"port": inspector},
        "chats": {
            "default": {"initial_delay_ms": 200, "probe_timeout_s": 30, "turn_deadline_s": 60},
            f"telegram:{PLAYGROUND_CHAT_ID}": {"display_name": "LarkBot playground"},
        },
    }


@pytest.fixture(scope="module")
async def site(tmp_path_factory: pytest.TempPathFactory, nats_url: str) -> AsyncIterator[Site]:
    root = tmp_path_factory.mktemp("browser")
    telegram, llm, control, inspector = free_port(), free_port(), free_port(), free_port()
    raw = _config(root, telegram, llm, inspector)
    stack = Stack(root, nats_url, raw)
    stack.add(*SERVICES)
    playground = Playground(parse_config(raw, {}))
    await playground.start(telegram, llm, control)
    viewer: asyncio.subprocess.Process | None = None
    try:
        await stack.up()
        # Not a service of the stack's configuration: `larkbot inspector` on its own, as `larkbot up` runs it.
        with (root / "logs" / "inspector.log").open("ab") as log:
            viewer = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "larkbot.cli", "inspector", stdout=log, stderr=log, env=stack.env()
            )
        await _until_ready(f"http://127.0.0.1:{inspector}/readyz", viewer)
        yield Site(playground.control_url, f"http://127.0.0.1:{inspector}", playground)
    finally:
        if viewer is not None and viewer.returncode is None:
            viewer.terminate()
            await viewer.wait()
        await stack.down()
        await playground.stop()


async def _until_ready(url: str, proc: asyncio.subprocess.Process) -> None:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http:

        async def ready() -> bool:
            assert proc.returncode is None, f"the inspector exited with {proc.returncode}"
            try:
                async with http.get(url) as resp:
                    return resp.status == 200
            except (aiohttp.ClientError, TimeoutError):
                return False

        await until(ready, "the inspector's /readyz", timeout_s=120)


@pytest.fixture
async def page() -> AsyncIterator[Any]:
    """A tab of a 1,280 px window; the test fails on any console error or page error it logged."""
    problems: list[str] = []
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))
        try:
            context = await browser.new_context(viewport=VIEWPORT)
            tab = await context.new_page()
            tab.on("console", lambda m: problems.append(f"console {m.type}: {m.text} ({m.location})")
                   if m.type == "error" else None)  # fmt: skip
            tab.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
            yield tab
        finally:
            await browser.close()
    assert problems == []


def _shot(name: str) -> str | None:
    if not SHOTS:
        return None
    Path(SHOTS).mkdir(parents=True, exist_ok=True)
    return str(Path(SHOTS) / name)


async def _bot_replies(page: Any, count: int) -> Any:
    """The ``count``-th bot message, once the page shows it."""
    replies = page.locator("li.msg.bot")
    await replies.nth(count - 1).wait_for(timeout=WAIT_MS)
    return replies.nth(count - 1)


async def _open_wake_up(page: Any, href: str) -> None:
    """The inspector link of a bot message: the wake-up is recorded when it ends, a moment after the send
    (until then the link answers 404 and says so)."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:

        async def recorded() -> bool:
            async with http.get(href, allow_redirects=False) as resp:
                return resp.status == 303

        await until(recorded, f"{href} to lead to a recorded wake-up", timeout_s=WAIT_MS / 1000)
    answer = await page.goto(href)
    assert answer is not None
    assert answer.status == 200


async def test_a_member_mentions_the_bot_and_the_inspector_shows_why_it_spoke(site: Site, page: Any) -> None:
    await page.goto(site.playground)
    await page.locator("#model-banner").wait_for()
    assert "demo script" in (await page.locator("#model-banner").inner_text())
    username = await page.locator("#mention-bot").get_attribute("data-username")
    await page.select_option("#member", "Alice")
    await page.fill("#composer", f"hello @{username}, what is new?")
    await page.click("#send")

    mine = page.locator("li.msg.member", has_text="what is new?")
    await mine.wait_for(timeout=WAIT_MS)
    assert await mine.get_attribute("data-from") == "Alice"
    reply = await _bot_replies(page, 1)
    assert "what is new?" in await reply.locator(".text").inner_text()
    # A second wake-up: its requests repeat the first's prefix (tools, system prompt, the conversation).
    await page.select_option("#member", "Bob")
    await page.fill("#composer", f"@{username} and what did Alice ask?")
    await page.click("#send")
    reply = await _bot_replies(page, 2)
    assert "what did Alice ask?" in await reply.locator(".text").inner_text()
    if shot := _shot("playground.png"):
        await page.screenshot(path=shot)

    href = await reply.locator("a.inspect").get_attribute("href")
    assert href is not None
    assert href.startswith(site.inspector + "/find?platform=telegram&chat=")
    await _open_wake_up(page, href)
    assert "/wake/" in page.url

    # The probe's decision and reason, as the demo script gave them.
    probe = page.locator("#probe")
    assert await probe.locator(".badge.decision-send_message").count() == 1
    assert "mentioned or asked a question" in await probe.inner_text()
    # The rendered messages, as the model saw them, in the probe's and the primary's requests.
    said = page.locator(".request .block", has_text="what is new?")
    assert await said.count() >= 2
    assert "<message" in await said.first.inner_text()
    # The primary request shares its start with the previous wake-up's: marked as the cached prefix.
    primary = page.locator('.request[data-purpose="primary"]')
    assert await primary.count() == 1
    cached = await primary.locator(".block.cached").count()
    assert cached >= 3, cached  # the tools, the system prompt and the conversation so far at least
    assert await primary.locator(".block.fresh").count() >= 1  # at least the late-binding message
    assert "shared with the previous primary request" in await primary.locator(".match").inner_text()
    if shot := _shot("inspector-request.png"):
        await primary.screenshot(path=shot)
    assert await page.locator("#steps .step").count() == 1
    assert "send_message" in await page.locator("#steps").inner_text()
    if shot := _shot("inspector-wake-up.png"):
        await page.screenshot(path=shot, full_page=False)

    await page.click("table.facts a")  # the chat
    assert await page.locator("svg.plot").count() == 2
    assert await page.locator("table.wakeups tbody tr").count() >= 1
    if shot := _shot("inspector-chat.png"):
        await page.screenshot(path=shot, full_page=False)


async def test_a_voice_message_is_played_in_the_page_and_heard_by_the_bot(site: Site, page: Any) -> None:
    """The playground's Voice button posts an OGG/Opus recording as a Telegram voice message; the media
    worker transcribes it through the fake model's /audio/transcriptions, and the request the model got
    shows the transcript inside the message."""
    await page.goto(site.playground)
    username = await page.locator("#mention-bot").get_attribute("data-username")
    await page.select_option("#member", "Carol")
    replies = await page.locator("li.msg.bot").count()
    await page.fill("#composer", f"@{username} listen to this")
    note = samples.voice_note(2.0, frequency=392.0)
    await page.set_input_files(
        "#voice-upload", files=[{"name": "note.ogg", "mimeType": "audio/ogg", "buffer": note}]
    )
    mine = page.locator("li.msg.member", has_text="listen to this")
    await mine.wait_for(timeout=WAIT_MS)
    assert "Voice message · 2 s" in await mine.inner_text()
    assert await mine.locator("audio.recording").count() == 1
    reply = await _bot_replies(page, replies + 1)
    href = await reply.locator("a.inspect").get_attribute("href")
    assert href is not None
    await _open_wake_up(page, href)
    heard = page.locator(".request .block", has_text="Fake transcript of 2.0 s of audio").first
    await heard.wait_for(timeout=WAIT_MS)
    assert 'type="voice" mime="audio/ogg" duration="2s"' in await heard.inner_text()


async def test_hostile_names_and_texts_are_shown_as_text_and_run_nothing(site: Site, page: Any) -> None:
    dialogs: list[str] = []

    async def dismiss(dialog: Any) -> None:
        dialogs.append(dialog.message)
        await dialog.dismiss()

    page.on("dialog", dismiss)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    await page.goto(site.playground)
    await page.locator("#composer").wait_for()
    before = await page.locator("li.msg.bot").count()
    await page.fill("#new-member", HOSTILE_NAME)
    await page.click("#add-member")
    await page.select_option("#member", HOSTILE_NAME)
    await page.fill("#composer", HOSTILE_TEXT)
    await page.click("#send")

    said = page.locator("li.msg.member", has_text="alert('x')")
    await said.wait_for(timeout=WAIT_MS)
    assert await said.get_attribute("data-from") == HOSTILE_NAME
    assert await said.locator(".author").inner_text() == HOSTILE_NAME
    assert await said.locator(".text").inner_text() == HOSTILE_TEXT
    reply = await _bot_replies(page, before + 1)
    assert "<script>alert('x')</script>" in await reply.locator(".text").inner_text()
    assert await page.locator("#timeline img").count() == 0
    assert await page.locator("#timeline script, #timeline b").count() == 0

    href = await reply.locator("a.inspect").get_attribute("href")
    assert href is not None
    await _open_wake_up(page, href)
    shown = page.locator(".request .block", has_text="alert('x')")
    assert await shown.count() >= 1
    text = await shown.first.inner_text()
    assert "onerror=alert(1)" in text  # the member's name is in the rendered message, as characters
    assert await page.locator("main img, main script, main b").count() == 0
    await page.click("table.facts a")
    assert await page.locator("main img, main script").count() == 0
    assert dialogs == []
    assert errors == []


# -- shown as stored, within the window ------------------------------------------------------------------

#: Of the (one) element ``selector`` matches, read at one moment (the playground redraws its timeline as it
#: polls): each character's box, in DOM order (those drawn: a bidi control itself has no width); and each
#: control marker's text, width and background.
_DRAWN = """(selector) => {
  const [element, ...others] = document.querySelectorAll(selector);
  if (!element || others.length) return null;
  const chars = [];
  const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let i = 0; i < node.data.length; i++) {
      const range = document.createRange();
      range.setStart(node, i);
      range.setEnd(node, i + 1);
      const box = range.getBoundingClientRect();
      if (box.width > 0) chars.push([node.data[i], box.left, box.top, box.bottom]);
    }
  }
  const markers = Array.from(element.querySelectorAll(".ctl"), (e) => [
    e.textContent, e.getBoundingClientRect().width, getComputedStyle(e).backgroundColor,
  ]);
  return [chars, markers];
}"""


async def _assert_shown_as_stored(page: Any, selector: str, expected: str) -> None:
    """The characters of the element are drawn left to right, line after line, in the order they are
    stored: what a reader sees is ``expected``, nothing reordered; and the one control character is drawn
    as its marker, visibly and styled apart from the text."""
    found = await page.evaluate(_DRAWN, selector)
    assert found is not None, f"not exactly one {selector}"
    chars, markers = found
    drawn = "".join(c[0] for c in chars)
    assert drawn.replace(" ", "") == expected.replace(" ", ""), drawn  # a space ending a line is not drawn
    line_bottom, left = float("-inf"), float("-inf")
    for char, x, top, bottom in chars:
        if top >= line_bottom - 1:  # below the line so far: a new line starts
            line_bottom, left = bottom, float("-inf")
        assert x > left, f"{char!r} is drawn left of the character stored before it: {chars}"
        left, line_bottom = x, max(line_bottom, bottom)
    ((text, width, background),) = markers
    assert text == RLO_SHOWN
    assert width > 10
    assert background not in ("rgba(0, 0, 0, 0)", "transparent")


#: The page's width and the window's, and each match's horizontal extent, all read at one moment (the
#: playground redraws its timeline as it polls).
_EXTENTS = """(selectors) => [
  document.documentElement.scrollWidth,
  document.documentElement.clientWidth,
  selectors.map((s) => Array.from(document.querySelectorAll(s), (e) => {
    const box = e.getBoundingClientRect();
    return [box.left, box.right, box.width];
  })),
]"""


async def _assert_within_the_window(page: Any, *selectors: str) -> None:
    """No horizontal scrolling, and each element (every match of each selector) inside the window."""
    scroll, window, extents = await page.evaluate(_EXTENTS, list(selectors))
    assert scroll <= window <= VIEWPORT["width"], (scroll, window)
    for selector, boxes in zip(selectors, extents, strict=True):
        assert boxes, f"nothing matches {selector}"
        for left, right, width in boxes:
            assert width > 0, selector
            assert left >= 0, (selector, left)
            assert right <= window, (selector, right)


async def test_bidi_controls_and_long_names_are_shown_as_stored_within_the_window(
    site: Site, page: Any
) -> None:
    await page.goto(site.playground)
    await page.locator("#composer").wait_for()
    username = await page.locator("#mention-bot").get_attribute("data-username")
    before = await page.locator("li.msg.bot").count()
    await page.fill("#new-member", BIDI_NAME)
    await page.click("#add-member")
    await page.select_option("#member", BIDI_NAME)
    await page.fill("#composer", BIDI_TEXT)
    await page.click("#send")

    said = page.locator("li.msg.member", has_text="dlob<b> desrever")
    await said.wait_for(timeout=WAIT_MS)
    assert await said.get_attribute("data-from") == BIDI_NAME  # the data stays as it is
    assert await said.locator(".author").inner_text() == f"Eve {RLO_SHOWN}gnp.exe"
    assert await said.locator(".text").inner_text() == f"{RLO_SHOWN}<b/>dlob<b> desrever"
    mine = f'li.msg.member[data-from="{BIDI_NAME}"]'
    await _assert_shown_as_stored(page, f"{mine} .author", f"Eve {RLO_SHOWN}gnp.exe")
    await _assert_shown_as_stored(page, f"{mine} .text", f"{RLO_SHOWN}<b/>dlob<b> desrever")
    # An option holds text only: the marker as text (isolated by the invisible LRI…PDI around it).
    option = await page.locator("#member option:checked").text_content()
    assert option is not None
    assert option.translate(dict.fromkeys(map(ord, "\u2066\u2068\u2069"))) == f"Eve {RLO_SHOWN}gnp.exe"

    # The longest name the playground takes, posting an unbroken 278-character word; then a reply to it.
    await page.fill("#new-member", LONG_NAME)
    await page.click("#add-member")
    await page.select_option("#member", LONG_NAME)
    await page.fill("#composer", f"@{username} {LONG_WORD}")
    await page.click("#send")
    long = page.locator(f'li.msg.member[data-from="{LONG_NAME}"]')
    await long.wait_for(timeout=WAIT_MS)
    await long.hover()
    await long.locator(".act-reply").click()
    await page.locator("#context-bar").wait_for()
    controls = (
        "#member",
        "#new-member",
        "#add-member",
        "#composer",
        "#mention-bot",
        "#upload-label",
        "#send",
    )
    await _assert_within_the_window(page, *controls, "#context-bar", "li.msg .author", "li.msg .text")
    reply = await _bot_replies(page, before + 1)
    await _assert_within_the_window(page, *controls, "li.msg .author", "li.msg .text")

    # The wake-up shows both members' names, and the word, as stored, within the window.
    href = await reply.locator("a.inspect").get_attribute("href")
    assert href is not None
    await _open_wake_up(page, href)
    said_block = page.locator(".request .block", has_text="desrever").first
    assert f"Eve {RLO_SHOWN}gnp.exe" in await said_block.inner_text()
    assert await said_block.locator(".ctl").count() >= 2
    await _assert_within_the_window(page, "main", "table.facts", ".request", "#steps .step")
    await page.click("table.facts a")  # the chat
    await _assert_within_the_window(page, "main", "table.wakeups")


async def _hostile_wake_up(url: str, reason: str) -> str:
    """A driver database holding one wake-up whose probe gave ``reason``; returns its id."""
    engine = create_engine(url)
    try:
        await migrate(engine, MIGRATIONS)
        at = 1_700_000_000_000
        wake_id = "w-hostile-reason"
        await AuditStore(engine).add(
            WakeAudit(
                platform="telegram", chat_id="-100123", wake_id=wake_id, wake_kind="messages",
                path="probe", started_at_ms=at, ended_at_ms=at + 900, context=ContextRange.of(()),
                probe_decision="no_action", probe_reason=reason, probe_model="probe-model",
                probe_tokens=Tokens(120, 0, 0, 9), probe_latency_ms=300, steps=0, sends=0, reactions=0,
                tool_calls=(), tokens=Tokens(), primary_latency_ms=None, primary_models=(), outcome="silent",
                dry_run=False, model_called=True, withheld=(), content_hashed=False,
            )
        )  # fmt: skip
        await DriverRepository(engine).add_probe(
            ProbeRecord(
                platform="telegram", chat_id="-100123", wake_id=wake_id, requested_at_ms=at,
                decision="no_action", reason=reason, activated=False, failed_closed=False,
                model_identity="probe-model", usage=None, window_start=None, omitted=0,
            )
        )  # fmt: skip
    finally:
        await engine.dispose()
    return wake_id


async def test_a_reason_with_a_bidi_control_and_a_long_word_is_shown_as_stored_within_the_window(
    tmp_path: Path, page: Any
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'driver.db'}"
    reason = f"{BIDI_TEXT} {LONG_WORD}"
    wake_id = await _hostile_wake_up(url, reason)
    shown = f"{RLO_SHOWN}<b/>dlob<b> desrever {LONG_WORD}"
    engine = create_engine(url)
    try:
        async with serving(Inspector(parse_config({}, {}), DriverReads(engine)).app()) as base:
            await page.goto(base + "/")  # the first page a browser opens: it asks for the icon
            await page.click("table.chats a")
            assert await page.locator("table.wakeups .reason").inner_text() == shown
            await _assert_shown_as_stored(page, "table.wakeups .reason", shown)
            await _assert_within_the_window(page, "main", "table.wakeups", "table.wakeups .reason")

            await page.click("table.wakeups a.wake")
            assert page.url == f"{base}/wake/{wake_id}"
            assert await page.locator("table.probe .reason").inner_text() == shown
            await _assert_shown_as_stored(page, "table.probe .reason", shown)
            await _assert_within_the_window(page, "main", "table.facts", "table.probe", "table.probe .reason")
    finally:
        await engine.dispose()
