"""Page layout from positioned text: reading order across columns, lines, paragraphs, borderless tables,
lists and headings. Shared by the PDF text layer and OCR, which both give boxes of text with a size.

Coordinates are top-down (y grows downwards), in any unit as long as a page uses one.
"""

from __future__ import annotations

import re
import statistics
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ...types import Block, BlockType, table_text
from ..normalize import normalize_text

_BULLET = re.compile(r"^(?:[\u2022\u25cf\u25aa\u25a0\u2023\u2043\u25e6\u00b7*\u2013\-]|\(?\d{1,2}[.)]|\(?[a-z][.)])\s+")
_BULLET_ONLY = re.compile(r"^(?:[\u2022\u25cf\u25aa\u25a0\u2023\u2043\u25e6\u00b7*\u2013\-]|\d{1,2}[.)])$")
_SECTION_NUMBER = re.compile(r"^(?:\(\d{1,2}\)|\d{1,2}(?:\.\d{1,2})*\.?|[IVX]{1,4}\.|[A-Z]\.)\s+\S")
_CAPTION = re.compile(r"^(?:fig(?:ure)?|table|example|listing|chart|exhibit|plate)\.?\s*[\dA-Z]", re.IGNORECASE)
# a contents line: a title, a run of leader dots (". . ." or "....") and a page reference (digits or roman)
# a table's caption ("Table 5:", "TABLE: 3.2", "Exhibit A1"): the line above a table, not its first row
TABLE_CAPTION = re.compile(r"^(?:table|tab\.|exhibit|schedule)\s*[:.]?\s*(?:[A-Z]?[.\-]?\d+(?:[.\-]\d+)*|[IVXL]+)\b",
                           re.IGNORECASE)
TABLE_NOTE = re.compile(r"^(?:sources?|notes?|footnotes?)\b\s*[:.]", re.IGNORECASE)  # the line under a table
_LEADER = re.compile(r"^(.*?\S)\s*(?:\.\s?){4,}\s*([0-9]{1,4}|[ivxlcdm]{1,7}|[IVXLCDM]{1,7})$")
_TERMINAL = re.compile(r"[.!?:;\"')\]]$")
_SENTENCE_END = re.compile(r"[.!?:;,]$")  # a heading may end in a bracket or quote, not in a sentence mark


@dataclass(frozen=True)
class Box:
    """A run of text on one line (or a whole table region when `table` is set)."""

    text: str
    x0: float
    top: float
    x1: float
    bottom: float
    size: float
    bold: bool = False
    italic: bool = False
    font: str = ""  # the typeface, when the source names it (PDF): a change of face between lines starts a block
    table: Block | None = None

    @property
    def center(self) -> float:
        return (self.top + self.bottom) / 2

    @property
    def height(self) -> float:
        return self.bottom - self.top


@dataclass
class Line:
    boxes: list[Box]

    @property
    def top(self) -> float:
        return min(b.top for b in self.boxes)

    @property
    def bottom(self) -> float:
        return max(b.bottom for b in self.boxes)

    @property
    def x0(self) -> float:
        return min(b.x0 for b in self.boxes)

    @property
    def size(self) -> float:
        return max(b.size for b in self.boxes)

    @property
    def bold(self) -> bool:
        return all(b.bold for b in self.boxes)

    @property
    def italic(self) -> bool:
        return all(b.italic for b in self.boxes)

    @property
    def font(self) -> str:
        return _main_font(self.boxes)

    @property
    def text(self) -> str:
        return " ".join(b.text for b in self.boxes)


@dataclass
class PageText:
    """One page's laid-out content, before headings are decided over the whole document."""

    page: int
    blocks: list[tuple[Block, float, bool]] = field(default_factory=list)  # block, font size, strong (bold)


