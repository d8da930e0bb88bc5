"""Text extracts of documents for the driver's ``read_file`` tool. Pure: bytes in, text out.

Decisions:

- The format is what the bytes say, never the file's name or the platform's mime (both are what a member
  typed or a client guessed): ``%PDF-`` is a PDF (pypdf); a zip holding ``word/document.xml`` a .docx
  (python-docx), ``xl/workbook.xml`` an .xlsx (openpyxl, values only), ``ppt/presentation.xml`` a .pptx
  (python-pptx); bytes that decode as UTF-8 (or UTF-16 with its BOM) with almost no control characters
  are text. Everything else is refused as ``unsupported`` with what it looks like (a legacy .doc/.xls/.ppt,
  an image, an archive, binary data), so the model can tell the member why.
- Why these libraries: each is pure Python and well kept (pypdf, openpyxl), or pure Python over lxml's
  wheels (python-docx, python-pptx), which every platform we ship to has; none starts a process or
  needs a system package. Legacy binary Office formats have no such reader: refused.
- Bounded work: the extract stops at :data:`MAX_EXTRACT_CHARS` (pages, sheets, rows and slides after it
  are not read), a PDF is read for at most :data:`MAX_PDF_PAGES` pages, a zip whose members would
  inflate past :data:`MAX_INFLATED_BYTES` (or more than 100× their size) is refused before anything
  parses it (a zip bomb), and the source itself is at most 20 MB (the worker's limit).
- A file no reader accepts (truncated, corrupt, an encrypted PDF) is ``unreadable``, naming the
  reader's exception type, never its text (which may quote the file).
- The readers are imported when a file of their kind is first read: together they cost seconds of import
  on a small machine, which a worker that never reads a document should not pay at start.
- The text is normalised (newlines ``\\n``, no NULs, trailing spaces cut, at most one blank line in a
  row), so equal documents give equal extracts and the model reads no padding.
"""

from __future__ import annotations

import codecs
import io
import re
import zipfile
from dataclasses import dataclass
from typing import Final

from larkbot.canonical.media import FileKind

from .errors import TooLarge, Unreadable, Unsupported
from .images import check_size

#: The longest extract made and cached; a request asks for at most this much of it.
MAX_EXTRACT_CHARS: Final = 60_000
MAX_PDF_PAGES: Final = 500
MAX_INFLATED_BYTES: Final = 100 * 1024 * 1024
_MAX_RATIO: Final = 100
_CONTROL: Final = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_BLANKS: Final = re.compile(r"\n{3,}")
_TRAILING: Final = re.compile(r"[ \t]+\n")

MIMES: Final[dict[FileKind, str]] = {
    "pdf": "application/pdf",
    "text": "text/plain",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
}
_ZIP_KINDS: Final[tuple[tuple[str, FileKind], ...]] = (
    ("word/document.xml", "docx"),
    ("xl/workbook.xml", "xlsx"),
    ("ppt/presentation.xml", "pptx"),
)
_LOOKS_LIKE: Final[tuple[tuple[bytes, str], ...]] = (
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "a legacy Office file (.doc, .xls or .ppt)"),
    (b"\x89PNG", "a PNG image (use read_image)"),
    (b"\xff\xd8\xff", "a JPEG image (use read_image)"),
    (b"GIF8", "a GIF image (use read_image)"),
    (b"Rar!", "a RAR archive"),
    (b"7z\xbc\xaf", "a 7z archive"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"OggS", "an audio file"),
    (b"ID3", "an audio file"),
)


@dataclass(frozen=True, slots=True)
class Extract:
    """A document's text (at most :data:`MAX_EXTRACT_CHARS`); ``truncated``: the document had more.
    ``parts``: its pages, sheets or slides; ``parts_read``: how many of them the text covers."""

    kind: FileKind
    text: str
    truncated: bool
    parts: int | None = None
    parts_read: int | None = None

    @property
    def mime(self) -> str:
        return MIMES[self.kind]


class _Text:
    """Collects text up to a bound; ``full`` once it is reached (readers stop there)."""

    def __init__(self, limit: int = MAX_EXTRACT_CHARS) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0
        self.full = False

    def add(self, text: str) -> None:
        if self.full or not text:
            return
        room = self.limit - self.size
        if len(text) > room:
            text, self.full = text[:room], True
        self.parts.append(text)
        self.size += len(text)

    def done(self) -> str:
        return normalise("".join(self.parts))


