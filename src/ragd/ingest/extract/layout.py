"""Page layout from positioned text: a column leaf's lines as paragraphs, list items, headings and tables
(geometry.py orders the boxes, borderless.py finds the tables drawn without rules), then the document's blocks
finished across pages: a paragraph continued over a page break joined, headings told by size and weight, the
periods printed over a table's figure columns made its header."""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ...fiscal import MONTH
from ...types import Block, BlockType, table_text
from ..normalize import normalize_text
from .borderless import aligned_table, contents_table
from .geometry import (
    BULLET,
    BULLET_ONLY,
    CAPTION,
    SECTION_NUMBER,
    SENTENCE_END,
    TERMINAL,
    Box,
    Line,
    PageText,
    group_lines,
    reading_key,
)


def leaf_blocks(leaf: Sequence[Box], page: int) -> list[tuple[Block, float, bool]]:
    """One column leaf -> blocks: tables as they are, aligned multi-box lines as borderless tables, the
    rest grouped into paragraphs and list items by line spacing, size and weight."""
    out: list[tuple[Block, float, bool]] = []
    lines: list[Line] = []
    for group in group_lines([b for b in leaf if b.table is None]):
        lines.append(Line(sorted(group, key=lambda b: b.x0)))
    tables = sorted((b for b in leaf if b.table is not None), key=reading_key)
    items: list[Line | Box] = sorted([*lines, *tables], key=lambda x: x.top)
    gaps = [b.top - a.bottom for a, b in zip(lines, lines[1:]) if b.top - a.bottom >= 0]
    line_gap = statistics.median(gaps) if gaps else 0.0
    current: list[Line] = []

    def flush() -> None:
        if current:
            out.append(_paragraph(current, page))
            current.clear()

    i = 0
    while i < len(items):
        item = items[i]
        if isinstance(item, Box):
            flush()
            assert item.table is not None
            meta = {**item.table.meta, "boxes": [_where(page, item.x0, item.top, item.x1, item.bottom)]}
            out.append((replace(item.table, page=page, meta=meta), item.size, False))
            i += 1
            continue
        run_end = i
        while run_end < len(items) and isinstance(items[run_end], Line):
            run_end += 1
        run = [x for x in items[i:run_end] if isinstance(x, Line)]
        j = 0
        while j < len(run):
            line = run[j]
            contents = contents_table(run, j)
            if contents is not None:
                flush()
                block, end = contents
                box = _where(page, min(ln.x0 for ln in run[j:end]), line.top,
                             max(b.x1 for ln in run[j:end] for b in ln.boxes), run[end - 1].bottom)
                out.append((replace(block, page=page, meta={**block.meta, "boxes": [box]}), line.size, False))
                j = end
                continue
            found = aligned_table(run, j, current) if len(line.boxes) >= 2 else None
            if found is not None:
                block, end, taken = found
                head = current[len(current) - taken:] if taken else []
                del current[len(current) - taken:]
                flush()
                spanned = [*head, *run[j:end]]
                box = _where(page, min(ln.x0 for ln in spanned), spanned[0].top,
                             max(b.x1 for ln in spanned for b in ln.boxes), run[end - 1].bottom)
                out.append((replace(block, page=page, meta={**block.meta, "boxes": [box]}), line.size, False))
                j = end
                continue
            if current and _breaks(current[-1], line, line_gap):
                flush()
            current.append(line)
            j += 1
        i = run_end
    flush()
    return out


def _breaks(prev: Line, line: Line, line_gap: float) -> bool:
    size = max(prev.size, line.size)
    if abs(prev.size - line.size) > 0.12 * size or prev.bold != line.bold or prev.italic != line.italic:
        return True
    if prev.font and line.font and prev.font != line.font:
        return True  # a heading in the sans face over body text in the serif one, at nearly the same size
    gap = line.top - prev.bottom
    if gap > line_gap + 0.4 * size or gap < -0.5 * size:
        return True
    return bool(BULLET.match(line.text)) and not BULLET_ONLY.match(line.text)


