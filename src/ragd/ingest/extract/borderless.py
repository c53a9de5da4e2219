"""Tables drawn without rules, found from word boxes alone: a grid of columns that lines keep to, its header
above, wrapped cells joined, running text beside it and captions or notes around it told apart; and tables of
lines aligned in a leaf (figures in columns, tables of contents)."""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ...types import Block, table_text
from ..normalize import normalize_text
from .geometry import (
    BULLET_ONLY,
    LEADER,
    TABLE_CAPTION,
    TABLE_NOTE,
    TOUCHING,
    Box,
    Line,
    column_gutter,
    group_lines,
    is_figure,
    merge,
)

MIN_GRID_COLUMNS = 3  # a borderless table of words has this many columns; of labels and figures, two will do
MIN_GRID_ROWS = 3  # lines with a box in at least two columns
MIN_FIGURES = 0.6  # a two-column table's second column: this share of its cells are figures
PROSE_WIDTH = 0.4  # a "column" whose boxes are this share of the page's text width, and long, is running text
PROSE_FILL = 0.75  # boxes this share of their column's width (median), of PROSE_CHARS characters, are running text
PROSE_CHARS = 25
PROSE_GOES_ON = 0.3  # a column of running text beside a table: this share of its lines start in lower case,
SIDE_FILL = 0.6  # ... its lines fill this share of its width (median)
SIDE_CHARS = 15  # ... and are this many characters long (median)
WRAPPED = 0.75  # a line this close under the line above (of the usual gap between rows) continues its cells
WRAP_GAP = 0.5  # of the text size: the most white between a cell's wrapped lines
MAX_WRAPPED = 8  # the most wrapped lines of a cell
MAX_HEAD = 6  # the most lines of a borderless table's header
MAX_HEAD_ABOVE = 3  # ... of them above its first line of cells in two columns (a title over the figure columns)




