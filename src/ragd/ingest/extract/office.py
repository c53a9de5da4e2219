"""Office Open XML: DOCX (python-docx), PPTX (python-pptx), XLSX (openpyxl); all to the one block model."""

from __future__ import annotations

import datetime
import io
import re
import warnings
import zipfile
from collections.abc import Iterator
from itertools import repeat
from typing import Any

from ...errors import CorruptDocument, EncryptedDocument, UnsupportedFormat
from ...types import Block, BlockType, ExtractedDocument, table_text
from ..normalize import normalize_text
from .base import ExtractOptions, Source, collector_paused, single_document

MAX_UNPACKED_BYTES = 2_000_000_000  # an Office file that unpacks to more than this is refused unread
MAX_EXPANSION = 200  # ... as is one that expands more than this many times (plus 50 MB of slack)
_HEADING_STYLE = re.compile(r"^heading\s*(\d)$", re.IGNORECASE)
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


def _clean(text: str) -> str:
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
    rows = [[_clean(c) for c in row] for row in grid]
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


def _open_error(source: Source, what: str, exc: Exception) -> CorruptDocument:
    return CorruptDocument(f"{source.path.name}: damaged {what} ({type(exc).__name__}: {exc})")


def _strict_ooxml(data: bytes) -> bool:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        try:
            return b"purl.oclc.org/ooxml" in archive.read("_rels/.rels")
        except KeyError:
            return False


# -- DOCX ------------------------------------------------------------------------------------------------


class _Numbering:
    """numId/ilvl -> 'bullet' or a numbering format (and its level text, e.g. "%1.%2."), from numbering.xml;
    plus running counters, so numbered headings get the numbers Word shows."""

    def __init__(self, document: Any) -> None:
        self.formats: dict[tuple[str, int], str] = {}
        self.texts: dict[tuple[str, int], str] = {}
        self.counters: dict[str, list[int]] = {}
        try:
            root = document.part.numbering_part.element
        except (KeyError, NotImplementedError, AttributeError):
            return
        abstract: dict[str, dict[int, tuple[str, str]]] = {}
        for node in root.findall(f"{W_NS}abstractNum"):
            levels = {}
            for lvl in node.findall(f"{W_NS}lvl"):
                fmt = lvl.find(f"{W_NS}numFmt")
                text = lvl.find(f"{W_NS}lvlText")
                value = fmt.get(f"{W_NS}val", "bullet") if fmt is not None else "bullet"
                levels[int(lvl.get(f"{W_NS}ilvl", "0"))] = (value, text.get(f"{W_NS}val", "") if text is not None
                                                            else "")
            abstract[node.get(f"{W_NS}abstractNumId", "")] = levels
        for num in root.findall(f"{W_NS}num"):
            ref = num.find(f"{W_NS}abstractNumId")
            if ref is None:
                continue
            for level, (fmt, text) in abstract.get(ref.get(f"{W_NS}val", ""), {}).items():
                self.formats[(num.get(f"{W_NS}numId", ""), level)] = fmt
                self.texts[(num.get(f"{W_NS}numId", ""), level)] = text

    def label(self, num_id: str, level: int) -> str:
        """Advance the counters of a numbered paragraph and return its number as Word renders it ("1.2")."""
        counts = self.counters.setdefault(num_id, [0] * 9)
        level = min(max(level, 0), 8)
        counts[level] += 1
        for deeper in range(level + 1, 9):
            counts[deeper] = 0
        if self.formats.get((num_id, level), "bullet") in ("bullet", "none"):
            return ""
        text = self.texts.get((num_id, level), f"%{level + 1}.")
        for i in range(9):
            text = text.replace(f"%{i + 1}", str(max(counts[i], 1)))
        return text.strip()


def _list_info(paragraph: Any, style: Any, numbering: _Numbering) -> tuple[int, bool] | None:
    """(level, numbered) when the paragraph (with its style, python-docx's) is a list item, from its numPr or its
    style."""
    ppr = paragraph._p.pPr
    num_pr = ppr.numPr if ppr is not None else None
    style = _style_name(style)
    if num_pr is not None and num_pr.numId is not None and num_pr.numId.val != 0:
        level = num_pr.ilvl.val if num_pr.ilvl is not None else 0
        fmt = numbering.formats.get((str(num_pr.numId.val), level), "bullet")
        return level, fmt not in ("bullet", "none")
    if style.lower().startswith("list"):
        match = re.search(r"(\d)$", style)
        return (int(match.group(1)) - 1 if match else 0), "number" in style.lower()
    return None