def _paragraph(lines: list[Line], page: int) -> tuple[Block, float, bool]:
    text = normalize_text("\n".join(_line_text(line) for line in lines))
    text = " ".join(part for part in text.split("\n") if part)
    kind: BlockType = "list" if BULLET.match(text) else "paragraph"
    size = statistics.median(line.size for line in lines)
    box = _where(page, min(ln.x0 for ln in lines), lines[0].top, max(b.x1 for ln in lines for b in ln.boxes),
                 lines[-1].bottom)
    # an italic line in title case standing alone is a run-in style heading ("Elastic Stop Nut"), as strong
    # as a bold one
    strong = all(line.bold for line in lines) or (
        len(lines) == 1 and lines[0].italic and _title_case(text) and not CAPTION.match(text))
    return Block(kind, text, page=page, meta={"boxes": [box]}), size, strong


def _title_case(text: str) -> bool:
    words = [w for w in re.split(r"[\s-]+", text) if len(w) > 3 and w[0].isalpha()]
    return bool(words) and text[:1].isupper() and sum(w[0].isupper() for w in words) * 3 >= len(words) * 2


def _where(page: int, x0: float, top: float, x1: float, bottom: float) -> dict[str, Any]:
    """Where a block sits: its page and bounding box (x0, top, x1, bottom; PDF points, or pixels for images)."""
    return {"page": page, "bbox": [round(x0, 1), round(top, 1), round(x1, 1), round(bottom, 1)]}


def _line_text(line: Line) -> str:
    parts = [b.text for b in line.boxes]
    if len(parts) > 1 and BULLET_ONLY.match(parts[0]):
        return parts[0] + " " + " ".join(parts[1:])
    return " ".join(parts)


def finish(pages: Sequence[PageText]) -> list[Block]:
    """Document-level decisions: paragraphs continued across columns and pages are joined, tables whose
    header repeats on the next page are merged, list items are grouped, and headings get levels from their
    size rank (body size = the size most text is set in)."""
    flat: list[tuple[Block, float, bool]] = [entry for p in pages for entry in p.blocks]
    weights: dict[float, int] = {}
    for block, size, _ in flat:
        if block.type != "table":
            weights[round(size, 1)] = weights.get(round(size, 1), 0) + len(block.text)
    body = max(sorted(weights), key=lambda s: weights[s]) if weights else 0.0
    heads = [_is_heading(block, size, bold, body) for block, size, bold in flat]
    heading_sizes = sorted({round(size, 1) for (_, size, _), head in zip(flat, heads) if head}, reverse=True)
    levels: dict[float, int] = {}
    level, anchor = 0, float("inf")
    for size in heading_sizes:  # sizes within 10% of a level's largest share it (OCR sizes are estimates)
        if size < anchor * 0.9:
            level, anchor = min(level + 1, 6), size
        levels[size] = level
    blocks: list[Block] = []
    for (block, size, _), head in zip(flat, heads):
        if head:
            blocks.append(Block("heading", block.text, level=levels[round(size, 1)], page=block.page, meta=block.meta))
        elif blocks and block.type == "table" and blocks[-1].type == "table" and _continues(blocks[-1], block):
            prev = blocks[-1]
            repeated = 0  # header rows under the first repeated too (a row of years under a spanning title)
            while repeated < min(3, len(block.rows), len(prev.rows)) and block.rows[repeated] == prev.rows[repeated]:
                repeated += 1
            more = block.rows[repeated:]
            merged = prev.rows + more
            pages_ = sorted({*prev.meta.get("pages", [prev.page]), block.page})
            boxes = [*prev.meta.get("boxes", []), *block.meta.get("boxes", [])]
            row_pages = [*prev.meta.get("row_pages", [prev.page] * len(prev.rows)), *[block.page] * len(more)]
            blocks[-1] = replace(prev, text=table_text(prev.header, merged), rows=merged,
                                 meta={**prev.meta, "pages": pages_, "boxes": boxes, "row_pages": row_pages})
        elif blocks and block.type == "table" and blocks[-1].type == "table" and _heads(blocks[-1], block):
            prev = blocks[-1]
            rows = (*prev.rows, block.header, *block.rows)
            row_pages = [*prev.meta.get("row_pages", [prev.page] * len(prev.rows)),
                         *[block.page] * (len(block.rows) + 1)]
            blocks[-1] = replace(prev, text=table_text(prev.header, rows), rows=rows,
                                 meta={**_more_boxes(prev, block), "row_pages": row_pages})
        elif blocks and block.type == "paragraph" and blocks[-1].type in ("paragraph", "list") and _joins(
            blocks[-1], block
        ):
            blocks[-1] = replace(blocks[-1], text=blocks[-1].text + " " + block.text,
                                 meta=_more_boxes(blocks[-1], block))
        elif blocks and block.type == "list" and blocks[-1].type == "list":
            blocks[-1] = replace(blocks[-1], text=blocks[-1].text + "\n" + block.text,
                                 meta=_more_boxes(blocks[-1], block))
        else:
            blocks.append(block)
    return _periods_over_tables(blocks)


