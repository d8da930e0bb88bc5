"""The playground and the inspector in a real browser (Debian's headless Chromium, driven by playwright):
the real ingress-telegram, pipeline, driver and gateway behind the playground's fake Bot API and demo model,
and ``larkbot inspector`` as a process over the driver's database.

With ``LARKBOT_SCREENSHOTS=<dir>`` the tests also save the screenshots shown in the README
(``LARKBOT_SCREENSHOTS=docs/img .venv/bin/pytest tests/e2e/test_e2e_browser.py``).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.harness.stack import Stack, free_port

from larkbot.cli.playground import PLAYGROUND_CHAT_ID, Playground
from larkbot.runtime.config import parse_config

playwright_api = pytest.importorskip("playwright.async_api", reason="playwright is a dev dependency")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium is not installed (Debian package chromium; .ci/run installs it)"
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
    stack.add("inspector")
    stack.services["inspector"].port = inspector
    stack.services["inspector"].argv = (sys.executable, "-m", "larkbot.cli", "inspector")
    playground = Playground(parse_config(raw, {}))
    await playground.start(telegram, llm, control)
    try:
        await stack.up()
        yield Site(playground.control_url, f"http://127.0.0.1:{inspector}", playground)
    finally:
        await stack.down()
        await playground.stop()


@pytest.fixture
async def page(site: Site) -> AsyncIterator[Any]:
    async with playwright_api.async_playwright() as pw:
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
