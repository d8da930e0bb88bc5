"""Synthetic documents for tests and the playground: PDFs written byte by byte, Office files written with the
libraries the media worker reads them with. Deterministic in their arguments (Office files carry their
libraries' timestamps, so only their text is)."""

from __future__ import annotations

import io
from collections.abc import Sequence


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def pdf(pages: Sequence[Sequence[str]]) -> bytes:
    """A PDF with one page per item, each line of it drawn in Helvetica: what a text-based PDF export is,
    built from the specification's own objects (catalogue, page tree, pages, content streams, one font)
    with a correct cross-reference table."""
    count = len(pages)
    font = 3 + 2 * count
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(count))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {count} >>".encode(),
    ]
    for index, lines in enumerate(pages):
        drawn = " ".join(f"({_escape(line)}) Tj T*" for line in lines)
        stream = f"BT /F1 12 Tf 14 TL 72 720 Td {drawn} ET".encode("latin-1")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * index} 0 R "
            f"/Resources << /Font << /F1 {font} 0 R >> >> >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def encrypted_pdf(password: str = "secret") -> bytes:
    """A PDF that opens only with ``password`` (RC4, which pypdf writes without extra packages)."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf([["confidential"]]))))
    writer.encrypt(user_password=password, owner_password=password, algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def docx(paragraphs: Sequence[str], table: Sequence[Sequence[str]] = ()) -> bytes:
    from docx import Document

    document = Document()
    for paragraph in paragraphs:
        document.add_paragraph(paragraph)
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for row, values in zip(grid.rows, table, strict=True):
            for cell, value in zip(row.cells, values, strict=True):
                cell.text = value
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def xlsx(sheets: dict[str, Sequence[Sequence[object]]]) -> bytes:
    from openpyxl import Workbook

    workbook = Workbook()
    workbook.remove(workbook.active)  # type: ignore[arg-type]
    for title, rows in sheets.items():
        sheet = workbook.create_sheet(title)
        for row in rows:
            sheet.append(list(row))
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def pptx(slides: Sequence[tuple[str, str]]) -> bytes:
    """One title-and-content slide per ``(title, body)``."""
    from pptx import Presentation

    presentation = Presentation()
    layout = presentation.slide_layouts[1]
    for title, body in slides:
        slide = presentation.slides.add_slide(layout)
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
    out = io.BytesIO()
    presentation.save(out)
    return out.getvalue()