def borderless_tables(boxes: Sequence[Box], *, whole_page: bool = True) -> list[Box]:
    """Borderless tables found on the whole page, before it is cut into columns (whose gutters a table's own
    column gaps would otherwise pass for): runs of lines with boxes in two columns or more, joined across at
    most two lines with fewer (a section label, a wrapped cell), with the columns that most of those lines
    share (two only when the second holds figures: a label and a figure), and the lines just above that sit
    inside the columns as the header. A column of running text at the table's side (a page column beside the
    table) is left to the text. Each table replaces its boxes by one table box."""
    free = [b for b in boxes if b.table is None]
    if len(free) < 2 * MIN_GRID_ROWS:
        return list(boxes)
    size = statistics.median(b.size for b in free)
    lines = [_bulleted(sorted(g, key=lambda b: b.x0), size) for g in group_lines(free)]
    free = [b for line in lines for b in line]  # (a lone bullet joined to its text: one box)
    width = max(b.x1 for b in free) - min(b.x0 for b in free)
    # a box of words set in two columns is split where a gap wider than the page's spaces parts them
    spaces = [w.x0 - v.x1 for b in free for v, w in zip(b.words, b.words[1:]) if w.x0 - v.x1 > TOUCHING * b.size]
    space = statistics.median(spaces) if len(spaces) >= 10 else 0.25 * size  # (too few to tell: a usual space)
    body_gap, head_gap = max(SPLIT_GAP * size, 1.5 * space), max(HEAD_SPLIT_GAP * size, 2.0 * space)
    taken: set[int] = set()  # the boxes (ids) tables took
    used: set[int] = set()  # the lines that gave a table a box
    tables: list[Box] = []
    i = 0
    while i < len(lines):
        # a run starts at a line of three cells or more, or of a label and a figure, in type
        # not much smaller than the page's (letters set sideways down a margin come out as tiny stacked lines)
        if len(lines[i]) < 2 or (len(lines[i]) == 2 and not (is_figure(lines[i][1].text) and _word(lines[i][0])))\
                or TABLE_CAPTION.match(lines[i][0].text) or statistics.median(b.size for b in lines[i]) < 0.5 * size:
            i += 1
            continue
        last, k, loose = i, i + 1, 0
        reach = (lines[i][0].x0, lines[i][-1].x1)  # how wide the run's lines of cells go
        while k < len(lines) and _top(lines[k]) - _bottom(lines[k - 1]) <= 2.0 * size \
                and not TABLE_NOTE.match(lines[k][0].text) and not _footnote(lines[k]) \
                and not (len(lines[k]) == 1 and lines[k][0].x1 > reach[1] + 2 * size
                         and lines[k][0].x1 - lines[k][0].x0 > 0.5 * (reach[1] - reach[0])):
            # (notes end a table, and so does a wide line of one box running past it: a paragraph)
            if len(lines[k]) >= 2:
                last, loose = k, 0
                reach = (min(reach[0], lines[k][0].x0), max(reach[1], lines[k][-1].x1))
            elif loose or _top(lines[k]) - _bottom(lines[k - 1]) > WRAP_GAP * size or k - last > MAX_WRAPPED \
                    or lines[k][0].x1 - lines[k][0].x0 > 0.5 * (reach[1] - reach[0]):
                # (a cell's wrapped lines, set close and narrow, may be many; a paragraph's are wide, and after
                # one of them every line of one cell counts)
                loose += 1
                if loose > 2:
                    break
            k += 1
        # header lines at the top of the run (no figures but years) do not make columns: a header cell wider
        # than its figures, or set differently, would make a column of its own
        first = i
        if any(_data_line(lines[j]) for j in range(i, last + 1)):
            left = min(b.x0 for j in range(i, last + 1) for b in lines[j])
            # (not a group's label alone, nor, under a first header line, a line with a row label)
            while first - i < MAX_HEAD and not _data_line(lines[first]) \
                    and any(len(lines[j]) >= 2 for j in range(first + 1, last + 1)) \
                    and not ((len(lines[first]) == 1 or first > i) and lines[first][0].x0 <= left + size):
                first += 1
        # the columns come from the rows under the header; from the header too when the rows are too few (a
        # table's last row or two, continued on a page of their own under its repeated header)
        ruled = [lines[j] for j in range(first, last + 1) if len(lines[j]) >= 2]
        if len(ruled) < MIN_GRID_ROWS:
            ruled = [lines[j] for j in range(i, last + 1) if len(lines[j]) >= 2]
        found = _grid_columns(ruled, width, free, body_gap)
        if found is None:
            i = last + 1
            continue
        grid, (left_text, right_text) = found
        mine = [b for j in range(first, last + 1) for b in lines[j]
                if left_text <= (b.x0 + b.x1) / 2 <= right_text and grid[0][0] <= b.x1 and b.x0 <= grid[-1][1]]
        lo, hi = min(b.x0 for b in mine), max(b.x1 for b in mine)

        def within(b: Box, lo: float = lo, hi: float = hi, reach: float = size) -> bool:
            return lo - size <= b.x0 and b.x1 <= hi + reach

        def beside(b: Box, left: float = left_text, right: float = right_text) -> bool:  # the text at its side
            return b.x1 <= left or b.x0 >= right

        rows = list(range(first, last + 1))
        for j in range(last + 1, min(last + 1 + MAX_WRAPPED, len(lines))):  # the last row's wrapped lines
            parts = [b for b in lines[j] if within(b)]
            if not parts or len(parts) >= len(grid) or _top(lines[j]) - _bottom(lines[j - 1]) > WRAP_GAP * size:
                break
            rows.append(j)
        while len(rows) > MIN_GRID_ROWS and _note([b for b in lines[rows[-1]] if within(b)], grid):
            rows.pop()
        head = list(range(i, first))
        j = i - 1
        while j >= 0 and j not in used and len(head) < MAX_HEAD_ABOVE and not _caption(lines, j, size) \
                and _top(lines[j + 1]) - _bottom(lines[j]) <= 1.5 * size \
                and any(within(b, reach=4 * size) for b in lines[j]) \
                and all(within(b, reach=4 * size) or beside(b) for b in lines[j]):
            head.insert(0, j)
            j -= 1
        mine_by_line = {j: [b for b in lines[j] if (not beside(b) if j < first else within(b))] for j in (*head, *rows)}
        cut = {j: [p for b in line for p in _split(b, grid, head_gap if j < first else body_gap)]
               for j, line in mine_by_line.items()}
        # (a header cell may reach past its figures: set right over figures set left)
        tables.append(_grid_table([cut[h] for h in head], [cut[r] for r in rows if cut[r]], grid, size))
        taken.update(id(b) for line in mine_by_line.values() for b in line)
        used.update(cut)
        i = rows[-1] + 1
    if not tables:
        return list(boxes)
    kept = [b for b in free if id(b) not in taken]
    # page columns show in the text away from the tables (a table's header lines left out must not pass for one)
    away = [b for b in kept if all(b.bottom < t.top - 3 * size or b.top > t.bottom + 3 * size for t in tables)]
    gutter = column_gutter(away) if whole_page else None
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
            rest = [b for b in kept if b not in inside]
            again = [*borderless_tables([b for b in inside if b.x1 <= mid], whole_page=False),
                     *borderless_tables([b for b in inside if b.x1 > mid], whole_page=False)]
            return [*[b for b in boxes if b.table is not None], *rest, *[t for t in tables if t not in across],
                    *again]
    return [*[b for b in boxes if b.table is not None], *kept, *tables]