_MONTH_DAY = rf"{MONTH}\s+\d{{1,2}}"  # "May 31", "Aug. 29"
# a period as a statement's column header writes it: "August 29, 2021", "Fiscal 2021", "Year Ended May 31, 2019"
_PERIOD_LABEL = re.compile(
    r"^(?:(?:fiscal\s+)?(?:years?|quarters?|(?:three|six|nine|twelve|\d{1,2}|thirteen|fifty-two|fifty-three)"
    rf"(?:\s+|-)(?:months?|weeks?))\s+ended\s+)?{_MONTH_DAY},?\s+(?:19|20)\d\d$"
    r"|^(?:fiscal\s+(?:year\s+)?)?(?:19|20)\d\d$", re.IGNORECASE)
_HAS_YEAR = re.compile(r"(?<!\d)(?:19|20)\d\d(?!\d)")


def _periods_over_tables(blocks: list[Block]) -> list[Block]:
    """Column headers set apart from their table: a table whose header names no period, right under two to four
    short lines that are each a period ("August 29, 2021", "August 30, 2020", read as headings), gets them as its
    header, in order, after its first column; its own first row stays its first row."""
    out: list[Block] = []
    for block in blocks:
        labels: list[Block] = []
        while (out and len(labels) < 4 and out[-1].type in ("heading", "paragraph") and out[-1].page == block.page
               and _PERIOD_LABEL.match(out[-1].text.strip())):
            labels.insert(0, out.pop())
        width = len(block.header)
        if (block.type == "table" and 2 <= len(labels) <= width - 1
                and not any(_HAS_YEAR.search(c) for c in block.header)):
            alone = not any(c.strip() for c in block.header[1:])  # a header of one cell ("ASSETS") stays the header
            header = (block.header[0] if alone else "", *(b.text.strip() for b in labels),
                      *[""] * (width - 1 - len(labels)))
            out.append(_reheaded(block, header, block.rows if alone else (block.header, *block.rows)))
            continue
        out.extend(labels)
        out.append(_years_over(out[-2:], block) if out and block.type == "table" else block)
    return out


_FIGURE_CELL = re.compile(r"^\(?-?\$?\s?\d[\d,]*(?:\.\d+)?\)?%?$")


_DAY = re.compile(rf"\b({_MONTH_DAY}),?\s+(?:19|20)\d\d", re.IGNORECASE)


def _years_over(lines: Sequence[Block], table: Block) -> Block:
    """`_years_under_line` under the last line, else under the last two read as one (their years in order: "(In
    millions) 2018" over "Year Ended May 31, 2017 2016" is three years' header)."""
    done = _years_under_line(lines[-1], table)
    if done is not table or len(lines) < 2 or not all(
            b.type in ("heading", "paragraph") and b.page == table.page for b in lines):
        return done
    joined = replace(lines[-1], text=f"{lines[-2].text} {lines[-1].text}")
    return _years_under_line(joined, table)


