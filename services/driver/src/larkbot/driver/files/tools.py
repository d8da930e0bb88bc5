"""The handler of ``read_file`` (``files.core.tools``): the rendered file-id resolved like
``read_image``'s, a document sent to ``media.read_file`` with the chat's limits, the extract or the
worker's typed refusal told to the model."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from larkbot.canonical.media import ReadFileRequest
from larkbot.driver.tools.handlers import Handlers, Result, text
from larkbot.driver.wake.core.protocol import ToolRun

from .core import tools as core
from .core.files import extract_text, failure_text, refusal
from .core.tools import READ_FILE

if TYPE_CHECKING:
    from larkbot.driver.wake.executor import ToolExecutor


async def read_file(ex: ToolExecutor, call: ToolRun, args: dict[str, Any]) -> Result:
    file_id: str = args["file_id"]
    target = await ex.attachment(file_id)
    if target is None:
        return False, text(f"error: no attachment with file-id {file_id!r}"), False
    message_id, ref = target
    refused = refusal(file_id, ref.type)
    if refused is not None:
        return False, text(refused), False
    request = ReadFileRequest(
        request_id=uuid.uuid4().hex,
        platform=ex.platform,
        chat_id=ex.chat_id,
        message_id=message_id,
        file_id=ref.file_id,
        attachment_type=ref.type,
        blob_key=ref.blob_key,
        name=ref.name,
        mime=ref.mime,
        size_bytes=ref.size_bytes,
        max_chars=ex.files.max_chars,
        max_bytes=ex.files.max_bytes,
        deadline_ms=call.deadline_ms,
    )
    answer = await ex.clients.read_file(request, (call.deadline_ms - ex.clock.now_ms()) / 1000)
    if not answer.ok or answer.extract is None:
        return False, text(failure_text(file_id, answer.error)), False
    return True, text(extract_text(file_id, answer.extract)), False


handlers = Handlers(core.router, {READ_FILE: read_file})
