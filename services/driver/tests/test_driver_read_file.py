"""``read_file``: a rendered file-id resolves to a document, which ``media.read_file`` reads within the
chat's limits; pictures, voice and unknown ids are refused before the worker is asked, and the worker's
typed refusals reach the model as they are (executor against scripted clients, no bus)."""

from __future__ import annotations

from typing import cast
from xml.sax.saxutils import escape

import pytest

from larkbot.canonical.content import AttachmentType
from larkbot.canonical.context import AttachmentRef, HistoryRequest, HistoryResponse
from larkbot.canonical.llm import TextPart
from larkbot.canonical.media import FileExtract, MediaError, ReadFileRequest, ReadFileResponse
from larkbot.driver.files.core.files import FileLimits
from larkbot.driver.files.core.tools import READ_FILE
from larkbot.driver.wake.clients import BusClients
from larkbot.driver.wake.clock import ManualClock
from larkbot.driver.wake.core.turn import ToolDone, ToolRun
from larkbot.driver.wake.executor import ToolExecutor
from larkbot.runtime.bus import Bus
from larkbot.testkit.driver.synthetic import segment

T0 = 1_700_000_000_000
REPORT = AttachmentRef(
    index=0,
    type=AttachmentType.FILE,
    file_id="file_v3_report",
    name="Q3 <draft>.pdf",
    size_bytes=48_213,
)
PHOTO = AttachmentRef(index=1, type=AttachmentType.PHOTO, file_id="img_cat")
VOICE = AttachmentRef(index=2, type=AttachmentType.VOICE, file_id="file_v3_voice")
LEGACY = AttachmentRef(index=0, type=AttachmentType.DOCUMENT, file_id="doc_old", name="notes.doc")
TEXT = "Revenue grew 12 % <EMEA> & more." + " Outlook: steady." * 8


class ScriptedMedia(BusClients):
    """``media.read_file`` answers an extract for ``file_v3_report`` and a refusal for anything else."""

    def __init__(self) -> None:
        super().__init__(cast(Bus, None))
        self.reads: list[ReadFileRequest] = []

    async def history(self, request: HistoryRequest) -> HistoryResponse:
        return HistoryResponse(found=(), missing=request.message_ids)

    async def read_file(self, request: ReadFileRequest, timeout_s: float) -> ReadFileResponse:
        self.reads.append(request)
        if request.file_id != "file_v3_report":
            error = MediaError(
                code="unsupported",
                message="a legacy Office file (.doc, .xls or .ppt); only PDF, plain text, .docx, .xlsx and "
                ".pptx are read",
                retryable=False,
            )
            return ReadFileResponse(request_id=request.request_id, ok=False, error=error)
        text = TEXT[: request.max_chars]
        extract = FileExtract(
            name=request.name,
            kind="pdf",
            mime="application/pdf",
            size_bytes=48_213,
            text=text,
            total_chars=len(TEXT),
            truncated=len(text) < len(TEXT),
            parts=12,
            parts_read=12,
        )
        return ReadFileResponse(request_id=request.request_id, ok=True, extract=extract)


def executor(clients: ScriptedMedia, limits: FileLimits) -> ToolExecutor:
    live = (
        segment(1).model_copy(update={"attachments": (REPORT, PHOTO, VOICE)}),
        segment(2).model_copy(update={"attachments": (LEGACY,)}),
    )
    return ToolExecutor(
        clients, ManualClock(T0), "feishu", "oc_chat", live, max_segment_tokens=4000, files=limits
    )


async def read(ex: ToolExecutor, file_id: str) -> ToolDone:
    return await ex.run(ToolRun(1, 0, READ_FILE, {"file_id": file_id}, "key", T0 + 10_000))


async def test_a_document_is_read_within_the_chats_limits_and_its_text_escaped() -> None:
    clients = ScriptedMedia()
    done = await read(executor(clients, FileLimits(max_chars=500, max_bytes=1_000_000)), "m1:0")
    assert done.ok
    assert done.parts == (
        TextPart(
            text='<file file-id="m1:0" name="Q3 &lt;draft&gt;.pdf" type="pdf" mime="application/pdf" '
            'size="48213" pages="12/12">Revenue grew 12 % &lt;EMEA&gt; &amp; more.'
            + " Outlook: steady." * 8
            + "</file>"
        ),
    )
    (request,) = clients.reads
    assert (request.message_id, request.file_id, request.attachment_type) == (
        "om_1",
        "file_v3_report",
        AttachmentType.FILE,
    )
    assert (request.name, request.size_bytes, request.max_chars, request.max_bytes) == (
        "Q3 <draft>.pdf",
        48_213,
        500,
        1_000_000,
    )


async def test_a_cut_text_says_so() -> None:
    done = await read(executor(ScriptedMedia(), FileLimits(max_chars=100, max_bytes=1_000_000)), "m1:0")
    (part,) = done.parts
    assert isinstance(part, TextPart)
    shown = escape(TEXT[:100])
    assert part.text.endswith(f'truncated="first 100 characters">{shown}</file>')


@pytest.mark.parametrize(
    ("file_id", "error"),
    [
        ("m1:1", "error: the attachment 'm1:1' is a photo; look at it with read_image"),
        ("m1:2", "error: the attachment 'm1:2' is a voice, not a document"),
        ("m1:7", "error: no attachment with file-id 'm1:7'"),
        ("m9:0", "error: no attachment with file-id 'm9:0'"),
    ],
)
async def test_what_is_no_document_is_refused_before_the_worker_is_asked(file_id: str, error: str) -> None:
    clients = ScriptedMedia()
    done = await read(executor(clients, FileLimits(8000, 20_000_000)), file_id)
    assert not done.ok
    assert done.parts == (TextPart(text=error),)
    assert clients.reads == []


async def test_the_workers_refusal_reaches_the_model_with_its_code_and_reason() -> None:
    done = await read(executor(ScriptedMedia(), FileLimits(8000, 20_000_000)), "m2:0")
    assert not done.ok
    assert not done.final  # the model may say so in the chat
    assert done.parts == (
        TextPart(
            text="error: the file 'm2:0' could not be read (unsupported): a legacy Office file (.doc, .xls "
            "or .ppt); only PDF, plain text, .docx, .xlsx and .pptx are read"
        ),
    )
