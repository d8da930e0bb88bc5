"""The core stays pure: importing it (what ``larkbot replay`` does) loads no I/O library."""

from __future__ import annotations

import subprocess
import sys


def test_core_imports_no_io_library() -> None:
    code = (
        "import sys, larkbot.ingress_telegram.core as core; "
        "print(sorted(m for m in ('aiogram', 'aiohttp', 'nats', 'sqlalchemy', 'httpx', 'asyncio') "
        "if m in sys.modules)); print(core.__all__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded, exported = out.splitlines()
    assert loaded == "[]"
    assert "TelegramAdapter" in exported
