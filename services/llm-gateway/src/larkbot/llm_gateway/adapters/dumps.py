"""Opt-in request dumps (``llm.dump_dir``): one JSON file per provider call attempt, redacted.

File name ``<request_id>.<attempt>.json`` (request ids are the caller's; unsafe characters are replaced).
Each file holds the endpoint, URL, redacted headers, the request body, and the status, headers and body of
the reply (or the transport failure). Writing happens in a worker thread; a failed write is logged and
counted against nothing else — a dump never changes the outcome of a call.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from pathlib import Path
from typing import Any

from larkbot.runtime.logs import mask

from ..core.redact import redact_body

log = logging.getLogger(__name__)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


class DumpWriter:
    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    async def write(self, request_id: str, attempt: int, record: dict[str, Any]) -> None:
        name = f"{_UNSAFE.sub('_', request_id)[:120]}.{attempt}.json"
        text = mask(json.dumps(redact_body(record, mask), ensure_ascii=False, indent=2))
        try:
            await asyncio.to_thread(self._write, name, text)
        except OSError as exc:
            log.warning("request dump %s not written: %s", name, type(exc).__name__)

    def _write(self, name: str, text: str) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / name).write_text(text, encoding="utf-8")
