"""What the Office formats share: telling an Office Open XML file's kind from its parts, the limits an archive is
read under, and a table grid as a block (also used by PDF, HTML, ODF and CSV). The formats themselves are in
docx.py, pptx.py and spreadsheets.py."""

from __future__ import annotations

import io
import re
import zipfile
from typing import Any

from ...errors import CorruptDocument
from ...types import Block, table_text
from ..normalize import normalize_text
from .base import Source

MAX_UNPACKED_BYTES = 2_000_000_000  # an Office file that unpacks to more than this is refused unread
MAX_EXPANSION = 200  # ... as is one that expands more than this many times (plus 50 MB of slack)
HEADING_STYLE = re.compile(r"^heading\s*(\d)$", re.IGNORECASE)
W_NS = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def office_kind(data: bytes) -> str | None:
    """docx, pptx, xlsx, odt, ods, odp or epub from the zip's parts, not the file name; None for another zip."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = set(archive.namelist())
            unpacked = sum(info.file_size for info in archive.infolist())
    except (zipfile.BadZipFile, ValueError) as exc:
        raise CorruptDocument(f"damaged zip container (truncated or corrupt Office file?): {exc}") from exc
    if unpacked > MAX_UNPACKED_BYTES or unpacked > MAX_EXPANSION * max(len(data), 1) + 50_000_000:
        raise CorruptDocument(f"the zip container unpacks to {unpacked:,} bytes from {len(data):,}: refused as a "
                              "decompression bomb")
    if "word/document.xml" in names:
        return "docx"
    if "ppt/presentation.xml" in names:
        return "pptx"
    if "xl/workbook.xml" in names:
        return "xlsx"
    if "mimetype" in names:  # OpenDocument and EPUB name their type in a first, stored part
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            mimetype = archive.read("mimetype")[:100].decode("ascii", "replace").strip()
        if mimetype == "application/epub+zip":
            return "epub"
        kind = {"application/vnd.oasis.opendocument.text": "odt",
                "application/vnd.oasis.opendocument.spreadsheet": "ods",
                "application/vnd.oasis.opendocument.presentation": "odp"}.get(mimetype)
        if kind is not None:
            return kind
    return None


def clean(text: str) -> str:
    """A cell's or paragraph's text on one line: normalised, whitespace runs folded to one space."""
    if text.isascii() and text.isprintable():  # nothing to normalise but whitespace: the same, at a tenth of the cost
        return " ".join(text.split())
    return " ".join(normalize_text(text).split())


Span = tuple[int, int, int, int]  # a merged cell: (row, column, rows, columns) of the grid it is placed in


def table_block(grid: list[list[str]], page: int | None = None, spans: list[Span] | None = None,
                **meta: Any) -> Block | None:
    """A grid of cell texts as a table block: empty rows and all-empty columns dropped, header = first row.

    A cell spanning several positions holds its text once, at its top-left position (the others are empty), and
    `spans` say which positions it covers; they are kept as the block's `meta["spans"]`, [row, column, rows,
    columns] with row 0 the header, counted over the rows and columns kept."""
    rows = [[clean(c) for c in row] for row in grid]
    kept_rows = [i for i, r in enumerate(rows) if any(r)]
    rows = [rows[i] for i in kept_rows]
    if not rows:
        return None
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    keep = [j for j in range(width) if any(r[j] for r in rows)]
    rows = [[r[j] for j in keep] for r in rows]
    if len(rows) < 2 or len(keep) < 1:
        text = " ".join(c for r in rows for c in r if c)
        return Block("paragraph", text, page=page) if text else None
    kept = kept_spans(spans or [], kept_rows, keep)
    if kept:
        meta["spans"] = kept
    header, body = tuple(rows[0]), tuple(tuple(r) for r in rows[1:])
    return Block("table", table_text(header, body), header=header, rows=body, page=page, meta=dict(meta))


def kept_spans(spans: list[Span], kept_rows: list[int], kept_columns: list[int]) -> list[list[int]]:
    """Spans counted over the rows and columns a table keeps; those that cover one position or hold no text (their
    anchor dropped) are left out."""
    row_at = {r: i for i, r in enumerate(kept_rows)}
    column_at = {c: i for i, c in enumerate(kept_columns)}
    out = []
    for row, column, height, width in sorted(spans):
        if row not in row_at or column not in column_at:
            continue
        rows = sum(1 for r in range(row, row + height) if r in row_at)
        columns = sum(1 for c in range(column, column + width) if c in column_at)
        if rows > 1 or columns > 1:
            out.append([row_at[row], column_at[column], rows, columns])
    return out


def open_error(source: Source, what: str, exc: Exception) -> CorruptDocument:
    return CorruptDocument(f"{source.path.name}: damaged {what} ({type(exc).__name__}: {exc})")


def strict_ooxml(data: bytes) -> bool:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        try:
            return b"purl.oclc.org/ooxml" in archive.read("_rels/.rels")
        except KeyError:
            return False
