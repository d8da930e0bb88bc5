"""What ``read_file`` reads and what the model is told. Pure.

Decisions:

- Documents are what the platforms call documents and files (Telegram ``document``, Feishu ``file``);
  pictures are ``read_image``'s, and voice, audio and video are no text to read: each is refused before
  anything is asked, naming the tool that fits.
- The answer is one ``<file …>`` element: the file's name, the format the worker read it as, its mime
  and size (bytes), for PDFs, workbooks and decks the parts covered (``pages="3/12"``), ``truncated``
  when the text is cut (``first 8000 characters``), then the text, XML-escaped like every member's text
  in the context: a document can never open an element of its own.
- Refusals say what the model can tell the member: the reason and the code (``too_large``,
  ``unsupported``, ``unreadable``, …); nothing in them comes from the file but the worker's own words.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from xml.sax.saxutils import escape, quoteattr

from larkbot.canonical.content import AttachmentType
from larkbot.canonical.media import FileExtract, MediaError

DOCUMENTS: Final = frozenset({AttachmentType.DOCUMENT, AttachmentType.FILE})
_PARTS: Final = {"pdf": "pages", "xlsx": "sheets", "pptx": "slides"}
_PICTURES: Final = frozenset({AttachmentType.PHOTO, AttachmentType.STICKER, AttachmentType.ANIMATION})


@dataclass(frozen=True, slots=True)
class FileLimits:
    """A chat's ``files`` settings: the most text given to the model, the largest file read."""

    max_chars: int
    max_bytes: int


def refusal(file_id: str, kind: AttachmentType) -> str | None:
    """Why an attachment of ``kind`` is not read, or ``None`` for a document."""
    if kind in DOCUMENTS:
        return None
    if kind in _PICTURES:
        return f"error: the attachment {file_id!r} is a {kind.value}; look at it with read_image"
    return f"error: the attachment {file_id!r} is a {kind.value}, not a document"


def extract_text(file_id: str, extract: FileExtract) -> str:
    pairs = [("file-id", file_id)]
    if extract.name:
        pairs.append(("name", extract.name))
    pairs += [("type", extract.kind), ("mime", extract.mime), ("size", str(extract.size_bytes))]
    if extract.parts is not None:
        pairs.append((_PARTS.get(extract.kind, "parts"), f"{extract.parts_read or 0}/{extract.parts}"))
    if extract.truncated:
        pairs.append(("truncated", f"first {len(extract.text)} characters"))
    attrs = "".join(f" {name}={quoteattr(value)}" for name, value in pairs)
    return f"<file{attrs}>{escape(extract.text)}</file>"


def failure_text(file_id: str, error: MediaError | None) -> str:
    if error is None:
        return f"error: the file {file_id!r} could not be read"
    return f"error: the file {file_id!r} could not be read ({error.code}): {error.message}"