_YEAR = re.compile(r"(?:FY|Q[1-4]|H[12])\s*'?\d\d|(?:FY|Q[1-4]|H[12]|\d{1,2},)?\s*(?:19|20)\d\d[a-z]?|'\d\d"
                   r"|(?:19|20)\d\d\s*[-/\u2013]\s*\d{2,4}")  # "2023", "FY24", "Q1 2024", "31, 2023", "2023/24"


_AMOUNT = re.compile(r"[$\u20ac\u00a3\u00a5]\s*\d|\d[,.]\d")  # "$9,594 or less", "3.5 days"


def _data_line(line: Sequence[Box]) -> bool:
    """A line holding a figure other than a year ("2023", "FY2024", "2023/24"), or an amount in words ("$9,594 or
    less"): a table's row, not its header."""
    return any((is_figure(b.text) and not _YEAR.fullmatch(b.text)) or _AMOUNT.search(b.text) for b in line)


SPLIT_GAP = 0.3  # of the text size (and 1.5 spaces): a gap this wide between words in two columns parts their cells
HEAD_SPLIT_GAP = 0.5  # ... (and 2 spaces) in a header, whose titles span columns


def _split(box: Box, grid: Grid, gap: float) -> list[Box]:
    """A body box joined from words that lie in two columns or more (two figures set closer than the gap that
    parts boxes) split where a gap wider than a space parts words of different columns."""
    if len(box.words) < 2 or sum(1 for x0, x1 in grid if box.x0 < x1 and x0 < box.x1) < 2 \
            or merge(list(box.words)).text != box.text:  # (text rewritten since: right-to-left runs)
        return [box]
    groups = [[box.words[0]]]
    for w in box.words[1:]:
        last = groups[-1][-1]
        if w.x0 - last.x1 >= gap and _column_at(w, grid) != _column_at(last, grid):
            groups.append([w])
        else:
            groups[-1].append(w)
    return [box] if len(groups) == 1 else [merge(g) for g in groups]


def _column_at(box: Box, grid: Grid) -> int:
    """The column whose span holds the box's middle, else the nearest."""
    middle = (box.x0 + box.x1) / 2
    return min(range(len(grid)), key=lambda c: 0.0 if grid[c][0] <= middle <= grid[c][1]
               else min(abs(middle - grid[c][0]), abs(middle - grid[c][1])))


_MARKED = re.compile(r"(?:\(?\d{1,2}\)|\d{1,2}|[a-z]|\*{1,3}|[\u2020\u2021\u00a7\u00b6])\s+[A-Z]\w*\s+\w")


def _footnote(line: Sequence[Box]) -> bool:
    """A note under a table: a mark ("1", "(a)", "*", "\u2020"), then a sentence, and no figure on the line."""
    return len(line[0].text) >= 20 and bool(_MARKED.match(line[0].text)) \
        and not any(is_figure(b.text) for b in line[1:])


