"""Spreadsheets: XLSX (openpyxl; values, and formulas' cached results) and XLS (Excel 97-2003, xlrd), each
sheet's regions of filled cells as tables."""

from __future__ import annotations

import datetime
import io
import re
import warnings
import zipfile
from collections.abc import Iterator
from itertools import repeat
from typing import Any

from ...errors import CorruptDocument, EncryptedDocument
from ...types import Block, ExtractedDocument
from .base import ExtractOptions, Source, collector_paused, single_document
from .office import clean, open_error, table_block


def cell_text(value: Any, number_format: str = "General") -> str:
    """A cell as the sheet shows it: whole floats without ".0"; dates, with the time when the cell's
    number format shows one."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, datetime.datetime):
        shows_time = any(k in number_format.lower() for k in ("h", "s")) or value.time() != datetime.time(0)
        return value.strftime("%Y-%m-%d %H:%M:%S") if shows_time else value.strftime("%Y-%m-%d")
    if hasattr(value, "isoformat"):
        return str(value.isoformat())
    return str(value)


class XlsxExtractor:
    source_type = "xlsx"

    def extract(self, source: Source, options: ExtractOptions) -> Iterator[ExtractedDocument | Exception]:
        read = _read_workbook(source)
        if isinstance(read, CorruptDocument):
            yield read
            return
        blocks, problems, title, sheets = read
        yield from single_document(source, "xlsx", title, blocks, metadata={"sheets": sheets}, warnings=problems)


def _read_workbook(source: Source) -> tuple[list[Block], list[str], str | None, int] | CorruptDocument:
    """A workbook's blocks, problems, title and number of sheets, or the error of a workbook openpyxl cannot open.
    Read with the collector resting: a cell object per cell, all alive until the workbook is read."""
    import openpyxl

    with collector_paused():
        try:
            with warnings.catch_warnings():  # images openpyxl cannot read are dropped; text is all we need
                warnings.simplefilter("ignore", UserWarning)
                values = openpyxl.load_workbook(io.BytesIO(source.data), data_only=True)
                # the formulas, to keep those without a cached value: read only when a sheet has one (a second
                # reading of every cell otherwise)
                formulas = (openpyxl.load_workbook(io.BytesIO(source.data), data_only=False)
                            if _has_formulas(source.data) else None)
        except Exception as exc:
            return open_error(source, "XLSX", exc)
        blocks: list[Block] = []
        problems: list[str] = []
        for number, sheet in enumerate(values.worksheets, start=1):
            blocks.extend(_sheet_blocks(sheet, formulas[sheet.title] if formulas else None, number, problems))
        return blocks, problems, clean(values.properties.title or "") or None, len(values.worksheets)


_FORMULA = re.compile(rb"<(?:\w+:)?f[\s>/]")


def _has_formulas(data: bytes) -> bool:
    """Whether any worksheet of the workbook holds a formula (an <f> element in its XML)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return any(_FORMULA.search(archive.read(m)) for m in archive.namelist()
                       if m.startswith("xl/worksheets/") and m.endswith(".xml"))
    except (zipfile.BadZipFile, KeyError, OSError):
        return True  # openpyxl has read it: let it read the formulas too


def _sheet_blocks(sheet: Any, formula_sheet: Any | None, number: int, problems: list[str]) -> list[Block]:
    """A sheet: its name as a heading, then each table region (a connected block of filled cells, merged
    ranges filled in) in reading order; a region's leading rows holding one merged or lone value are titles."""
    grid: list[list[str]] = []
    missing: list[str] = []
    formula_rows = formula_sheet.iter_rows() if formula_sheet is not None else repeat(repeat(None))
    for row_values, row_formulas in zip(sheet.iter_rows(), formula_rows):
        cells = []
        for cell, formula in zip(row_values, row_formulas):
            text = cell_text(cell.value, str(getattr(cell, "number_format", "General") or "General"))
            if not text and formula is not None and isinstance(formula.value, str) and formula.value.startswith("="):
                missing.append(formula.coordinate)
                text = formula.value  # the formula itself, never a silent blank
            cells.append(clean(text))
        grid.append(cells)
    if missing:
        problems.append(f"sheet {sheet.title!r}: {len(missing)} formula cell(s) have no cached value "
                        f"({', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}); their formulas are kept "
                        "as text: recalculate and save the workbook to index the values")
    width = max((len(r) for r in grid), default=0)
    grid = [r + [""] * (width - len(r)) for r in grid]
    merged_title = set()
    for rng in sheet.merged_cells.ranges:  # a merged cell shows its value over its whole range
        top, left = rng.min_row - 1, rng.min_col - 1
        if top >= len(grid) or left >= width:
            continue
        value = grid[top][left]
        for r in range(top, min(rng.max_row, len(grid))):
            for c in range(left, min(rng.max_col, width)):
                grid[r][c] = value
        if rng.max_col > rng.min_col:
            merged_title.add(top)
    blocks = [Block("heading", sheet.title, level=1, page=number)]
    for top, left, bottom, right in _regions(grid):
        rows = [row[left : right + 1] for row in grid[top : bottom + 1]]
        while len(rows) > 1 and len({c for c in rows[0] if c}) == 1 and (len(rows[0]) > 1 or top in merged_title):
            blocks.append(Block("paragraph", next(c for c in rows[0] if c), page=number, meta={"sheet_title": True}))
            rows, top = rows[1:], top + 1
        block = table_block(rows, page=number, sheet=sheet.title)
        if block is not None:
            blocks.append(block)
    return blocks if len(blocks) > 1 else []


