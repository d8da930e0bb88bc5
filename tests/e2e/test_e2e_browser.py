"""The playground and the inspector in a real browser (Debian's headless Chromium, driven by playwright):
the real ingress-telegram, pipeline, driver and gateway behind the playground's fake Bot API and demo model,
and ``larkbot inspector`` as a process over the driver's database.

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
from tests.harness.stack import Stack, free_port
from tests.harness.world import until

from larkbot.cli.playground import PLAYGROUND_CHAT_ID, Playground
from larkbot.runtime.config import parse_config

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
SERVICES = ("llm-gateway", "pipeline", "driver", "ingress-telegram")
WAIT_MS = 90_000
HOSTILE_NAME = "<img src=x onerror=alert(1)>"
HOSTILE_TEXT = "<script>alert('x')</script> \"quoted\" & <b>bold</b> @LarkBot?"
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
            "endpoints": {"playground": endpoint},
            **{role: "playground" for role in ("probe", "primary", "compaction", "vision", "memory")},
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
async def page(site: Site) -> AsyncIterator[Any]:
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))
        try:
            context = await browser.new_context(viewport={"width": 1280, "height": 860})
            yield await context.new_page()
        finally:
            await browser.close()


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