def _years_under_line(line: Block, table: Block) -> Block:
    """A table whose first row is figures ("Revenues | $ 44,538 | 37,403 | 39,117"), or whose header is a label
    alone over rows of figures ("ASSETS Current assets: | |", its first figures maybe a few section labels down),
    under a line naming as many years ("YEAR ENDED MAY 31, 2021 2020 2019"): the years become its header, over
    the figures' columns, in the order the line names them, each with the line's day when it names one day for all
    ("May 31, 2021 | May 31, 2020": a year ending in January is named by its day); the line stays where it is."""
    if (line.type not in ("heading", "paragraph") or line.page != table.page or len(line.text.split()) > 20
            or any(_HAS_YEAR.search(c) for c in table.header)):
        return table
    years = list(dict.fromkeys(_HAS_YEAR.findall(line.text)))
    labelled = bool(table.header[0].strip()) and not any(c.strip() for c in table.header[1:]) and table.rows
    # under a label alone ("Assets"), its first row of figures: section labels may come first ("Current assets")
    first = next((r for r in table.rows[:LABEL_ROWS] if _figure_places(r)), table.rows[0]) if labelled \
        else table.header
    places = _figure_places(first)
    if len(years) < 2 or len(places) != len(years):
        return table
    days = list(dict.fromkeys(m.group(1).title() for m in _DAY.finditer(line.text)))
    cells = [table.header[0] if labelled else ""] + [""] * (len(table.header) - 1)
    for i, year in zip(places, years):
        cells[i] = f"{days[0]}, {year}" if len(days) == 1 else year
    return _reheaded(table, tuple(cells), table.rows if labelled else (table.header, *table.rows))


LABEL_ROWS = 4  # the rows under a table's label alone where its first figures are looked for


def _figure_places(row: Sequence[str]) -> list[int]:
    """The columns of a row (but its label's) that hold a figure."""
    return [i for i, c in enumerate(row) if i and _FIGURE_CELL.match(c.strip().replace("$", "").strip())]


def _reheaded(table: Block, header: tuple[str, ...], rows: tuple[tuple[str, ...], ...]) -> Block:
    """The table with a new header over these rows (its old header among them, first, when it became a row: the
    rows' pages then start with the table's own)."""
    meta = dict(table.meta)
    if "row_pages" in meta and len(rows) > len(table.rows):
        meta["row_pages"] = [table.page, *meta["row_pages"]]
    return replace(table, header=header, rows=rows, text=table_text(header, rows), meta=meta)


def _more_boxes(first: Block, second: Block) -> dict[str, Any]:
    return {**first.meta, "boxes": [*first.meta.get("boxes", []), *second.meta.get("boxes", [])]}


def _is_heading(block: Block, size: float, bold: bool, body: float) -> bool:
    if block.type not in ("paragraph", "list") or not body:
        return False
    words = len(block.text.split())
    if not any(ch.isalnum() for ch in block.text):
        return False  # dot leaders, rules of dashes
    if words > 25 or (block.text.endswith((".", ",", ";")) and words > 8):
        return False
    if size >= body * 1.15 or (bold and size >= body * 1.08):
        return not (words > 12 and SENTENCE_END.search(block.text))
    if size >= body * 1.05 and SECTION_NUMBER.match(block.text) and words <= 14:
        return not SENTENCE_END.search(block.text)  # "(1) Scope", "2.3 Results" set a little larger
    return bold and words <= 14 and not SENTENCE_END.search(block.text) and abs(size - body) <= 0.15 * body


def _continues(prev: Block, block: Block) -> bool:
    """A table on the next page continues `prev` when its first row repeats prev's header."""
    if block.page is None or prev.page is None or block.page <= max(prev.meta.get("pages", [prev.page])):
        return False
    return block.header == prev.header and len(block.header) == len(prev.header)


def _heads(prev: Block, block: Block) -> bool:
    """A table of header rows alone (a few rows of names and years, no figure: "| Consumer Banking | | | Corporate
    Bank |" over "| (in millions) | 2021 | 2020 | Change |") right above, on the same page, a table as wide whose
    first row is figures: the header was set apart from its body by a gap, and is one table with it."""
    if prev.page != block.page or len(prev.header) != len(block.header) or len(prev.rows) > 3:
        return False
    heads = [prev.header, *prev.rows]
    if any(_FIGURE_CELL.match(c.strip().replace("$", "").strip()) and not _HAS_YEAR.fullmatch(c.strip())
           for row in heads for c in row[1:]):
        return False
    return any(_FIGURE_CELL.match(c.strip().replace("$", "").strip()) for c in block.header[1:] if c.strip())


def _joins(prev: Block, block: Block) -> bool:
    """A paragraph cut by a column or page break: no sentence end before, a lower-case start after."""
    return not TERMINAL.search(prev.text) and block.text[:1].islower()