def _word(box: Box) -> bool:
    """Three letters or digits at least ("Employment", "15-24"): a row's label, not a stray glyph."""
    return sum(ch.isalnum() for ch in box.text) >= 3


def _caption(lines: Sequence[Sequence[Box]], j: int, size: float) -> bool:
    """Whether line j is a table's caption ("Table 3. ..."), or the last lines of one, set close under it."""
    while True:
        if TABLE_CAPTION.match(lines[j][0].text):
            return True
        if j == 0 or len(lines[j]) > 1 or _top(lines[j]) - _bottom(lines[j - 1]) > WRAP_GAP * size:
            return False
        j -= 1


def _note(line: Sequence[Box], grid: Grid) -> bool:
    """A line under a table that is one box running across its columns: a note, not a row."""
    return len(line) == 1 and sum(1 for x0, x1 in grid if line[0].x0 < x1 and x0 < line[0].x1) >= 2


def _both_sides(table: Box, boxes: Sequence[Box], mid: float) -> float:
    """The share of a table's lines with text on both sides of x = mid."""
    lines = group_lines([b for b in boxes if table.top <= b.center <= table.bottom and table.x0 <= b.x0
                          and b.x1 <= table.x1])
    both = sum(1 for ln in lines if any(b.x1 <= mid for b in ln) and any(b.x0 >= mid for b in ln))
    return both / max(1, len(lines))


def _top(line: Sequence[Box]) -> float:
    return min(b.top for b in line)


def _bottom(line: Sequence[Box]) -> float:
    return max(b.bottom for b in line)


Grid = list[tuple[float, float]]


def _grid_columns(lines: Sequence[Sequence[Box]], page_width: float, page: Sequence[Box] = (),
                  gap: float = float("inf")) -> tuple[Grid, tuple[float, float]] | None:
    """The column spans most of these lines agree on (x ranges covered by a box in more than a fifth of the
    lines, so a cell run into its neighbour on one line does not join two columns; a box counted as its runs of
    words parted by `gap` or more, so two figures set closer than the gap that parts boxes do not join theirs)
    and where the text left out at their sides begins (infinite when there is none).
    A column of running text at either side (wide boxes of long text, or lines of words filling the column that
    go on above or below the table: a page column beside it) is left out. None when there are too few lines or
    columns left, when two columns are not a label and figures, or when a column inside is running text."""
    if len(lines) < MIN_GRID_ROWS:
        return None
    runs = [[r for b in ln for r in _runs(b, gap)] for ln in lines]
    edges = sorted({x for ln in runs for r in ln for x in r})
    limit = len(lines) / 5
    spans: list[list[float]] = []
    for a, b in zip(edges, edges[1:]):
        mid = (a + b) / 2
        covered = sum(1 for ln in runs if any(x0 <= mid <= x1 for x0, x1 in ln))
        if covered > limit:
            if spans and spans[-1][1] == a:
                spans[-1][1] = b
            else:
                spans.append([a, b])
    columns = [[b for ln in lines for b in ln if x0 <= (b.x0 + b.x1) / 2 <= x1] for x0, x1 in spans]
    prose = [_prose(inside, (x0, x1), page_width, lines, page) for inside, (x0, x1) in zip(columns, spans)]
    left, right = float("-inf"), float("inf")  # where text left out at the sides begins
    while spans and prose[-1]:
        right = spans[-1][0]
        spans, columns, prose = spans[:-1], columns[:-1], prose[:-1]
    while spans and prose[0]:
        left = spans[0][1]
        spans, columns, prose = spans[1:], columns[1:], prose[1:]
    if len(spans) < 2 or any(prose):
        return None
    if len(spans) < MIN_GRID_COLUMNS and (  # two columns: a label and a figure on most lines
            sum(1 for b in columns[1] if is_figure(b.text)) < MIN_FIGURES * len(columns[1])
            or len(columns[1]) < MIN_GRID_ROWS or not columns[0]
            or statistics.median(len(b.text) for b in columns[0]) < 2):
        return None
    if _running_text(columns, [(x0, x1) for x0, x1 in spans]):
        return None
    return [(x0, x1) for x0, x1 in spans], (left, right)


