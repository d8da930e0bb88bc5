"""Documents for ``read_file``: extracts of PDFs (made in the test), text and Office files, typed refusals,
and ``media.read_file`` on a real bus — the second read of a file answered from the extract cache."""

from __future__ import annotations

import io
import zipfile
from typing import Any

import pytest

from larkbot.canonical.media import ReadFileRequest, ReadFileResponse
from larkbot.canonical.names import SUBJECT_MEDIA_READ_FILE
from larkbot.media.core import files
from larkbot.media.core.errors import MediaFailure, TooLarge, Unreadable, Unsupported
from larkbot.runtime.bus import Bus
from larkbot.testkit.media import documents, samples

from .test_media_service import TIMEOUT, counter, media

REPORT = documents.pdf([["Quarterly report", "Revenue grew 12 % (EMEA)."], ["Outlook: steady."]])


def test_a_pdf_made_in_the_test_gives_its_text_page_by_page() -> None:
    extract = files.extract(REPORT)
    assert (extract.kind, extract.mime) == ("pdf", "application/pdf")
    assert extract.text == "Quarterly report\nRevenue grew 12 % (EMEA).\n\nOutlook: steady."
    assert (extract.parts, extract.parts_read, extract.truncated) == (2, 2, False)


def test_office_files_and_text_are_read_by_what_their_bytes_are() -> None:
    doc = files.extract(documents.docx(["Minutes", "Decided: ship it."], [["who", "what"], ["Ann", "QA"]]))
    assert (doc.kind, doc.text) == ("docx", "Minutes\nDecided: ship it.\nwho\twhat\nAnn\tQA")
    sheet = files.extract(documents.xlsx({"Q1": [["region", "sales"], ["EMEA", 12]], "Q2": [[None, 3.5]]}))
    assert (sheet.kind, sheet.parts, sheet.text) == (
        "xlsx",
        2,
        "## Q1\nregion\tsales\nEMEA\t12\n\n## Q2\n\t3.5",
    )
    deck = files.extract(documents.pptx([("Roadmap", "Beta in May")]))
    assert (deck.kind, deck.text) == ("pptx", "## Slide 1\nRoadmap\nBeta in May")
    text = files.extract("第一行\r\n\r\n\r\n\r\nsecond line   \n".encode())
    assert (text.kind, text.text) == ("text", "第一行\n\nsecond line")
    utf16 = files.extract("hello".encode("utf-16"))  # with its BOM
    assert (utf16.kind, utf16.text) == ("text", "hello")


def test_long_documents_are_cut_and_say_so() -> None:
    long = files.extract(("word " * 20_000).encode())
    assert long.truncated
    assert len(long.text) <= files.MAX_EXTRACT_CHARS
    many = files.extract(documents.pdf([[f"page {n} " + "x" * 1000] for n in range(80)]))
    assert many.truncated
    assert many.parts == 80
    assert many.parts_read is not None
    assert many.parts_read < 80  # reading stopped at the bound


@pytest.mark.parametrize(
    ("data", "failure", "says"),
    [
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 512, Unsupported, "legacy Office"),
        (samples.solid((1, 2, 3), (8, 8)), Unsupported, "use read_image"),
        (bytes(range(256)) * 8, Unsupported, "binary data"),
        (REPORT[: len(REPORT) // 2], Unreadable, "could not be read"),
        (documents.encrypted_pdf(), Unreadable, "password-protected"),
        (b"PK\x03\x04 not really a zip", Unreadable, "damaged zip"),
        (documents.pdf([[], []]), Unsupported, "no text"),
    ],
    ids=["legacy-doc", "image", "binary", "truncated-pdf", "encrypted-pdf", "broken-zip", "scanned-pdf"],
)
def test_what_cannot_be_read_is_refused_with_a_reason(
    data: bytes, failure: type[MediaFailure], says: str
) -> None:
    with pytest.raises(failure, match=says):
        files.extract(data)


def test_a_zip_bomb_is_refused_before_any_reader_opens_it() -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("word/document.xml", b"<" + b" " * (files.MAX_INFLATED_BYTES + 1))
    with pytest.raises(TooLarge, match="inflates"):
        files.extract(out.getvalue())


def request(n: int, file_id: str, **fields: Any) -> ReadFileRequest:
    return ReadFileRequest.model_validate(
        {
            "request_id": f"rf-{n}",
            "platform": "feishu",
            "chat_id": "oc_chat",
            "message_id": "om_1",
            "file_id": file_id,
            "attachment_type": "file",
            "max_chars": 1000,
            "max_bytes": 1024 * 1024,
            **fields,
        }
    )


async def test_read_file_downloads_once_extracts_once_and_refuses_with_typed_answers(
    bus: Bus, nats_url: str
) -> None:
    hits = counter("larkbot_media_file_extract_cache_lookups_total", result="hit")
    table = {"file_report": REPORT, "file_broken": REPORT[:300], "file_big": b"a" * (2 * 1024 * 1024)}
    async with media(bus, nats_url, files=table) as stack:

        async def ask(req: ReadFileRequest) -> ReadFileResponse:
            return await bus.request(SUBJECT_MEDIA_READ_FILE, req, ReadFileResponse, timeout_s=TIMEOUT)

        first = await ask(request(1, "file_report", name="report.pdf", max_chars=100))
        assert first.ok, first.error
        assert first.extract is not None
        assert (first.extract.name, first.extract.kind, first.extract.size_bytes) == (
            "report.pdf",
            "pdf",
            len(REPORT),
        )
        assert first.extract.text.startswith("Quarterly report\nRevenue grew 12 %")
        assert (first.extract.parts, first.extract.truncated) == (2, False)
        whole = await ask(request(2, "file_report", max_chars=5000))
        assert whole.extract is not None
        assert whole.extract.text.startswith(first.extract.text)

        # The same attachment again: nothing downloaded, nothing extracted — the cache answers.
        again = await ask(request(3, "file_report", name="report.pdf", max_chars=100))
        assert again.extract == first.extract
        assert [d.file_id for d in stack.ingress.downloads] == ["file_report"]

        broken = await ask(request(4, "file_broken"))
        assert broken.error is not None
        assert (broken.error.code, broken.error.retryable) == ("unreadable", False)
        announced = await ask(request(5, "file_big", size_bytes=2 * 1024 * 1024))
        assert announced.error is not None
        assert announced.error.code == "too_large"
        assert "file_big" not in [d.file_id for d in stack.ingress.downloads]  # refused before download
        unannounced = await ask(request(6, "file_big"))
        assert unannounced.error is not None
        assert unannounced.error.code == "too_large"
        # The worker is still serving after the refusals.
        assert (await ask(request(7, "file_report"))).ok
    assert counter("larkbot_media_file_extract_cache_lookups_total", result="hit") >= hits + 2