MAX_REGION_CELLS = 2_000_000


def _regions(grid: list[list[str]]) -> list[tuple[int, int, int, int]]:
    """Bounding boxes (top, left, bottom, right) of the 4-connected groups of filled cells, top-left first."""
    height = len(grid)
    width = len(grid[0]) if grid else 0
    if height * width > MAX_REGION_CELLS:  # too big to label cell by cell: the used range is one region
        return [(0, 0, height - 1, width - 1)] if height and width else []
    seen = [[False] * width for _ in range(height)]
    boxes = []
    for r in range(height):
        for c in range(width):
            if seen[r][c] or not grid[r][c]:
                continue
            stack = [(r, c)]
            seen[r][c] = True
            top, left, bottom, right = r, c, r, c
            while stack:
                y, x = stack.pop()
                top, left, bottom, right = min(top, y), min(left, x), max(bottom, y), max(right, x)
                for ny, nx in ((y - 1, x), (y + 1, x), (y, x - 1), (y, x + 1)):
                    if 0 <= ny < height and 0 <= nx < width and not seen[ny][nx] and grid[ny][nx]:
                        seen[ny][nx] = True
                        stack.append((ny, nx))
            boxes.append((top, left, bottom, right))
    # regions whose boxes overlap (an L-shaped block) are one table
    merged: list[tuple[int, int, int, int]] = []
    for box in sorted(boxes):
        for i, other in enumerate(merged):
            if box[0] <= other[2] and other[0] <= box[2] and box[1] <= other[3] and other[1] <= box[3]:
                merged[i] = (min(box[0], other[0]), min(box[1], other[1]), max(box[2], other[2]),
                             max(box[3], other[3]))
                break
        else:
            merged.append(box)
    return sorted(merged)


class XlsExtractor:
    """Legacy binary workbooks with xlrd (BSD): each sheet's name as a heading, then its cells as a table."""

    source_type = "xls"

    def extract(self, source: Source, options: ExtractOptions) -> Iterator[ExtractedDocument | Exception]:
        import xlrd

        try:
            book = xlrd.open_workbook(file_contents=source.data, on_demand=True)
        except xlrd.biffh.XLRDError as exc:
            text = str(exc)
            if "encrypt" in text.lower() or "password" in text.lower():
                yield EncryptedDocument(f"{source.path.name} is password-protected: remove the password first")
            else:
                yield open_error(source, "XLS", exc)
            return
        except Exception as exc:  # xlrd raises assertion and struct errors on damaged files
            yield open_error(source, "XLS", exc)
            return
        blocks: list[Block] = []
        try:
            for number in range(book.nsheets):
                sheet = book.sheet_by_index(number)
                blocks.append(Block("heading", sheet.name, level=1, page=number + 1))
                grid = [[_xls_text(sheet.cell(r, c), book.datemode) for c in range(sheet.ncols)]
                        for r in range(sheet.nrows)]
                block = table_block(grid, page=number + 1, sheet=sheet.name)
                if block is not None:
                    blocks.append(block)
        finally:
            book.release_resources()
        yield from single_document(source, "xls", None, blocks, metadata={"sheets": book.nsheets})


def _xls_text(cell: Any, datemode: int) -> str:
    import xlrd

    if cell.ctype == xlrd.XL_CELL_DATE:
        try:
            return cell_text(xlrd.xldate_as_datetime(cell.value, datemode))
        except (ValueError, OverflowError):
            return str(cell.value)
    if cell.ctype == xlrd.XL_CELL_BOOLEAN:
        return "TRUE" if cell.value else "FALSE"
    if cell.ctype in (xlrd.XL_CELL_ERROR, xlrd.XL_CELL_EMPTY, xlrd.XL_CELL_BLANK):
        return ""
    return cell_text(cell.value)