def lines_to_boxes(words: Sequence[Box], gap_factor: float = 1.0) -> list[Box]:
    """Words -> boxes: words on one visual line joined while the gap stays under `gap_factor` x size.

    A wide gap (a column gutter, a table column) starts a new box, so interleaved columns separate."""
    out: list[Box] = []
    # an unmapped glyph alone at a line start is a bullet drawn from a symbol font
    words = [replace(w, text="\u2022") if _CID.match(w.text) else w for w in words]
    for line in _group_lines(list(words)):
        line.sort(key=lambda b: b.x0)
        run = [line[0]]
        for w in line[1:]:
            if w.x0 - run[-1].x1 > gap_factor * max(w.size, run[-1].size):
                out.append(_merge(run))
                run = [w]
            else:
                run.append(w)
        out.append(_merge(run))
    return out


_CID = re.compile(r"^\(cid:\d+\)$")
TOUCHING = 0.05  # of the text size: a gap this narrow between two words is no space


def _merge(words: list[Box]) -> Box:
    sizes = sorted(w.size for w in words)
    # words of one size that touch are one word set in two faces (an italic colon, a bold first letter)
    text = words[0].text + "".join(("" if _touch(p, w) else " ") + w.text for p, w in zip(words, words[1:]))
    return Box(text=text, x0=min(w.x0 for w in words), top=min(w.top for w in words),
               x1=max(w.x1 for w in words), bottom=max(w.bottom for w in words), size=sizes[len(sizes) // 2],
               bold=sum(len(w.text) for w in words if w.bold) * 2 > sum(len(w.text) for w in words),
               italic=sum(len(w.text) for w in words if w.italic) * 2 > sum(len(w.text) for w in words),
               font=_main_font(words))


def _main_font(boxes: Sequence[Box]) -> str:
    """The typeface of most of the boxes' characters (the first met of those tied)."""
    count: dict[str, int] = {}
    for b in boxes:
        if b.text:
            count[b.font] = count.get(b.font, 0) + len(b.text)
    return max(count.items(), key=lambda kv: kv[1])[0]


def _touch(a: Box, b: Box) -> bool:
    return b.x0 - a.x1 < TOUCHING * min(a.size, b.size) and abs(a.size - b.size) <= 0.1 * max(a.size, b.size)


def _group_lines(boxes: list[Box]) -> list[list[Box]]:
    """Boxes whose vertical centres are within half a line height of the line's first box, in y order."""
    lines: list[list[Box]] = []
    left = right = 0.0  # how far the last line reaches: a box wholly beyond it overlaps none of its boxes
    for b in sorted(boxes, key=lambda b: (b.center, b.x0)):
        if lines:
            first = lines[-1][0]
            # boxes that overlap are on different lines; touching ones (a glyph's advance reaching past the next
            # glyph's start by a hair, as with a colon after a word) are not
            if abs(b.center - first.center) <= 0.5 * min(first.height, b.height) and (
                b.x0 >= right or b.x1 <= left or not any(
                    min(b.x1, o.x1) - max(b.x0, o.x0) > 0.2 * min(b.height, o.height) for o in lines[-1])
            ):
                lines[-1].append(b)
                left, right = min(left, b.x0), max(right, b.x1)
                continue
        lines.append([b])
        left, right = b.x0, b.x1
    return lines


def _gutter(boxes: Sequence[Box]) -> tuple[float, float] | None:
    """The widest vertical band crossed by at most a tenth of the boxes, with real text on both sides. When
    there is none, full-width boxes (a title, an abstract or a footnote over two columns) are set aside and the
    band is looked for among the others, provided both columns run down most of the page, so a two-column
    table inside single-column text is not taken for columns."""
    found = _band(boxes)
    if found is not None or len(boxes) < 6:
        return found
    left, right = min(b.x0 for b in boxes), max(b.x1 for b in boxes)
    narrow = [b for b in boxes if b.x1 - b.x0 < 0.55 * (right - left)]
    found = _band(narrow)
    if found is None:
        return None
    top, bottom = min(b.top for b in narrow), max(b.bottom for b in narrow)
    for side in ([b for b in narrow if b.x1 <= found[0]], [b for b in narrow if b.x0 >= found[1]]):
        if max(b.bottom for b in side) - min(b.top for b in side) < 0.5 * (bottom - top):
            return None
    return found


def _band(boxes: Sequence[Box]) -> tuple[float, float] | None:
    n = len(boxes)
    if n < 6:
        return None
    size = statistics.median(b.size for b in boxes)
    events = sorted({b.x0 for b in boxes} | {b.x1 for b in boxes})
    # counted by bisection in the boxes' sorted sides (a count over every box at every gap between sides was
    # quadratic): between two neighbouring sides a and b, a box is crossed when it starts at a or before and ends
    # at b or after, so the crossing count is the boxes started by a less those ended by a
    starts, ends = sorted(b.x0 for b in boxes), sorted(b.x1 for b in boxes)
    sweep = all(b.x0 <= b.x1 for b in boxes)
    best: tuple[float, float] | None = None
    limit = max(1, n // 10)
    start: float | None = None
    for a, b in zip(events, events[1:]):
        mid = (a + b) / 2
        if sweep and a < mid < b:
            crossing = bisect_right(starts, a) - bisect_right(ends, a)
        else:  # a box drawn backwards, or sides a hair apart: count as the test says
            crossing = sum(1 for box in boxes if box.x0 < mid < box.x1)
        if crossing <= limit:
            start = a if start is None else start
            end = b
            if end - start >= size and (best is None or end - start > best[1] - best[0]):
                left = bisect_right(ends, start)  # boxes ending at the band's start or before
                right = n - bisect_left(starts, end)  # boxes starting at its end or after
                if left >= 0.2 * n and right >= 0.2 * n:
                    best = (start, end)
        else:
            start = None
    return best


def reading_order(boxes: Sequence[Box]) -> list[list[Box]]:
    """Split a page into column leaves in reading order: full-width boxes cut the page into bands and each
    band reads its left column before its right one (recursively, so three columns work too)."""
    gutter = _gutter(boxes)
    if gutter is None:
        return [sorted(boxes, key=lambda b: (b.top, b.x0))] if boxes else []
    mid = (gutter[0] + gutter[1]) / 2  # a box spans the page only if it covers the gutter's middle
    spanning = sorted((b for b in boxes if b.x0 < mid < b.x1), key=lambda b: b.top)
    rest = [b for b in boxes if not b.x0 < mid < b.x1]
    leaves: list[list[Box]] = []
    cuts = [s.top for s in spanning] + [float("inf")]
    previous = float("-inf")
    open_span = False  # consecutive full-width boxes (a two-line title) share one leaf
    for i, cut in enumerate(cuts):
        band = [b for b in rest if previous <= b.top < cut]
        left = [b for b in band if b.x1 <= mid]
        right = [b for b in band if b.x0 >= mid]
        for side in (left, right):
            if side:
                leaves.extend(reading_order(side) if len(side) < len(boxes) else [sorted(side, key=_key)])
                open_span = False
        if i < len(spanning):
            if open_span:
                leaves[-1].append(spanning[i])
            else:
                leaves.append([spanning[i]])
                open_span = True
        previous = cut
    return leaves


def _key(b: Box) -> tuple[float, float]:
    return (b.top, b.x0)


MIN_GRID_COLUMNS = 3  # a page-level borderless table has this many columns; two-column ones are found per leaf
MIN_GRID_ROWS = 3  # lines with a box in at least MIN_GRID_COLUMNS columns
PROSE_WIDTH = 0.4  # a "column" whose boxes are this share of the page's text width, and long, is running text
PROSE_FILL = 0.75  # boxes this share of their column's width (median), of PROSE_CHARS characters, are running text
PROSE_CHARS = 25


def borderless_tables(boxes: Sequence[Box], *, whole_page: bool = True) -> list[Box]:
    """Borderless tables found on the whole page, before it is cut into columns (whose gutters a table's own
    column gaps would otherwise pass for): runs of lines with boxes in three columns or more, joined across at
    most two lines with fewer (a section label, a wrapped cell), with the columns that most of those lines
    share, and the lines just above that sit inside the columns as the header. Each table replaces its boxes
    by one table box."""
    free = [b for b in boxes if b.table is None]
    if len(free) < MIN_GRID_COLUMNS * MIN_GRID_ROWS:
        return list(boxes)
    lines = [sorted(g, key=lambda b: b.x0) for g in _group_lines(free)]
    size = statistics.median(b.size for b in free)
    width = max(b.x1 for b in free) - min(b.x0 for b in free)
    taken: set[int] = set()
    tables: list[Box] = []
    i = 0
    while i < len(lines):
        if len(lines[i]) < MIN_GRID_COLUMNS or TABLE_CAPTION.match(lines[i][0].text):
            i += 1
            continue
        last, k = i, i + 1
        while k < len(lines) and _top(lines[k]) - _bottom(lines[k - 1]) <= 2.0 * size:
            if len(lines[k]) >= MIN_GRID_COLUMNS:
                last = k
            elif k - last > 2:
                break
            k += 1
        body = list(range(i, last + 1))
        grid = _grid_columns([lines[j] for j in body if len(lines[j]) >= MIN_GRID_COLUMNS], width)
        if grid is None:
            i = last + 1
            continue
        head: list[int] = []
        j = i - 1
        while j >= 0 and j not in taken and len(head) < 3 and not TABLE_CAPTION.match(lines[j][0].text) \
                and _top(lines[j + 1]) - _bottom(lines[j]) <= 1.5 * size \
                and all(grid[0][0] - size <= b.x0 and b.x1 <= grid[-1][1] + size for b in lines[j]):
            head.insert(0, j)
            j -= 1
        tables.append(_grid_table([lines[h] for h in head], [lines[b] for b in body], grid))
        taken.update(head + body)
        i = last + 1
    if not tables:
        return list(boxes)
    kept = [b for k, line in enumerate(lines) if k not in taken for b in line]
    # page columns show in the text away from the tables (a table's header lines left out must not pass for one)
    away = [b for b in kept if all(b.bottom < t.top - 3 * size or b.top > t.bottom + 3 * size for t in tables)]
    gutter = _gutter(away) if whole_page else None
    if gutter is not None:
        # the text around the tables runs in two columns: a "table" across the gutter is a table in one column
        # with the other column's lines beside it; look again on each side
        mid = (gutter[0] + gutter[1]) / 2
        # ... unless its rows run across the gutter: a table's rows have cells on both sides, while a column of
        # running text beside a table only now and then shares a line with one of its rows
        across = [t for t in tables if t.x0 < mid < t.x1 and _both_sides(t, free, mid) < 0.8]
        if across:
            inside = [b for b in free if any(t.top <= b.center <= t.bottom and t.x0 <= b.x0 and b.x1 <= t.x1
                                             for t in across)]
            again = [*borderless_tables([b for b in inside if b.x1 <= mid], whole_page=False),
                     *borderless_tables([b for b in inside if b.x1 > mid], whole_page=False)]
            return [*[b for b in boxes if b.table is not None], *kept, *[t for t in tables if t not in across],
                    *again]
    return [*[b for b in boxes if b.table is not None], *kept, *tables]


def _both_sides(table: Box, boxes: Sequence[Box], mid: float) -> float:
    """The share of a table's lines with text on both sides of x = mid."""
    lines = _group_lines([b for b in boxes if table.top <= b.center <= table.bottom and table.x0 <= b.x0
                          and b.x1 <= table.x1])
    both = sum(1 for ln in lines if any(b.x1 <= mid for b in ln) and any(b.x0 >= mid for b in ln))
    return both / max(1, len(lines))


def _top(line: Sequence[Box]) -> float:
    return min(b.top for b in line)


def _bottom(line: Sequence[Box]) -> float:
    return max(b.bottom for b in line)


def _grid_columns(lines: Sequence[Sequence[Box]], page_width: float) -> list[tuple[float, float]] | None:
    """The column spans most of these lines agree on: x ranges covered by a box in more than a fifth of the
    lines, so a cell run into its neighbour on one line does not join two columns. None when there are too few
    lines or columns, or when a column is running text (wide boxes of long text: the other column of a
    two-column page beside a table)."""
    if len(lines) < MIN_GRID_ROWS:
        return None
    edges = sorted({b.x0 for ln in lines for b in ln} | {b.x1 for ln in lines for b in ln})
    limit = len(lines) / 5
    spans: list[list[float]] = []
    for a, b in zip(edges, edges[1:]):
        mid = (a + b) / 2
        covered = sum(1 for ln in lines if any(x.x0 <= mid <= x.x1 for x in ln))
        if covered > limit:
            if spans and spans[-1][1] == a:
                spans[-1][1] = b
            else:
                spans.append([a, b])
    if len(spans) < MIN_GRID_COLUMNS:
        return None
    columns = [[b for ln in lines for b in ln if x0 <= (b.x0 + b.x1) / 2 <= x1] for x0, x1 in spans]
    for inside in columns:
        if inside and statistics.median(b.x1 - b.x0 for b in inside) >= PROSE_WIDTH * page_width \
                and statistics.median(len(b.text) for b in inside) >= 40:
            return None
    if _running_text(columns, [(x0, x1) for x0, x1 in spans]):
        return None
    return [(x0, x1) for x0, x1 in spans]


def _running_text(columns: Sequence[Sequence[Box]], spans: Sequence[tuple[float, float]]) -> bool:
    """Columns of running text (a page set in three columns or more), not a table: two thirds of the columns hold
    lines of words that fill the column's width. (Two columns of text are told apart by the page's gutter.)"""
    running = sum(1 for inside, (x0, x1) in zip(columns, spans) if inside
                  and statistics.median(b.x1 - b.x0 for b in inside) >= PROSE_FILL * (x1 - x0)
                  and statistics.median(len(b.text) for b in inside) >= PROSE_CHARS and _wordy(inside))
    return len(spans) >= 3 and running * 3 >= 2 * len(spans)


def _wordy(boxes: Sequence[Box]) -> bool:
    """Mostly letters: prose, not figures."""
    text = "".join(b.text for b in boxes)
    return sum(ch.isalpha() for ch in text) >= 0.7 * sum(not ch.isspace() for ch in text)


def _column_of(box: Box, grid: Sequence[tuple[float, float]]) -> int:
    """The first column the box overlaps (a box over several is a spanning cell), else the nearest."""
    for c, (x0, x1) in enumerate(grid):
        if box.x0 < x1 and x0 < box.x1:
            return c
    return min(range(len(grid)), key=lambda c: min(abs(box.x0 - grid[c][1]), abs(box.x1 - grid[c][0])))


def _grid_table(head: Sequence[Sequence[Box]], body: Sequence[Sequence[Box]], grid: list[tuple[float, float]]) -> Box:
    def cells(lines: Sequence[Sequence[Box]]) -> list[str]:
        row = [""] * len(grid)
        for line in lines:
            for b in line:
                c = _column_of(b, grid)
                row[c] = f"{row[c]} {b.text}".strip()
        return [normalize_text(c) for c in row]

    rows = [cells([line]) for line in body]
    header, rows = (cells(head), rows) if head else (rows[0], rows[1:])
    block = Block("table", table_text(header, rows), header=tuple(header), rows=tuple(tuple(r) for r in rows),
                  meta={"borderless": True})
    every = [b for line in (*head, *body) for b in line]
    sizes = sorted(b.size for b in every)
    return Box("", min(b.x0 for b in every), min(b.top for b in every), max(b.x1 for b in every),
               max(b.bottom for b in every), sizes[len(sizes) // 2], table=block)


def _aligned_table(lines: list[Line], start: int, above: Sequence[Line] = ()) -> tuple[Block, int, int] | None:
    """A borderless table: from `start`, at least three lines with the same number (>= 2) of boxes whose
    left or right edges line up column by column. Lines just `above` it whose boxes each sit over one column
    (a header on two lines, or with empty corner cells) are taken as its header. Returns the block, the end of
    its lines and how many of the lines above it took."""
    width = len(lines[start].boxes)
    if width < 2 or _BULLET_ONLY.match(lines[start].boxes[0].text):
        return None
    size = lines[start].size
    cols = [(b.x0, b.x1) for b in lines[start].boxes]
    end = start + 1
    while end < len(lines) and len(lines[end].boxes) == width:
        ok = all(abs(b.x0 - c0) <= size or abs(b.x1 - c1) <= size or (b.x0 < c1 and c0 < b.x1)
                 for b, (c0, c1) in zip(lines[end].boxes, cols))
        gap = lines[end].top - lines[end - 1].bottom
        if not ok or gap > 2.5 * size:
            break
        end += 1
    if end - start < 3:
        return None
    body = lines[start:end]
    spans = [(min(ln.boxes[c].x0 for ln in body), max(ln.boxes[c].x1 for ln in body)) for c in range(width)]
    if _running_text([[ln.boxes[c] for ln in body] for c in range(width)], spans):
        return None
    head = _header_lines(above, body[0], spans, size)
    if head:
        # a bold first line over plain rows is the lower level of a two-level header
        if body[0].bold and not any(ln.bold for ln in body[1:]):
            head, body = [*head, body[0]], body[1:]
        cells = [""] * width
        for line in head:
            for b in line.boxes:
                c = next(c for c, (x0, x1) in enumerate(spans) if b.x0 < x1 and x0 < b.x1)
                cells[c] = f"{cells[c]} {b.text}".strip()
        header = tuple(normalize_text(c) for c in cells)
    else:
        header, body = tuple(normalize_text(b.text) for b in body[0].boxes), body[1:]
    rows = tuple(tuple(normalize_text(b.text) for b in line.boxes) for line in body)
    return Block("table", table_text(header, rows), header=header, rows=rows, meta={"borderless": True}), end, len(head)


def _contents_table(lines: list[Line], start: int) -> tuple[Block, int] | None:
    """A table of contents: three lines or more of "title . . . . page". It becomes a two-column table of
    titles and page references, the dot leaders dropped (they are layout, and would fill a chunk with dots)."""
    end = start
    rows: list[tuple[str, str]] = []
    while end < len(lines):
        m = _LEADER.match(normalize_text(lines[end].text))
        if m is None or not any(ch.isalnum() for ch in m.group(1)):  # leaders alone: their title is elsewhere
            break
        rows.append((m.group(1), m.group(2)))
        end += 1
    if len(rows) < 3:
        return None
    header, body = rows[0], tuple(rows[1:])
    return Block("table", table_text(header, body), header=header, rows=body, meta={"contents": True}), end


def _header_lines(above: Sequence[Line], first: Line, spans: list[tuple[float, float]], size: float) -> list[Line]:
    """The lines right above a borderless table that read as its header: at most three, close together, each
    box over exactly one column and no two boxes of a line over the same one; a line of one box must be bold,
    so a sentence ending over the first column is not taken."""
    head: list[Line] = []
    below = first
    for line in reversed(above[-3:]):
        if below.top - line.bottom > 1.5 * size:
            break
        over = [[c for c, (x0, x1) in enumerate(spans) if b.x0 < x1 and x0 < b.x1] for b in line.boxes]
        if any(len(o) != 1 for o in over) or len({o[0] for o in over}) != len(over):
            break
        if len(line.boxes) < 2 and not line.bold:
            break
        head.insert(0, line)
        below = line
    return head


def leaf_blocks(leaf: Sequence[Box], page: int) -> list[tuple[Block, float, bool]]:
    """One column leaf -> blocks: tables as they are, aligned multi-box lines as borderless tables, the
    rest grouped into paragraphs and list items by line spacing, size and weight."""
    out: list[tuple[Block, float, bool]] = []
    lines: list[Line] = []
    for group in _group_lines([b for b in leaf if b.table is None]):
        lines.append(Line(sorted(group, key=lambda b: b.x0)))
    tables = sorted((b for b in leaf if b.table is not None), key=_key)
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
            contents = _contents_table(run, j)
            if contents is not None:
                flush()
                block, end = contents
                box = _where(page, min(ln.x0 for ln in run[j:end]), line.top,
                             max(b.x1 for ln in run[j:end] for b in ln.boxes), run[end - 1].bottom)
                out.append((replace(block, page=page, meta={**block.meta, "boxes": [box]}), line.size, False))
                j = end
                continue
            found = _aligned_table(run, j, current) if len(line.boxes) >= 2 else None
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
    return bool(_BULLET.match(line.text)) and not _BULLET_ONLY.match(line.text)


def _paragraph(lines: list[Line], page: int) -> tuple[Block, float, bool]:
    text = normalize_text("\n".join(_line_text(line) for line in lines))
    text = " ".join(part for part in text.split("\n") if part)
    kind: BlockType = "list" if _BULLET.match(text) else "paragraph"
    size = statistics.median(line.size for line in lines)
    box = _where(page, min(ln.x0 for ln in lines), lines[0].top, max(b.x1 for ln in lines for b in ln.boxes),
                 lines[-1].bottom)
    # an italic line in title case standing alone is a run-in style heading ("Elastic Stop Nut"), as strong
    # as a bold one
    strong = all(line.bold for line in lines) or (
        len(lines) == 1 and lines[0].italic and _title_case(text) and not _CAPTION.match(text))
    return Block(kind, text, page=page, meta={"boxes": [box]}), size, strong


def _title_case(text: str) -> bool:
    words = [w for w in re.split(r"[\s-]+", text) if len(w) > 3 and w[0].isalpha()]
    return bool(words) and text[:1].isupper() and sum(w[0].isupper() for w in words) * 3 >= len(words) * 2


def _where(page: int, x0: float, top: float, x1: float, bottom: float) -> dict[str, Any]:
    """Where a block sits: its page and bounding box (x0, top, x1, bottom; PDF points, or pixels for images)."""
    return {"page": page, "bbox": [round(x0, 1), round(top, 1), round(x1, 1), round(bottom, 1)]}


def _line_text(line: Line) -> str:
    parts = [b.text for b in line.boxes]
    if len(parts) > 1 and _BULLET_ONLY.match(parts[0]):
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
            merged = prev.rows + block.rows
            pages_ = sorted({*prev.meta.get("pages", [prev.page]), block.page})
            boxes = [*prev.meta.get("boxes", []), *block.meta.get("boxes", [])]
            row_pages = [*prev.meta.get("row_pages", [prev.page] * len(prev.rows)), *[block.page] * len(block.rows)]
            blocks[-1] = replace(prev, text=table_text(prev.header, merged), rows=merged,
                                 meta={**prev.meta, "pages": pages_, "boxes": boxes, "row_pages": row_pages})
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
    return blocks


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
        return not (words > 12 and _SENTENCE_END.search(block.text))
    if size >= body * 1.05 and _SECTION_NUMBER.match(block.text) and words <= 14:
        return not _SENTENCE_END.search(block.text)  # "(1) Scope", "2.3 Results" set a little larger
    return bold and words <= 14 and not _SENTENCE_END.search(block.text) and abs(size - body) <= 0.15 * body


def _continues(prev: Block, block: Block) -> bool:
    """A table on the next page continues `prev` when its first row repeats prev's header."""
    if block.page is None or prev.page is None or block.page <= max(prev.meta.get("pages", [prev.page])):
        return False
    return block.header == prev.header and len(block.header) == len(prev.header)


def _joins(prev: Block, block: Block) -> bool:
    """A paragraph cut by a column or page break: no sentence end before, a lower-case start after."""
    return not _TERMINAL.search(prev.text) and block.text[:1].islower()
