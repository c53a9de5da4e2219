"""Tables drawn with rules in a PDF (pdfplumber finds their grid): a grid's cells read from the characters
inside them, cells merged across rules that do not close, rotated text, shading that is not a rule, a grid that
cuts words refined by the words' own columns, and a caption or note ruled in with the table told apart."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from ...types import Block, table_text
from ..normalize import normalize_text
from .borderless import borderless_tables
from .geometry import TABLE_CAPTION, TABLE_NOTE, is_figure, lines_to_boxes
from .office import Span, kept_spans, table_block
from .pdfwords import LONE_CID, visual_to_logical, word_box


def table_block_of(rows: list[list[str | None]], spans: list[Span] | None = None) -> Block | None:
    """A ruled table found by pdfplumber, when it has at least two rows and two columns: anything smaller is a
    box drawn around text, which stays text."""
    grid = [["" if c is None else _cell_text(c) for c in row] for row in rows]
    block = table_block(grid, spans=spans)
    if block is None or block.type != "table" or max(len(r) for r in grid) < 2:
        return None
    return block


def caption_and_note(raw: list[list[str | None]]) -> tuple[bool, bool]:
    """Whether a ruled table's first and last rows are its caption ("Table 3: ...") and note ("Source: ..."),
    drawn inside its frame as one cell across the whole row: text about the table, not rows of it. Only in a
    table of four rows or more."""
    def spanning(row: list[str | None], pattern: re.Pattern[str]) -> bool:
        values = {normalize_text(c) for c in row if c and c.strip()}
        return len(values) == 1 and bool(pattern.match(values.pop()))

    filled = [r for r in raw if any(r)]
    if len(filled) < 4:
        return False, False
    return spanning(filled[0], TABLE_CAPTION), spanning(filled[-1], TABLE_NOTE)


def _cell_text(text: str) -> str:
    """A ruled table cell as read: right-to-left lines in logical order, a lone unmapped glyph as a bullet."""
    return "\n".join(visual_to_logical(LONE_CID.sub("\u2022", line)) for line in text.split("\n"))


def ruled_grid(table: Any, rows: list[list[str | None]],
                words: list[dict[str, Any]]) -> tuple[list[list[str | None]], list[Span]]:
    """A ruled table's cells as a reader sees them, and its merged cells: a merged cell's text once, at the first
    position it covers, with its span; a body row drawn without rules between its lines split into those lines;
    the columns and rows that only a partial rule made (nothing in them but covered or empty positions) left
    out."""
    cells: list[tuple[float, ...]] = [tuple(b) for row in table.rows for b in row.cells if b is not None]
    starts: dict[tuple[float, ...], tuple[int, int]] = {}  # a cell's box -> the (row, column) its text is at
    extent: dict[tuple[float, ...], list[int]] = {}  # a merged cell's box -> its last row and column
    columns = [c.bbox for c in table.columns]
    out: list[list[str | None]] = []
    for i, (row, values) in enumerate(zip(table.rows, rows)):
        if not any(values):
            continue  # a row of covered and empty positions
        lines = None
        if i > 0 and None not in row.cells:
            _, top, _, bottom = row.bbox
            lines = _merged_lines(row.cells, [w for w in words if top <= (w["top"] + w["bottom"]) / 2 <= bottom])
        if lines:
            out.extend(lines)
            continue
        r = len(out)
        for j, bbox in enumerate(row.cells):
            if bbox is not None:
                starts[tuple(bbox)] = (r, j)
        for j, value in enumerate(values):
            if value is None and row.cells[j] is None and j < len(columns):
                x, y = (columns[j][0] + columns[j][2]) / 2, (row.bbox[1] + row.bbox[3]) / 2
                box = next((b for b in cells if b[0] <= x <= b[2] and b[1] <= y <= b[3]), None)
                if box is not None and box in starts:
                    last = extent.setdefault(box, list(starts[box]))
                    last[0], last[1] = max(last[0], r), max(last[1], j)
        out.append(list(values))
    width = max((len(r) for r in rows), default=0)
    cols = [j for j in range(width) if any(j < len(r) and r[j] for r in rows)]
    merged = [(*starts[box], r1 - starts[box][0] + 1, c1 - starts[box][1] + 1) for box, (r1, c1) in extent.items()]
    spans = [(r, c, h, w) for r, c, h, w in kept_spans(merged, list(range(len(out))), cols)]
    return [[row[j] for j in cols if j < len(row)] for row in out], spans


def _merged_lines(cells: list[tuple[float, float, float, float]],
                  words: list[dict[str, Any]]) -> list[list[str | None]] | None:
    """A body row whose cells hold many lines that line up across the row, figures among them, is many rows drawn
    without rules between them: the row split at its lines. A cell of wrapped text beside single-line cells, or
    wrapped text in every cell, stays one row."""
    per_cell = [[w for w in words if c[0] <= (w["x0"] + w["x1"]) / 2 <= c[2]
                 and c[1] <= (w["top"] + w["bottom"]) / 2 <= c[3]] for c in cells]
    every = sorted((w for ws in per_cell for w in ws), key=lambda w: w["top"])
    if not every:
        return None
    height = sorted(w["bottom"] - w["top"] for w in every)[len(every) // 2]
    bands: list[list[float]] = []  # [top, bottom] of each line across the row
    for w in every:
        if bands and w["top"] <= bands[-1][0] + height / 2:
            bands[-1][1] = max(bands[-1][1], w["bottom"])
        else:
            bands.append([w["top"], w["bottom"]])
    if len(bands) < 3:
        return None

    def band_of(w: dict[str, Any]) -> int:
        return max(k for k, b in enumerate(bands) if w["top"] >= b[0] - height / 2)

    split = [[" ".join(w["text"] for w in sorted(ws, key=lambda w: w["x0"]) if band_of(w) == k) for ws in per_cell]
             for k in range(len(bands))]
    multi = [j for j in range(len(cells)) if sum(1 for r in split if r[j]) >= 3]
    numeric = [j for j in multi if sum(1 for r in split if is_figure(r[j])) * 3 >= 2 * sum(1 for r in split if r[j])]
    across = sum(1 for r in split if sum(1 for c in r if c) >= 2)  # lines that run across the row (half at least)
    if len(multi) < 2 or not numeric or across * 2 < len(split):
        return None
    return [[_cell_text(c) for c in r] for r in split]


_EDGE_TOLERANCE = 3.0  # points: rules this close are the same rule (pdfplumber's snap tolerance)


def closing_edges(page: Any) -> list[dict[str, Any]]:
    """Vertical edges for ruled tables drawn without their outer sides (common in Korean and Japanese
    documents, and in reports whose stub column or last column is open): where two or more horizontal rules
    run past a table's outermost column rule, the missing side is added from the first of them to the last, so
    the first and last columns are cells too."""
    from pdfplumber.table import merge_edges

    straight = [e for e in page.edges if e.get("orientation") in ("h", "v")]  # curves give slanted edges too
    edges = merge_edges(straight, _EDGE_TOLERANCE, _EDGE_TOLERANCE, _EDGE_TOLERANCE, _EDGE_TOLERANCE)
    # the short sides of a rule drawn as a thin rectangle are no column rules (pdfplumber's edge_min_length)
    verticals = [e for e in edges if e["orientation"] == "v" and e["bottom"] - e["top"] >= _EDGE_TOLERANCE]
    rules = [e for e in edges if e["orientation"] == "h"]
    # column rules that overlap down the page, merged into runs: each run is one table
    runs: list[list[Any]] = []  # top, bottom, the rules' x
    for v in sorted(verticals, key=lambda v: (v["top"], v["x0"])):
        if runs and v["top"] <= runs[-1][1] + _EDGE_TOLERANCE:
            runs[-1][1] = max(runs[-1][1], v["bottom"])
            runs[-1][2].append(v["x0"])
        else:
            runs.append([v["top"], v["bottom"], [v["x0"]]])
    added = []
    for top, bottom, xs in runs:
        if len(set(round(x) for x in xs)) < 2:
            continue
        left, right = min(xs), max(xs)
        across = [h for h in rules if top - _EDGE_TOLERANCE <= h["top"] <= bottom + _EDGE_TOLERANCE
                  and h["x0"] < right and h["x1"] > left]
        if len(across) < 2:
            continue
        for end in ("x0", "x1"):
            x = min(h["x0"] for h in across) if end == "x0" else max(h["x1"] for h in across)
            far = [h for h in across if abs(h[end] - x) <= _EDGE_TOLERANCE]  # the rules that reach that side
            y0, y1 = min(h["top"] for h in far), max(h["top"] for h in far)
            if len(far) >= 2 and not any(abs(v["x0"] - x) <= _EDGE_TOLERANCE and v["top"] <= y0 + _EDGE_TOLERANCE
                                         and v["bottom"] >= y1 - _EDGE_TOLERANCE for v in verticals):
                added.append({"object_type": "line", "x0": x, "x1": x, "top": y0, "bottom": y1,
                              "width": 0.0, "height": y1 - y0})
    return added


def rotated_direction(page: Any, bbox: tuple[float, float, float, float]) -> dict[str, str]:
    """How to read the turned text in a table (column headers set on end): pdfplumber reads it top to bottom,
    but headers turned a quarter counter-clockwise, the usual way, read bottom to top ("*JOBCTL", not
    "LTCBOJ*"). The text matrix says which way each glyph is turned."""
    x0, top, x1, bottom = bbox
    turned = [c["matrix"][1] for c in page.chars
              if not c["upright"] and x0 <= c["x0"] <= x1 and top <= c["top"] <= bottom]
    return {"char_dir_rotated": "btt"} if sum(1 for b in turned if b > 0) * 2 > len(turned) > 0 else {}


MAX_RULE_WIDTH = 2.0  # points: a filled rectangle thinner than this is a rule; a wider one is shading


def inset_shading(page: Any) -> set[int]:
    """Shading drawn inside other shading, inset by more than the snap tolerance (a cell's colour laid a few
    points inside its coloured frame): its sides are decoration, and taken for grid lines they split every
    column in two. Shading that tiles a table (coloured header cells side by side) is its grid and stays."""
    tol = _EDGE_TOLERANCE
    shading = [r for r in page.rects if r.get("fill") and not r.get("stroke")
               and min(r["width"], r["height"]) > MAX_RULE_WIDTH]
    shading.sort(key=lambda r: r["x0"])
    inset = set()
    for r in shading:
        for o in shading:
            if o["x0"] > r["x0"] + tol:
                break
            if o is r or not (o["x1"] >= r["x1"] - tol and o["top"] <= r["top"] + tol
                              and o["bottom"] >= r["bottom"] - tol):
                continue
            if max(r["x0"] - o["x0"], o["x1"] - r["x1"], r["top"] - o["top"], o["bottom"] - r["bottom"]) > tol:
                inset.add(id(r))
                break
    return inset




MIN_COLUMN_RULES = 0.5  # of a ruled table's height, drawn on its inner column lines on average


def column_rules(table: Any, verticals: list[dict[str, Any]]) -> float:
    """How much of a ruled table's inner column lines is drawn, as a share of its height (1.0 with no inner
    columns). A table ruled only across (a rule under each row, or a few short ticks) gets its columns from
    stray short edges, and read as a grid it puts each row in one cell copied into every column."""
    x0, top, x1, bottom = table.bbox
    height = bottom - top
    lines = sorted({round(c[0], 1) for row in table.rows for c in row.cells if c is not None
                    and x0 + _EDGE_TOLERANCE < c[0] < x1 - _EDGE_TOLERANCE})
    if not lines or height <= 0:
        return 1.0
    shares = []
    for x in lines:
        spans = sorted((max(top, e["top"]), min(bottom, e["bottom"])) for e in verticals
                       if abs(e["x0"] - x) <= _EDGE_TOLERANCE and e["bottom"] > top and e["top"] < bottom)
        drawn, reach = 0.0, top
        for a, b in spans:
            if b > reach:
                drawn += b - max(a, reach)
                reach = b
        shares.append(drawn / height)
    return float(sum(shares) / len(shares))


def cuts_words(table: Any, words: list[dict[str, Any]]) -> bool:
    """Whether the grid's cell sides run through words (more than a tenth of those inside it, and more than
    two): real rules go between words, while rules met by chance (underlines, ticks, a frame round something
    else) cut them, and such a grid would read "class" as "c" and "l a ss"."""
    x0, top, x1, bottom = table.bbox
    inside = [w for w in words if x0 <= (w["x0"] + w["x1"]) / 2 <= x1 and top <= (w["top"] + w["bottom"]) / 2 <= bottom]
    rows = table.rows  # pdfplumber works them out again at each reading
    cut = 0
    for w in inside:
        cy = (w["top"] + w["bottom"]) / 2
        if any(c is not None and c[1] <= cy <= c[3] and any(w["x0"] < x - 1 and w["x1"] > x + 1 for x in (c[0], c[2]))
               for row in rows if row.bbox[1] <= cy <= row.bbox[3] for c in row.cells):
            cut += 1
    return cut > max(2, len(inside) / 10)


def finer(block: Block, bbox: tuple[float, float, float, float], words: list[dict[str, Any]]) -> Block:
    """A ruled table whose rules mark only groups of columns (a rule round "Male", none between its "Under 18" and
    "18 years and over"): when the text inside reads as one borderless table over the region whose rows hold a
    quarter more values apart, that finer table is the one a reader sees."""
    x0, top, x1, bottom = bbox
    inside = [word_box(w) for w in words
              if x0 <= (w["x0"] + w["x1"]) / 2 <= x1 and top <= (w["top"] + w["bottom"]) / 2 <= bottom]
    found = [b for b in borderless_tables(lines_to_boxes(inside), whole_page=False) if b.table is not None]
    if len(found) != 1 or found[0].table is None:
        return block
    finer = found[0].table
    if (found[0].bottom - found[0].top) < 0.8 * (bottom - top) or _filled(finer) < 1.25 * _filled(block):
        return block  # not the same table, or not more values apart: the rules stand
    return replace(finer, text=table_text(finer.header, finer.rows))


def _filled(block: Block) -> float:
    """Non-empty cells per body row: how far a reading takes the values apart."""
    return sum(sum(1 for c in row if c) for row in block.rows) / max(1, len(block.rows))


Middle = tuple[float, float, dict[str, Any]]  # a character's middle across and down, and the character


def middles_of(chars: list[dict[str, Any]]) -> list[Middle]:
    return [((c["x0"] + c["x1"]) / 2, (c["top"] + c["bottom"]) / 2, c) for c in chars]


def cell_texts(table: Any, middles: list[Middle], **settings: Any) -> list[list[str | None]]:
    """pdfplumber's `Table.extract` (without its `layout` setting): each cell's text from the characters whose
    middle lies in it, as pdfplumber tests them, row by row. pdfplumber works out every character's middle again
    for every row and tests every character on the page; here the middles are the page's, worked out once, and
    only those inside the table are tested (a row's box lies inside the table's, so the same are found)."""
    from pdfplumber.utils.text import extract_text

    x0, top, x1, bottom = table.bbox
    inside = [m for m in middles if x0 <= m[0] <= x1 and top <= m[1] <= bottom]
    texts: list[list[str | None]] = []
    for row in table.rows:
        rx0, rtop, rx1, rbottom = row.bbox
        in_row = [m for m in inside if rx0 <= m[0] < rx1 and rtop <= m[1] < rbottom]
        cells: list[str | None] = []
        for cell in row.cells:
            if cell is None:
                cells.append(None)
                continue
            cx0, ctop, cx1, cbottom = cell
            chars = [m[2] for m in in_row if cx0 <= m[0] < cx1 and ctop <= m[1] < cbottom]
            cells.append(extract_text(chars, **settings) if chars else "")
        texts.append(cells)
    return texts