def _style_numbering(paragraph: Any, style: Any) -> tuple[str, int] | None:
    """(numId, ilvl) of a paragraph numbered directly or through its style (Heading 1 with numbering)."""
    ppr = paragraph._p.pPr
    num_pr = ppr.numPr if ppr is not None else None
    while (num_pr is None or num_pr.numId is None) and style is not None:
        spr = style.element.pPr
        num_pr = spr.numPr if spr is not None else None
        style = style.base_style
    if num_pr is None or num_pr.numId is None or num_pr.numId.val == 0:
        return None
    level = num_pr.ilvl.val if num_pr.ilvl is not None else 0
    if ppr is not None and ppr.numPr is not None and ppr.numPr.ilvl is not None:
        level = ppr.numPr.ilvl.val
    return str(num_pr.numId.val), int(level)


def _style_name(style: Any) -> str:
    return (style.name if style is not None else "") or ""


def _heading_level(paragraph: Any, style: Any) -> int | None:
    style = _style_name(style)
    if style.lower() == "title":
        return 1
    match = _HEADING_STYLE.match(style)
    if match:
        return min(int(match.group(1)) + 1, 6)
    ppr = paragraph._p.pPr
    outline = ppr.find(f"{W_NS}outlineLvl") if ppr is not None else None
    if outline is not None:
        return min(int(outline.get(f"{W_NS}val", "0")) + 2, 6)
    return None


def _children(node: Any, *tags: str) -> Iterator[Any]:
    """The children with these tags in order, including those inside content controls (w:sdt) and custom XML
    wrappers, which python-docx's own iteration skips."""
    wanted = {f"{W_NS}{t}" for t in tags}
    for child in node.iterchildren():
        tag = child.tag
        if tag in wanted:
            yield child
        elif tag == f"{W_NS}sdt":
            content = child.find(f"{W_NS}sdtContent")
            if content is not None:
                yield from _children(content, *tags)
        elif tag in (f"{W_NS}customXml", f"{W_NS}smartTag"):
            yield from _children(child, *tags)


def _body_items(container: Any) -> Iterator[Any]:
    """Paragraphs (w:p) and tables (w:tbl) in body order."""
    return _children(container, "p", "tbl")


M_NS = "{http://schemas.openxmlformats.org/officeDocument/2006/math}"
MC_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"
_SKIP = {f"{W_NS}txbxContent", MC_FALLBACK, f"{W_NS}del", f"{W_NS}delText", f"{W_NS}instrText"}


def paragraph_text(p: Any) -> str:
    """A paragraph's text in document order: runs, hyperlinks, fields' results and the plain text of
    equations (OMML); deleted revisions, field codes and text boxes (read as blocks of their own) left out."""
    parts: list[str] = []

    def walk(node: Any) -> None:
        for child in node:
            tag = child.tag
            if tag in _SKIP:
                continue
            if tag in (f"{W_NS}t", f"{M_NS}t"):
                parts.append(child.text or "")
            elif tag == f"{W_NS}tab":
                parts.append(" ")
            elif tag in (f"{W_NS}br", f"{W_NS}cr"):
                parts.append("\n")
            else:
                walk(child)

    walk(p)
    return "".join(parts)


def _text_boxes(p: Any) -> list[Any]:
    """The text box contents anchored in a paragraph (the DrawingML choice, not its VML fallback copy)."""
    found: list[Any] = []

    def walk(node: Any) -> None:
        for child in node:
            if child.tag == MC_FALLBACK:
                continue
            if child.tag == f"{W_NS}txbxContent":
                found.append(child)
            else:
                walk(child)

    walk(p)
    return found


def _int_attr(parent: Any, tag: str, default: int) -> int:
    node = parent.find(f"{W_NS}{tag}") if parent is not None else None
    value = node.get(f"{W_NS}val") if node is not None else None
    return int(value) if value is not None and value.isdigit() else default


def _docx_tables(tbl: Any, paragraph: Any) -> list[Block]:
    """A table as its grid: a cell spanning columns (gridSpan) or rows (vMerge) written once at its first
    position with its span kept (`table_block`), a row starting late (gridBefore) given empty cells. Nested tables
    follow as tables of their own."""
    grid: list[list[str]] = []
    spans: list[list[int]] = []
    merging: dict[int, int] = {}  # column -> the span (index in spans) a vertical merge started there continues
    nested: list[Block] = []
    for r, tr in enumerate(_children(tbl, "tr")):
        tr_pr = tr.find(f"{W_NS}trPr")
        row = [""] * _int_attr(tr_pr, "gridBefore", 0)
        for tc in _children(tr, "tc"):
            tc_pr = tc.find(f"{W_NS}tcPr")
            width = max(1, _int_attr(tc_pr, "gridSpan", 1))
            merge = tc_pr.find(f"{W_NS}vMerge") if tc_pr is not None else None
            parts = []
            for item in _body_items(tc):
                if item.tag == f"{W_NS}tbl":
                    nested.extend(_docx_tables(item, paragraph))
                else:
                    parts.append(paragraph_text(item))
            text = " ".join(" ".join(parts).split())
            column = len(row)
            if merge is not None and merge.get(f"{W_NS}val") in (None, "continue") and column in merging:
                spans[merging[column]][2] += 1
                text = ""
            else:
                merging.pop(column, None)
                if width > 1 or merge is not None:
                    if merge is not None:
                        merging[column] = len(spans)
                    spans.append([r, column, 1, width])
            row.extend([text] + [""] * (width - 1))
        grid.append(row)
    block = table_block(grid, spans=[(a, b, c, d) for a, b, c, d in spans])
    return ([block] if block is not None else []) + nested