def normalise(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", text)
    text = _TRAILING.sub("\n", text)
    return _BLANKS.sub("\n\n", text).strip()


def kind_of(data: bytes) -> FileKind:
    """The format the bytes are in; :class:`Unsupported` naming what they look like otherwise."""
    if data.startswith(b"%PDF-"):
        return "pdf"
    if data.startswith(b"PK\x03\x04"):
        names = _zip_names(data)
        for member, kind in _ZIP_KINDS:
            if member in names:
                return kind
        raise Unsupported("a zip archive that is no Word, Excel or PowerPoint document")
    for magic, what in _LOOKS_LIKE:
        if data.startswith(magic):
            raise Unsupported(f"{what}; only PDF, plain text, .docx, .xlsx and .pptx are read")
    if _decode_text(data) is not None:
        return "text"
    raise Unsupported("binary data that is no PDF, plain text, .docx, .xlsx or .pptx")


def extract(data: bytes) -> Extract:
    """The text of a document; raises :class:`TooLarge`, :class:`Unsupported` or :class:`Unreadable`."""
    check_size(len(data))
    kind = kind_of(data)
    if kind == "text":
        text = _decode_text(data) or ""
        return Extract("text", normalise(text[:MAX_EXTRACT_CHARS]), len(text) > MAX_EXTRACT_CHARS)
    if kind != "pdf":
        _check_zip(data)
    try:
        match kind:
            case "pdf":
                return _pdf(data)
            case "docx":
                return _docx(data)
            case "xlsx":
                return _xlsx(data)
            case "pptx":
                return _pptx(data)
    except (TooLarge, Unsupported, Unreadable):
        raise
    except Exception as exc:  # the readers raise anything on a broken file: a typed failure, not a crash
        raise Unreadable(f"the {kind} file could not be read ({type(exc).__name__})") from None
    raise AssertionError(f"no reader for {kind}")


def _decode_text(data: bytes) -> str | None:
    for bom, encoding in ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"),
                          (codecs.BOM_UTF16_BE, "utf-16")):  # fmt: skip
        if data.startswith(bom):
            return _text_or_none(data, encoding)
    return _text_or_none(data, "utf-8")


def _text_or_none(data: bytes, encoding: str) -> str | None:
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError:
        return None
    sample = text[:10_000]
    if "\x00" in sample or len(_CONTROL.findall(sample)) > len(sample) // 100:
        return None
    return text


def _zip_names(data: bytes) -> set[str]:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return set(archive.namelist())
    except (zipfile.BadZipFile, ValueError, OSError):
        raise Unreadable("a damaged zip archive (BadZipFile)") from None


def _check_zip(data: bytes) -> None:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        inflated = sum(info.file_size for info in archive.infolist())
    if inflated > MAX_INFLATED_BYTES or inflated > _MAX_RATIO * max(len(data), 1):
        raise TooLarge(f"the document inflates to {inflated} bytes (a zip bomb or an enormous document)")


def _pdf(data: bytes) -> Extract:
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted and not reader.decrypt(""):
        raise Unreadable("the PDF is password-protected")
    total = len(reader.pages)
    out = _Text()
    read = 0
    for index in range(min(total, MAX_PDF_PAGES)):
        out.add((reader.pages[index].extract_text() or "") + "\n\n")
        read += 1
        if out.full:
            break
    text = out.done()
    if not text and read == total:
        raise Unsupported("the PDF holds no text (scanned pages?); text in pictures is not read")
    return Extract("pdf", text, out.full or read < total, total, read)


def _docx(data: bytes) -> Extract:
    from docx import Document

    document = Document(io.BytesIO(data))
    out = _Text()
    for paragraph in document.paragraphs:
        out.add(paragraph.text + "\n")
        if out.full:
            break
    for table in document.tables:
        if out.full:
            break
        for row in table.rows:
            out.add("\t".join(cell.text for cell in row.cells) + "\n")
    return Extract("docx", out.done(), out.full)


def _xlsx(data: bytes) -> Extract:
    from openpyxl import load_workbook

    workbook = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    try:
        sheets = workbook.worksheets
        out = _Text()
        read = 0
        for sheet in sheets:
            if out.full:
                break
            out.add(f"## {sheet.title}\n")
            for row in sheet.iter_rows(values_only=True):
                cells = ["" if value is None else str(value) for value in row]
                if any(cells):
                    out.add("\t".join(cells).rstrip("\t") + "\n")
                if out.full:
                    break
            out.add("\n")
            read += 1
        return Extract("xlsx", out.done(), out.full or read < len(sheets), len(sheets), read)
    finally:
        workbook.close()


def _pptx(data: bytes) -> Extract:
    from pptx import Presentation

    slides = list(Presentation(io.BytesIO(data)).slides)
    out = _Text()
    read = 0
    for number, slide in enumerate(slides, start=1):
        if out.full:
            break
        out.add(f"## Slide {number}\n")
        for shape in slide.shapes:
            if shape.has_text_frame:
                out.add(shape.text_frame.text + "\n")
        out.add("\n")
        read += 1
    return Extract("pptx", out.done(), out.full or read < len(slides), len(slides), read)
