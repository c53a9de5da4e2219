"""Positioned text as a page's geometry: word boxes merged into lines, lines grouped, the gutters between
columns, and the reading order across columns. Shared by the PDF text layer and OCR, which both give boxes of text
with a size. Coordinates are top-down (y grows downwards), in any unit as long as a page uses one."""

from __future__ import annotations

import re
import statistics
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from ...types import Block

BULLET = re.compile(r"^(?:[\u2022\u25cf\u25aa\u25a0\u2023\u2043\u25e6\u00b7*\u2013\-]|\(?\d{1,2}[.)]|\(?[a-z][.)])\s+")
BULLET_ONLY = re.compile(r"^(?:[\u2022\u25cf\u25aa\u25a0\u2023\u2043\u25e6\u00b7*\u2013\-]|\d{1,2}[.)])$")
SECTION_NUMBER = re.compile(r"^(?:\(\d{1,2}\)|\d{1,2}(?:\.\d{1,2})*\.?|[IVX]{1,4}\.|[A-Z]\.)\s+\S")
CAPTION = re.compile(r"^(?:fig(?:ure)?|table|example|listing|chart|exhibit|plate)\.?\s*[\dA-Z]", re.IGNORECASE)
# a contents line: a title, a run of leader dots (". . ." or "....") and a page reference (digits or roman)
# a table's caption ("Table 5:", "TABLE: 3.2", "Exhibit A1"): the line above a table, not its first row
TABLE_CAPTION = re.compile(r"^(?:table|tab\.|exhibit|schedule)\s*[:.]?\s*(?:[A-Z]?[.\-]?\d+(?:[.\-]\d+)*|[IVXL]+)\b",
                           re.IGNORECASE)
TABLE_NOTE = re.compile(r"^(?:sources?|notes?|footnotes?)\b\s*[:.]", re.IGNORECASE)  # the line under a table
LEADER = re.compile(r"^(.*?\S)\s*(?:\.\s?){4,}\s*([0-9]{1,4}|[ivxlcdm]{1,7}|[IVXLCDM]{1,7})$")
TERMINAL = re.compile(r"[.!?:;\"')\]]$")
SENTENCE_END = re.compile(r"[.!?:;,]$")  # a heading may end in a bracket or quote, not in a sentence mark


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
    words: tuple[Box, ...] = ()  # a box joined from several words: them (tables split a box that runs over columns)

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
    for line in group_lines(list(words)):
        line.sort(key=lambda b: b.x0)
        run = [line[0]]
        for w in line[1:]:
            if w.x0 - run[-1].x1 > gap_factor * max(w.size, run[-1].size):
                out.append(merge(run))
                run = [w]
            else:
                run.append(w)
        out.append(merge(run))
    return out


_CID = re.compile(r"^\(cid:\d+\)$")
TOUCHING = 0.05  # of the text size: a gap this narrow between two words is no space


def merge(words: list[Box]) -> Box:
    sizes = sorted(w.size for w in words)
    # words of one size that touch are one word set in two faces (an italic colon, a bold first letter)
    text = words[0].text + "".join(("" if _touch(p, w) else " ") + w.text for p, w in zip(words, words[1:]))
    return Box(text=text, x0=min(w.x0 for w in words), top=min(w.top for w in words),
               x1=max(w.x1 for w in words), bottom=max(w.bottom for w in words), size=sizes[len(sizes) // 2],
               bold=sum(len(w.text) for w in words if w.bold) * 2 > sum(len(w.text) for w in words),
               italic=sum(len(w.text) for w in words if w.italic) * 2 > sum(len(w.text) for w in words),
               font=_main_font(words), words=tuple(words) if len(words) > 1 else ())


def _main_font(boxes: Sequence[Box]) -> str:
    """The typeface of most of the boxes' characters (the first met of those tied)."""
    count: dict[str, int] = {}
    for b in boxes:
        if b.text:
            count[b.font] = count.get(b.font, 0) + len(b.text)
    return max(count.items(), key=lambda kv: kv[1])[0]


def _touch(a: Box, b: Box) -> bool:
    return b.x0 - a.x1 < TOUCHING * min(a.size, b.size) and abs(a.size - b.size) <= 0.1 * max(a.size, b.size)


def group_lines(boxes: list[Box]) -> list[list[Box]]:
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


def column_gutter(boxes: Sequence[Box]) -> tuple[float, float] | None:
    """The widest vertical band crossed by at most a tenth of the boxes, with real text on both sides. When
    there is none, full-width boxes (a title, an abstract or a footnote over two columns) are set aside and the
    band is looked for among the others, provided both columns run down most of the page, so a two-column
    table inside single-column text is not taken for columns."""
    found = _texts_beside(boxes, _band(boxes))
    if found is not None or len(boxes) < 6:
        return found
    left, right = min(b.x0 for b in boxes), max(b.x1 for b in boxes)
    narrow = [b for b in boxes if b.x1 - b.x0 < 0.55 * (right - left)]
    found = _texts_beside(narrow, _band(narrow))
    if found is None:
        return None
    top, bottom = min(b.top for b in narrow), max(b.bottom for b in narrow)
    for side in ([b for b in narrow if b.x1 <= found[0]], [b for b in narrow if b.x0 >= found[1]]):
        if max(b.bottom for b in side) - min(b.top for b in side) < 0.5 * (bottom - top):
            return None
    return found


def _texts_beside(boxes: Sequence[Box], band: tuple[float, float] | None) -> tuple[float, float] | None:
    """The band, when words stand on both its sides: columns of a page are of text, while a band with figures
    alone on one side ("Basic | 318.5 | 346.5") parts a table's labels from its figures."""
    if band is None:
        return None
    sides = ([b for b in boxes if b.x1 <= band[0]], [b for b in boxes if b.x0 >= band[1]])
    return band if all(any(not is_figure(b.text) for b in side) for side in sides) else None


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
    gutter = column_gutter(boxes)
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
                leaves.extend(reading_order(side) if len(side) < len(boxes) else [sorted(side, key=reading_key)])
                open_span = False
        if i < len(spanning):
            if open_span:
                leaves[-1].append(spanning[i])
            else:
                leaves.append([spanning[i]])
                open_span = True
        previous = cut
    return leaves


def reading_key(b: Box) -> tuple[float, float]:
    return (b.top, b.x0)


def is_figure(text: str) -> bool:
    """A figure, maybe with a unit, sign or footnote mark: digits and at most three letters (in any script)."""
    return any(ch.isdigit() for ch in text) and sum(1 for ch in text if ch.isalpha()) <= 3