def _runs(box: Box, gap: float) -> list[tuple[float, float]]:
    """A box's extent, or that of each run of its words parted by `gap` or more."""
    if len(box.words) < 2:
        return [(box.x0, box.x1)]
    out = [[box.words[0].x0, box.words[0].x1]]
    for w in box.words[1:]:
        if w.x0 - out[-1][1] >= gap:
            out.append([w.x0, w.x1])
        else:
            out[-1][1] = max(out[-1][1], w.x1)
    return [(a, b) for a, b in out]


def _prose(inside: Sequence[Box], span: tuple[float, float], page_width: float, lines: Sequence[Sequence[Box]],
           page: Sequence[Box]) -> bool:
    """Whether a column's boxes are running text: wide and long, or filling the column with words and going on
    above or below the lines (a column of the page beside a table, which its lines only happen to meet)."""
    # running text goes on from line to line (lines starting in lower case), where row labels each start anew
    if not inside or sum(1 for b in inside if b.text[:1].islower()) < PROSE_GOES_ON * len(inside):
        return False
    if statistics.median(b.x1 - b.x0 for b in inside) >= PROSE_WIDTH * page_width \
            and statistics.median(len(b.text) for b in inside) >= 40:
        return True
    # lines of words that fill the column (a narrow column of running text too), going on above or below
    if not _fills(inside, span, SIDE_FILL, SIDE_CHARS):
        return False
    x0, x1 = span
    top, bottom = min(_top(ln) for ln in lines), max(_bottom(ln) for ln in lines)
    size = statistics.median(b.size for b in inside)
    beyond = [b for b in page if x0 - size <= b.x0 and b.x1 <= x1 + size
              and (bottom < b.top <= bottom + 3 * size or top - 3 * size <= b.bottom < top)]
    return len(beyond) >= 2


def _running_text(columns: Sequence[Sequence[Box]], spans: Sequence[tuple[float, float]]) -> bool:
    """Columns of running text (a page set in three columns or more), not a table: two thirds of the columns hold
    lines of words that fill the column's width. (Two columns of text are told apart by the page's gutter.)"""
    running = sum(1 for inside, span in zip(columns, spans) if inside and _fills(inside, span, PROSE_FILL, PROSE_CHARS))
    return len(spans) >= 3 and running * 3 >= 2 * len(spans)


def _fills(inside: Sequence[Box], span: tuple[float, float], fill: float, chars: int) -> bool:
    """Whether a column's boxes are lines of words filling `fill` of its width, `chars` characters long (medians)."""
    return statistics.median(b.x1 - b.x0 for b in inside) >= fill * (span[1] - span[0]) \
        and statistics.median(len(b.text) for b in inside) >= chars and _wordy(inside)


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


def _spanned(box: Box, grid: Sequence[tuple[float, float]], line: Sequence[Box]) -> tuple[int, int]:
    """The columns a header box spans (first, count): one when it sits over one; a box over several (a title over
    the figure columns, often narrower than they are) spans the widest run of columns centred under it among
    those nearer to it than to its neighbours on the line (the row labels' column only when it is over it); a box
    over several and centred over none is a cell wider than its column, reaching into the next."""
    # a column's room: its span and half the gaps beside it
    edges = [float("-inf"), *((a[1] + b[0]) / 2 for a, b in zip(grid, grid[1:])), float("inf")]
    over = [c for c in range(len(grid)) if box.x0 < edges[c + 1] and edges[c] < box.x1]
    middle = (box.x0 + box.x1) / 2
    if len(line) == 1 and len(grid) > 2 and middle > grid[0][1] \
            and abs((grid[1][0] + grid[-1][1]) / 2 - middle) <= max(box.size, 0.1 * (grid[-1][1] - grid[1][0])):
        return 1, len(grid) - 1  # alone on its line and centred over all the columns right of the labels
    if len(over) < 2:
        return (over[0] if over else _column_of(box, grid)), 1
    k = line.index(box)
    lo = (line[k - 1].x0 + line[k - 1].x1 + 2 * middle) / 4 if k > 0 else float("-inf")
    hi = (line[k + 1].x0 + line[k + 1].x1 + 2 * middle) / 4 if k + 1 < len(line) else float("inf")
    free = [c for c, (x0, x1) in enumerate(grid) if lo <= (x0 + x1) / 2 <= hi and (c > 0 or 0 in over)]
    best: tuple[int, int] | None = None
    for first in (c for c in free if c <= over[0]):
        for last in (c for c in free if c >= over[-1]):
            width = grid[last][1] - grid[first][0]
            if abs((grid[first][0] + grid[last][1]) / 2 - middle) <= max(box.size, 0.1 * width) \
                    and (best is None or last - first + 1 > best[1]):
                best = (first, last - first + 1)
    if best is not None:
        return best
    return max(over, key=lambda c: min(box.x1, grid[c][1]) - max(box.x0, grid[c][0])), 1