class DocxExtractor:
    source_type = "docx"

    def extract(self, source: Source, options: ExtractOptions) -> Iterator[ExtractedDocument | Exception]:
        import docx
        from docx.text.paragraph import Paragraph

        try:
            document = docx.Document(io.BytesIO(source.data))
        except Exception as exc:
            if _strict_ooxml(source.data):
                yield UnsupportedFormat(f"{source.path.name} is a Strict Open XML document, which python-docx cannot "
                                        "read: save it as a (Transitional) Word document and ingest it again")
            else:
                yield _open_error(source, "DOCX", exc)
            return
        numbering = _Numbering(document)
        blocks: list[Block] = []
        counters: dict[int, int] = {}
        body = document.element.body

        styles: dict[str | None, Any] = {}

        def paragraph(element: Any) -> Any:
            return Paragraph(element, document._body)

        def style_of(item: Any) -> Any:
            """A paragraph's style, resolved once per style id: python-docx looks a style up on every call,
            scanning all of the document's styles for the default one (90% of a long document's time)."""
            style_id = item._p.style
            if style_id not in styles:
                styles[style_id] = item.style
            return styles[style_id]

        def handle(elements: Iterator[Any]) -> None:
            nonlocal counters
            for element in elements:
                if element.tag == f"{W_NS}tbl":
                    blocks.extend(_docx_tables(element, paragraph))
                    counters.clear()
                    continue
                handle_paragraph(element)
                for box in _text_boxes(element):  # text boxes anchored in the paragraph follow it
                    handle(_body_items(box))

        def handle_paragraph(element: Any) -> None:
            nonlocal counters
            item = paragraph(element)
            raw = paragraph_text(element)
            text = _clean(raw)
            if not text:
                return
            style = style_of(item)
            level = _heading_level(item, style)
            if level is not None:
                heading_number = _style_numbering(item, style)
                label = numbering.label(*heading_number) if heading_number is not None else ""
                blocks.append(Block("heading", f"{label} {text}" if label else text, level=level))
                counters.clear()
                return
            info = _list_info(item, style, numbering)
            if info is None:
                name = _style_name(style).lower()
                kind: BlockType = "code" if "code" in name or "source" in name else "paragraph"
                blocks.append(Block(kind, normalize_text(raw) if kind == "code" else text))
                counters.clear()
                return
            depth, numbered = info
            counters = {k: v for k, v in counters.items() if k <= depth}
            counters[depth] = counters.get(depth, 0) + 1
            marker = f"{counters[depth]}." if numbered else "-"
            line = "  " * depth + f"{marker} {text}"
            if blocks and blocks[-1].type == "list":
                blocks[-1] = Block("list", blocks[-1].text + "\n" + line)
            else:
                blocks.append(Block("list", line))

        handle(_body_items(body))
        title = _clean(document.core_properties.title or "") or next(
            (b.text for b in blocks if b.type == "heading"), None)
        yield from single_document(source, "docx", title, blocks)


# -- PPTX ------------------------------------------------------------------------------------------------


def _shapes(shapes: Any) -> Iterator[Any]:
    """Shapes in reading position (top, then left), group shapes flattened."""
    def key(s: Any) -> tuple[int, int]:
        return (int(s.top or 0), int(s.left or 0))

    from pptx.shapes.group import GroupShape

    for shape in sorted(shapes, key=key):
        if isinstance(shape, GroupShape):
            yield from _shapes(shape.shapes)
        else:
            yield shape


