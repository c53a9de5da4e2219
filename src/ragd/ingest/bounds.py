"""Limits checked before a parser starts: the unpacked size of Office files and the cells of a workbook.

A 1.9 MB .docx can unpack to 245 MB of XML; a workbook can declare one merge over every cell of a sheet
(17 billion, which openpyxl would materialise one by one) or hold a lone cell at XFD1048576 (a grid of the same
size). Each is refused with `file_too_large` from the archive's directory and the sheets' raw XML, in
milliseconds, instead of after minutes or gigabytes.
"""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import dataclass

from ..config import Settings
from ..errors import FileTooLarge

ZIP_FORMATS = frozenset({"docx", "xlsx", "pptx"})
_CELL = re.compile(rb"<(?:\w+:)?c[\s>/]")
_CELL_REF = re.compile(rb"<(?:\w+:)?c\s[^>]*?\br=\"([A-Z]{1,3})(\d{1,7})\"")
_MERGE = re.compile(rb"<(?:\w+:)?mergeCell\s[^>]*?\bref=\"([A-Z]{1,3})(\d{1,7})(?::([A-Z]{1,3})(\d{1,7}))?\"")


@dataclass(frozen=True)
class Limits:
    """What one input item may cost: bytes read, bytes unpacked, workbook cells, extraction time and memory."""

    max_file_bytes: int
    max_unzipped_bytes: int
    max_cells: int
    timeout_s: float
    memory_mb: int
    max_document_chars: int = 20_000_000

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        return cls(max_file_bytes=settings.max_file_bytes, max_unzipped_bytes=settings.max_unzipped_bytes,
                   max_cells=settings.max_cells, timeout_s=settings.extract_timeout_s,
                   memory_mb=settings.extract_memory_mb, max_document_chars=settings.max_document_chars)


def check(kind: str, name: str, data: bytes, limits: Limits) -> None:
    """Raise FileTooLarge when an input would unpack or expand past the limits; malformed archives pass
    through to their extractor, which reports them as corrupt."""
    if kind not in ZIP_FORMATS:
        return
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError):
        return
    with archive:
        members = archive.infolist()
        unpacked = sum(m.file_size for m in members)
        if unpacked > limits.max_unzipped_bytes:
            raise FileTooLarge(f"{name} unpacks to {unpacked:,} bytes, over the {limits.max_unzipped_bytes:,}-byte "
                               "limit (RAGD_MAX_UNZIPPED_BYTES)")
        if kind == "xlsx":
            for member in members:
                if member.filename.startswith("xl/worksheets/") and member.filename.endswith(".xml"):
                    _check_sheet(name, member.filename, archive.read(member), limits.max_cells)


def _check_sheet(name: str, part: str, xml: bytes, max_cells: int) -> None:
    sheet = part.rsplit("/", 1)[-1].removesuffix(".xml")
    cells = len(_CELL.findall(xml))
    rows = cols = 0
    for col, row in _CELL_REF.findall(xml):
        rows, cols = max(rows, int(row)), max(cols, _column(col))
    merged = 0
    for c1, r1, c2, r2 in _MERGE.findall(xml):
        if c2:
            merged += (abs(int(r2) - int(r1)) + 1) * (abs(_column(c2) - _column(c1)) + 1)
    for what, count in (("cells", cells), ("merged cells", merged), ("cells in its grid (A1 to the last cell)",
                                                                     rows * cols)):
        if count > max_cells:
            raise FileTooLarge(f"{name}: sheet {sheet} has {count:,} {what}, over the limit of {max_cells:,} "
                               "(RAGD_MAX_CELLS)")


def _column(letters: bytes) -> int:
    n = 0
    for ch in letters:
        n = n * 26 + ch - 64
    return n