def _grid_table(head: Sequence[Sequence[Box]], body: Sequence[Sequence[Box]], grid: list[tuple[float, float]],
                size: float) -> Box:
    def cells(lines: Sequence[Sequence[Box]]) -> list[str]:
        row = [""] * len(grid)
        for line in lines:
            for b in line:
                c = _column_of(b, grid)
                row[c] = f"{row[c]} {b.text}".strip()
        return [normalize_text(c) for c in row]

    # header lines: a line of cells spanning columns (a title over the figure columns) is a row of its own; the
    # lines of cells that wrap are joined, column by column
    spans: list[list[int]] = []
    top: list[list[str]] = []
    joined: list[str] | None = None
    for line in head:
        placed = [(_spanned(b, grid, line) if len(line) < len(grid) else (_column_of(b, grid), 1), b) for b in line]
        if any(n > 1 for (_, n), _ in placed):
            if joined is not None:
                top.append(joined)
                joined = None
            row = [""] * len(grid)
            for (c, n), b in placed:
                row[c] = f"{row[c]} {b.text}".strip()
                if n > 1:
                    spans.append([len(top), c, 1, n])
            top.append([normalize_text(c) for c in row])
        else:
            more = cells([line])
            joined = more if joined is None else [f"{a} {b}".strip() for a, b in zip(joined, more)]
    if joined is not None:
        top.append(joined)
    rows = [*top, *(cells([line]) for line in _wrapped_joined(body, grid, size))]
    header, rows = rows[0], rows[1:]
    meta: dict[str, Any] = {"borderless": True}
    if spans:
        meta["spans"] = spans
    block = Block("table", table_text(header, rows), header=tuple(header), rows=tuple(tuple(r) for r in rows),
                  meta=meta)
    every = [b for line in (*head, *body) for b in line]
    sizes = sorted(b.size for b in every)
    return Box("", min(b.x0 for b in every), min(b.top for b in every), max(b.x1 for b in every),
               max(b.bottom for b in every), sizes[len(sizes) // 2], table=block)


def _wrapped_joined(lines: Sequence[Sequence[Box]], grid: Sequence[tuple[float, float]],
                    size: float) -> list[list[Box]]:
    """A table's lines as its rows: a line with fewer cells than the rows around it that sits closer to the line
    above (or below) than rows sit to each other is a cell's wrapped text, joined to that row (a cell reads top to
    bottom; a row may stand on its label's first line or its last); at equal spacing, a line that starts in lower
    case continues the row above. Other lines with few cells (a group's label) stay rows of their own."""
    if len(lines) < 2:
        return [list(line) for line in lines]

    def filled(line: Sequence[Box]) -> int:
        return len({_column_of(b, grid) for b in line})

    # a full row: as many cells as most lines of two cells or more have (wrapped lines may outnumber rows)
    each = [filled(line) for line in lines]
    counts = sorted(each)
    multi = [c for c in counts if c >= 2]
    full = multi[len(multi) // 2] if multi else counts[-1]
    gaps = [_top(b) - _bottom(a) for a, b in zip(lines, lines[1:])]
    # the usual gap between rows: between two full lines (the lower quartile, so blank lines between groups do not
    # count); when too few full lines touch, the widest gap
    between = sorted(g for g, a, b in zip(gaps, each, each[1:]) if a >= full and b >= full)
    usual = between[len(between) // 4] if len(between) >= 3 else max(gaps)
    tight = WRAPPED * usual if usual > 0.2 * size else -1.0  # no gap to tell by: rows set solid
    out: list[list[Box]] = []
    pending: list[Box] | None = None  # the first lines of a cell whose row stands on a line below
    for k, line in enumerate(lines):
        carried = pending is not None
        row = _joined(pending, line, grid) if pending is not None else list(line)
        pending = None
        partial = filled(row) < full
        if partial and not carried and out and filled(row) < filled(out[-1]) and (gaps[k - 1] < tight or (
                gaps[k - 1] <= usual + 0.2 * size and (row[0].text[:1].islower() or _more_items(row, out[-1], grid)))):
            out[-1] = _joined(out[-1], row, grid)
        elif partial and k + 1 < len(lines) and gaps[k] < tight and (carried or k == 0 or gaps[k - 1] >= tight) \
                and filled(row) < each[k + 1] and not _over_figures(row, lines[k + 1], grid):
            pending = row
        else:
            out.append(row)
    if pending is not None:
        out.append(pending)
    return out


_GLYPHS = "\u2022\u25cf\u25aa\u25a0\u2023\u2043\u25e6"  # bullets drawn as glyphs (not a dash: a table's nil)


def _more_items(row: Sequence[Box], above: Sequence[Box], grid: Sequence[tuple[float, float]]) -> bool:
    """A line whose cells are the next items of lists in the row above's cells (each starts with a bullet under a
    cell that does), its row label empty: a cell holding a list, not a row."""
    cells = {_column_of(b, grid): b.text for b in above}
    return all(_column_of(b, grid) > 0 and b.text[:1] in _GLYPHS and cells.get(_column_of(b, grid), "")[:1] in _GLYPHS
               for b in row)


def _bulleted(line: list[Box], size: float) -> list[Box]:
    """A line with each lone bullet joined to the text after it: a list item inside a cell, not a column."""
    out: list[Box] = []
    for b in line:
        if out and out[-1].text in _GLYPHS and b.x0 - out[-1].x1 <= 3 * size:
            out[-1] = replace(b, text=f"{out[-1].text} {b.text}", x0=out[-1].x0, words=())
        else:
            out.append(b)
    return out


def _over_figures(line: Sequence[Box], below: Sequence[Box], grid: Sequence[tuple[float, float]]) -> bool:
    """Whether a line has text over a figure of the line below (a header's last line over the first row, not the
    first line of a row's label)."""
    figures = {_column_of(b, grid) for b in below if is_figure(b.text)}
    return any(_column_of(b, grid) in figures for b in line)


def _joined(above: Sequence[Box], below: Sequence[Box], grid: Sequence[tuple[float, float]]) -> list[Box]:
    """Two lines as one row: each column's text, the upper line's first."""
    row: dict[int, Box] = {}
    for b in [*above, *below]:
        c = _column_of(b, grid)
        row[c] = replace(row[c], text=f"{row[c].text} {b.text}", x0=min(row[c].x0, b.x0), x1=max(row[c].x1, b.x1),
                         top=min(row[c].top, b.top), bottom=max(row[c].bottom, b.bottom)) if c in row else b
    return [row[c] for c in sorted(row)]


def aligned_table(lines: list[Line], start: int, above: Sequence[Line] = ()) -> tuple[Block, int, int] | None:
    """A borderless table: from `start`, at least three lines with the same number (>= 2) of boxes whose
    left or right edges line up column by column. Lines just `above` it whose boxes each sit over one column
    (a header on two lines, or with empty corner cells) are taken as its header. Returns the block, the end of
    its lines and how many of the lines above it took."""
    width = len(lines[start].boxes)
    if width < 2 or BULLET_ONLY.match(lines[start].boxes[0].text):
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


def contents_table(lines: list[Line], start: int) -> tuple[Block, int] | None:
    """A table of contents: three lines or more of "title . . . . page". It becomes a two-column table of
    titles and page references, the dot leaders dropped (they are layout, and would fill a chunk with dots)."""
    end = start
    rows: list[tuple[str, str]] = []
    while end < len(lines):
        m = LEADER.match(normalize_text(lines[end].text))
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
