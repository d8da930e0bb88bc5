"""The ``read_file`` tool: a work tool of every normal step, like ``read_image`` (a per-chat constant
would save its schema's tokens where files are never sent, and cost a switch in every step's plan). Its
handler is in ``files.tools``."""

from __future__ import annotations

from typing import Final

from larkbot.driver.tools.core.router import ID, Router, Tool

READ_FILE: Final = "read_file"

router = Router(
    "files",
    Tool(
        READ_FILE,
        "Read the text of a document attachment (PDF, plain text, Word, Excel, PowerPoint) by its "
        "file-id. Answers its name, type and size and the text, cut when it is long.",
        {
            "type": "object",
            "properties": {"file_id": ID},
            "required": ["file_id"],
            "additionalProperties": False,
        },
        kind="work",
        offer="normal",
    ),
)
