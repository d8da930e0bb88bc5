"""Documents read by the driver's ``read_file`` tool (docs/driver.md "read_file"): a chat's bounds
(``chats.<key>.files``)."""

from __future__ import annotations

from typing import Final

from pydantic import Field

from ._base import _Section

#: The media worker reads files up to 20 MB (Telegram's Bot API serves bots no larger file).
FILES_MAX_BYTES: Final = 20 * 1024 * 1024
#: The longest extract the media worker makes (``larkbot.media.core.files.MAX_EXTRACT_CHARS``).
FILES_MAX_EXTRACT_CHARS: Final = 60_000


class ChatFilesSettings(_Section):
    """``max_extract_chars``: the most of a document's text one ``read_file`` answer gives the model (its
    tool result stays in the turn's context; ~4 characters a token); ``max_bytes``: larger files are
    refused (``too_large``), before any download when the platform announced the size."""

    max_extract_chars: int = Field(default=8000, ge=500, le=FILES_MAX_EXTRACT_CHARS)
    max_bytes: int = Field(default=FILES_MAX_BYTES, ge=1, le=FILES_MAX_BYTES)