class PptxExtractor:
    source_type = "pptx"

    def extract(self, source: Source, options: ExtractOptions) -> Iterator[ExtractedDocument | Exception]:
        import pptx

        try:
            deck = pptx.Presentation(io.BytesIO(source.data))
        except Exception as exc:
            yield _open_error(source, "PPTX", exc)
            return
        blocks: list[Block] = []
        for number, slide in enumerate(deck.slides, start=1):
            title_shape = slide.shapes.title
            has_title = title_shape is not None and title_shape.has_text_frame
            title = _clean(title_shape.text_frame.text) if has_title else ""
            blocks.append(Block("heading", title or f"Slide {number}", level=1, page=number))
            for shape in _shapes(slide.shapes):
                if title_shape is not None and shape.shape_id == title_shape.shape_id:
                    continue
                if shape.has_table:
                    grid, spans = _pptx_grid(shape.table)
                    block = table_block(grid, page=number, spans=spans)
                    if block is not None:
                        blocks.append(block)
                elif getattr(shape, "has_chart", False):
                    blocks.extend(_chart_blocks(shape.chart, number))
                elif shape.has_text_frame:
                    blocks.extend(_text_frame(shape, number))
            if slide.has_notes_slide:
                notes = _clean(slide.notes_slide.notes_text_frame.text if slide.notes_slide.notes_text_frame else "")
                if notes:
                    blocks.append(Block("paragraph", f"Notes: {notes}", page=number, meta={"notes": True}))
        deck_title = _clean(deck.core_properties.title or "") or next(
            (b.text for b in blocks if b.type == "heading"), None)
        yield from single_document(source, "pptx", deck_title, blocks, metadata={"slides": len(deck.slides)})


def _chart_blocks(chart: Any, page: int) -> list[Block]:
    """A chart as its data: the title, then a table of categories by series (plot types python-pptx cannot
    read give the title only)."""
    title = _clean(chart.chart_title.text_frame.text) if chart.has_title else ""
    blocks = [Block("paragraph", title, page=page, meta={"chart": True})] if title else []
    try:
        plots = list(chart.plots)
    except (ValueError, KeyError):
        return blocks
    for plot in plots:
        series = list(plot.series)
        categories = [str(c) for c in plot.categories]
        if not series or not categories:
            continue
        grid = [["", *[_clean(s.name or "") for s in series]]]
        for i, category in enumerate(categories):
            grid.append([category, *[_cell_text(s.values[i]) if i < len(s.values) else "" for s in series]])
        block = table_block(grid, page=page, caption=title or "chart")
        if block is not None:
            blocks.append(block)
    return blocks


def _pptx_grid(table: Any) -> tuple[list[list[str]], list[Span]]:
    """Cell texts, a merged cell's text once at its origin, and the merged cells' spans."""
    grid = [[cell.text if not cell.is_spanned else "" for cell in row.cells] for row in table.rows]
    spans = [(r, c, cell.span_height, cell.span_width) for r, row in enumerate(table.rows)
             for c, cell in enumerate(row.cells) if cell.is_merge_origin]
    return grid, spans


def _text_frame(shape: Any, page: int) -> list[Block]:
    """Body placeholders are bullet lists (with levels); free text boxes are paragraphs."""
    is_body = shape.is_placeholder and shape.placeholder_format.type not in (None, 3, 15, 16)  # not title/date/footer
    paragraphs = [(p.level, _clean("".join(r.text for r in p.runs) or p.text)) for p in shape.text_frame.paragraphs]
    paragraphs = [(level, text) for level, text in paragraphs if text]
    if not paragraphs:
        return []
    if is_body or any(level > 0 for level, _ in paragraphs):
        text = "\n".join("  " * level + f"- {t}" for level, t in paragraphs)
        return [Block("list", text, page=page)]
    return [Block("paragraph", t, page=page) for _, t in paragraphs]


# -- XLSX ------------------------------------------------------------------------------------------------


def _cell_text(value: Any, number_format: str = "General") -> str:
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
            return _open_error(source, "XLSX", exc)
        blocks: list[Block] = []
        problems: list[str] = []
        for number, sheet in enumerate(values.worksheets, start=1):
            blocks.extend(_sheet_blocks(sheet, formulas[sheet.title] if formulas else None, number, problems))
        return blocks, problems, _clean(values.properties.title or "") or None, len(values.worksheets)


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
            text = _cell_text(cell.value, str(getattr(cell, "number_format", "General") or "General"))
            if not text and formula is not None and isinstance(formula.value, str) and formula.value.startswith("="):
                missing.append(formula.coordinate)
                text = formula.value  # the formula itself, never a silent blank
            cells.append(_clean(text))
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


# -- XLS (Excel 97-2003) -------------------------------------------------------------------------------------


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
                yield _open_error(source, "XLS", exc)
            return
        except Exception as exc:  # xlrd raises assertion and struct errors on damaged files
            yield _open_error(source, "XLS", exc)
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
            return _cell_text(xlrd.xldate_as_datetime(cell.value, datemode))
        except (ValueError, OverflowError):
            return str(cell.value)
    if cell.ctype == xlrd.XL_CELL_BOOLEAN:
        return "TRUE" if cell.value else "FALSE"
    if cell.ctype in (xlrd.XL_CELL_ERROR, xlrd.XL_CELL_EMPTY, xlrd.XL_CELL_BLANK):
        return ""
    return _cell_text(cell.value)
