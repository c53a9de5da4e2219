"""PDF: pdfplumber for the text layer (words with font size and weight, ruled tables), the layout module for
reading order, paragraphs, borderless tables and headings; pages without a text layer are rendered with
pypdfium2 and go through OCR."""

from __future__ import annotations

import io
import pickle
import re
import tempfile
import unicodedata
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from operator import itemgetter, methodcaller
from typing import Any

from ...errors import CorruptDocument, EmptyDocument, EncryptedDocument, IngestError
from ...types import Block, ExtractedDocument, table_text
from ..normalize import normalize_text
from .base import ExtractOptions, Source, collector_paused, single_document
from .borderless import borderless_tables
from .geometry import TABLE_CAPTION, TABLE_NOTE, Box, PageText, is_figure, lines_to_boxes, reading_order
from .layout import finish, leaf_blocks
from .ocr import ocr_engine, to_rgb
from .office import Span, kept_spans, table_block

MIN_TEXT_CHARS = 20  # fewer characters than this on a page with an image: treat the page as a scan
# a page with more characters than this share (and count) in fonts without a Unicode mapping is read by OCR;
# a few unmapped glyphs are symbol-font bullets
MAX_UNMAPPED_SHARE, MAX_UNMAPPED = 0.05, 50
MIN_OUTLINE_CURVES = 50  # a page with no text but this many curves is taken for text drawn as outlines
OCR_DPI = 300
_DIGITS = re.compile(r"\d+")
_LONE_CID = re.compile(r"(?<!\S)\(cid:\d+\)(?!\S)")  # an unmapped glyph standing alone: a symbol-font bullet


def _table_block(rows: list[list[str | None]], spans: list[Span] | None = None) -> Block | None:
    """A ruled table found by pdfplumber, when it has at least two rows and two columns: anything smaller is a
    box drawn around text, which stays text."""
    grid = [["" if c is None else _cell_text(c) for c in row] for row in rows]
    block = table_block(grid, spans=spans)
    if block is None or block.type != "table" or max(len(r) for r in grid) < 2:
        return None
    return block


def _caption_and_note(raw: list[list[str | None]]) -> tuple[bool, bool]:
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
    return "\n".join(visual_to_logical(_LONE_CID.sub("\u2022", line)) for line in text.split("\n"))


def _ruled_grid(table: Any, rows: list[list[str | None]],
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


def _closing_edges(page: Any) -> list[dict[str, Any]]:
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


def _rotated_direction(page: Any, bbox: tuple[float, float, float, float]) -> dict[str, str]:
    """How to read the turned text in a table (column headers set on end): pdfplumber reads it top to bottom,
    but headers turned a quarter counter-clockwise, the usual way, read bottom to top ("*JOBCTL", not
    "LTCBOJ*"). The text matrix says which way each glyph is turned."""
    x0, top, x1, bottom = bbox
    turned = [c["matrix"][1] for c in page.chars
              if not c["upright"] and x0 <= c["x0"] <= x1 and top <= c["top"] <= bottom]
    return {"char_dir_rotated": "btt"} if sum(1 for b in turned if b > 0) * 2 > len(turned) > 0 else {}


MAX_RULE_WIDTH = 2.0  # points: a filled rectangle thinner than this is a rule; a wider one is shading


def _inset_shading(page: Any) -> set[int]:
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


_TEXT, _X0, _TOP = itemgetter("text"), itemgetter("x0"), itemgetter("top")
MIN_DOUBLED = 0.02  # share of a page's characters drawn twice at one place before the page is deduplicated


def _once(page: Any) -> Any:
    """The page with text drawn twice, a little offset (a fake bold), read once. pdfplumber's dedupe_chars is
    slow (a sort per character group), so it runs only on pages where a quick count finds doubled glyphs."""
    chars = page.chars
    # repeats: characters with the text and whole-point place of one before (iterated in C: a Python loop over a
    # page's characters cost a twentieth of it)
    places = zip(map(_TEXT, chars), map(round, map(_X0, chars)), map(round, map(_TOP, chars)))
    doubled = len(chars) - len(set(places))
    return page.dedupe_chars() if doubled > MIN_DOUBLED * len(chars) else page


def _turn(page: Any) -> int:
    """How the page's text is set: 1 when most of it runs down the page (a table turned clockwise), -1 when it
    runs up (anticlockwise), 0 when it reads across."""
    across = down = up = 0
    for c in page.chars:
        if c["upright"]:
            across += 1
        elif c["matrix"][1] < 0:
            down += 1
        else:
            up += 1
    if max(down, up) <= across:
        return 0
    return 1 if down > up else -1


def upright(page: Any) -> Any:
    """The page turned so that most of its text reads left to right (a table set sideways comes out as a table,
    not as scattered letters or a transposed grid); the page itself when it already does. Positions on a turned
    page are in the turned frame."""
    turn = _turn(page)
    if turn == 0:
        return page
    from pdfplumber.page import DerivedPage

    width, height = float(page.width), float(page.height)

    def point(x: float, y: float) -> tuple[float, float]:
        return (y, width - x) if turn == 1 else (height - y, x)

    def moved(obj: dict[str, Any]) -> dict[str, Any]:
        x0, top = point(obj["x0"], obj["bottom"] if turn == 1 else obj["top"])
        x1, bottom = point(obj["x1"], obj["top"] if turn == 1 else obj["bottom"])
        x0, x1, top, bottom = min(x0, x1), max(x0, x1), min(top, bottom), max(top, bottom)
        out = {**obj, "x0": x0, "x1": x1, "top": top, "bottom": bottom, "width": x1 - x0, "height": bottom - top,
               "y0": width - bottom, "y1": width - top, "doctop": page.initial_doctop + top}
        if "upright" in obj:
            out["upright"] = not obj["upright"]
            out["size"] = bottom - top  # pdfminer gives a turned glyph's advance as its size
        if "pts" in obj:
            out["pts"] = [point(x, y) for x, y in obj["pts"]]
        return out

    class Turned(DerivedPage):
        def __init__(self) -> None:
            self.bbox = (0.0, 0.0, height, width)
            super().__init__(page)
            self._objects = {kind: [moved(o) for o in objs] for kind, objs in page.objects.items()}

        @property
        def objects(self) -> dict[str, list[dict[str, Any]]]:
            return self._objects

    return Turned()


MIN_COLUMN_RULES = 0.5  # of a ruled table's height, drawn on its inner column lines on average


def _column_rules(table: Any, verticals: list[dict[str, Any]]) -> float:
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


def _cuts_words(table: Any, words: list[dict[str, Any]]) -> bool:
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


def _finer(block: Block, bbox: tuple[float, float, float, float], words: list[dict[str, Any]]) -> Block:
    """A ruled table whose rules mark only groups of columns (a rule round "Male", none between its "Under 18" and
    "18 years and over"): when the text inside reads as one borderless table over the region whose rows hold a
    quarter more values apart, that finer table is the one a reader sees."""
    x0, top, x1, bottom = bbox
    inside = [_word_box(w) for w in words
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


def _middles(chars: list[dict[str, Any]]) -> list[Middle]:
    return [((c["x0"] + c["x1"]) / 2, (c["top"] + c["bottom"]) / 2, c) for c in chars]


def _cell_texts(table: Any, middles: list[Middle], **settings: Any) -> list[list[str | None]]:
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


def _text_page(page: Any) -> list[Box]:
    from .pdfpages import extract_words  # with pdfplumber, loaded when a PDF is read

    tables = []
    inset = _inset_shading(page)
    ruled = page.filter(lambda obj: id(obj) not in inset) if inset else page
    words = extract_words(page, extra_attrs=["fontname", "size"], use_text_flow=False)
    found = ruled.find_tables({"explicit_vertical_lines": _closing_edges(ruled)})
    verticals = [e for e in ruled.edges if e["orientation"] == "v"] if found else []
    middles: list[Middle] | None = None  # of the characters, worked out for the first grid read
    for table in found:
        if _column_rules(table, verticals) < MIN_COLUMN_RULES or _cuts_words(table, words):
            continue  # not a grid: its columns are whitespace, which the borderless tables read
        middles = _middles(ruled.chars) if middles is None else middles
        raw = _cell_texts(table, middles, **_rotated_direction(page, table.bbox))
        x0, top, x1, bottom = table.bbox
        filled = [i for i, r in enumerate(raw) if any(r)]
        caption, note = _caption_and_note(raw)
        if caption or note:  # the box shrinks to leave their words to the text around the table
            top = table.rows[filled[0] + 1].bbox[1] if caption else top
            bottom = table.rows[filled[-1]].bbox[1] if note else bottom
            raw = [r if filled[0] < i < filled[-1] or (i == filled[0] and not caption)
                   or (i == filled[-1] and not note) else [None] * len(r) for i, r in enumerate(raw)]
        block = _table_block(*_ruled_grid(table, raw, words))
        if block is not None:
            block = _finer(block, (x0, top, x1, bottom), words)
            tables.append(Box(text="", x0=x0, top=top, x1=x1, bottom=bottom, size=0.0, table=block))

    def inside(w: dict[str, Any]) -> bool:
        cx, cy = (w["x0"] + w["x1"]) / 2, (w["top"] + w["bottom"]) / 2
        return any(t.x0 <= cx <= t.x1 and t.top <= cy <= t.bottom for t in tables)

    outside = _attach_scripts([
        _word_box(w) for w in words
        if not inside(w) and w["text"].count("(cid:") < 2  # two unmapped glyphs or more: unreadable, not text
    ])
    boxes = borderless_tables([replace(b, text=visual_to_logical(b.text)) for b in lines_to_boxes(outside)])
    boxes = [replace(b, words=()) if b.words else b for b in boxes]  # (needed by the tables only: not spooled)
    # a table's box carries the size of the text around it, so paragraphs after it are not mistaken for headings
    sizes = [b.size for b in boxes]
    body = Counter(round(s, 1) for s in sizes).most_common(1)[0][0] if sizes else 10.0
    return boxes + [Box(t.text, t.x0, t.top, t.x1, t.bottom, body, table=t.table) for t in tables]


MAX_SCRIPT_SIZE = 0.8  # of the word before it: smaller text touching a word, raised or lowered, is a script
MAX_SCRIPT_GAP = 0.15  # of the word's size: no visible space between a word and its script


def _attach_scripts(words: list[Box]) -> list[Box]:
    """Superscripts and subscripts (a footnote mark "Others(1)", "CO2") joined to the word they touch. Set
    above or below the line, they were taken for a line of their own: a table row of stray "(1)"s."""
    ends: dict[int, list[int]] = {}  # whole points of a word's right edge -> the words ending there
    out: list[Box | None] = list(words)
    for i in sorted(range(len(words)), key=lambda i: (words[i].x0, words[i].top)):
        w = words[i]
        near = sorted(j for x in range(int(w.x0) - 2, int(w.x0) + 2) for j in ends.get(x, ()))
        parent = next((j for j in near if (p := out[j]) is not None and _script_of(w, p)), None)
        if parent is not None:
            p = out[parent]
            assert p is not None
            # a raised mark after a word is a footnote's ("Center 1", found by "center"); a bracketed mark or
            # a subscript ("Others(1)", "CO2") is part of the word
            space = " " if w.center < p.center and p.text[-1:].isalpha() and w.text[:1].isalnum() else ""
            out[parent] = replace(p, text=p.text + space + w.text, x1=max(p.x1, w.x1))
            out[i] = None
            i = parent
        end = out[i]
        assert end is not None
        ends.setdefault(int(end.x1), []).append(i)
    return [w for w in out if w is not None]


def _script_of(w: Box, word: Box) -> bool:
    gap = w.x0 - word.x1
    return (w.size <= MAX_SCRIPT_SIZE * word.size and -1.0 <= gap <= MAX_SCRIPT_GAP * word.size
            and word.top - 0.5 * w.height <= w.top and w.bottom <= word.bottom + 0.5 * w.height
            and abs(w.center - word.center) > 0.15 * word.height)


def _word_box(word: dict[str, Any]) -> Box:
    font = str(word.get("fontname", "")).split("+", 1)[-1]  # without the subset tag ("ABCDEF+")
    return Box(text=word["text"], x0=word["x0"], top=word["top"], x1=word["x1"], bottom=word["bottom"],
               size=float(word["size"]), bold=_is_bold(font), italic=_is_italic(font), font=font)


def _rtl(ch: str) -> bool:
    return unicodedata.bidirectional(ch) in ("R", "AL")


def visual_to_logical(text: str) -> str:
    """Right-to-left lines (Arabic, Hebrew, Persian) come out of the text layer in visual order: words
    reversed and read left to right. Put them back in reading order: within each word the right-to-left runs
    are reversed and the runs swap places; then the words swap places. Lines that are mostly left-to-right
    are returned as they are."""
    letters = [ch for ch in text if ch.isalpha()]
    if not letters or sum(1 for ch in letters if _rtl(ch)) * 2 <= len(letters):
        return text
    words = []
    for word in text.split(" "):
        runs: list[str] = []
        for ch in word:
            if runs and _rtl(runs[-1][-1]) == _rtl(ch):
                runs[-1] += ch
            else:
                runs.append(ch)
        words.append("".join(_reverse_rtl(run) if _rtl(run[0]) else run for run in reversed(runs)))
    return " ".join(reversed(words))


_ALEFS = "\u0627\u0623\u0625\u0622"


def _reverse_rtl(run: str) -> str:
    """Reverse a visual right-to-left run. A lam-alef ligature is decoded in logical order inside the visual
    stream, so it is swapped first, except at the run's end, where "lam, alef" is the article al- reversed."""
    chars = list(run)
    i = 0
    while i < len(chars) - 2:
        if chars[i] == "\u0644" and chars[i + 1] in _ALEFS:
            chars[i], chars[i + 1] = chars[i + 1], chars[i]
            i += 2
        else:
            i += 1
    return "".join(reversed(chars))


# "Bd" is Adobe's short style name (MyriadPro-Bd); TeX's bold extended faces are CMBX10, SFBX1000, LMRoman10-Bold;
# URW's Times bold is NimbusRomNo9L-Medi
_BOLD = re.compile(r"bold|black|heavy|demi|bd(?:it|obl)?$|^(?:cm|sf|ec|lm)bx|-medi(?:ital)?$")


_ITALIC = re.compile(r"italic|oblique|-(?:bd)?it$|^(?:cm|sf|ec|lm)ti\d")


def _is_italic(font: str) -> bool:
    """From a font name without its subset tag, as `_word_box` gives it."""
    return _ITALIC.search(font.lower()) is not None


def _is_bold(font: str) -> bool:
    """From a font name without its subset tag, as `_word_box` gives it."""
    return _BOLD.search(font.lower()) is not None


def _ocr_page(data: bytes, index: int) -> list[Box]:
    import pypdfium2

    pdf = pypdfium2.PdfDocument(data)
    try:
        scale = OCR_DPI / 72
        image = pdf[index].render(scale=scale).to_pil()
    finally:
        pdf.close()
    boxes = ocr_engine().read(to_rgb(image))
    return [Box(b.text, b.x0 / scale, b.top / scale, b.x1 / scale, b.bottom / scale, b.size / scale)
            for b in boxes]


def _margin_key(b: Box, height: float) -> str | None:
    """The text (digits ignored) of a box in the page's top or bottom 8%, a running header's candidate; None for
    any other box."""
    return _DIGITS.sub("#", b.text) if b.table is None and _margin(b, height) else None


def _edges(boxes: list[Box]) -> list[Box]:
    """The page's first and last lines of text (outside tables): where a page number or a running title is when
    the page sets it higher than the margin (EDGAR's converters draw page numbers a tenth up the page)."""
    free = [b for b in boxes if b.table is None and b.text.strip()]
    if not free:
        return []
    return [b for b in (min(free, key=lambda b: b.top), max(free, key=lambda b: b.bottom))
            if len(b.text) <= EDGE_CHARS]


def _edge_key(b: Box) -> str:
    """A first or last line as furniture is recognised: a short one ("12", "F-12", "Page 12 of 80") with its
    numbers masked, a longer one as written (a sentence that only differs in its figures is text)."""
    text = b.text.strip()
    return "edge:" + (_DIGITS.sub("#", text) if len(text.split()) <= EDGE_WORDS else text)


def _margin_keys(boxes: list[Box], height: float) -> set[str]:
    """A page's running-header candidates: the texts in its top and bottom margins, and its first and last lines."""
    return {k for b in boxes if (k := _margin_key(b, height)) is not None} | {_edge_key(b) for b in _edges(boxes)}


def _running(keys: list[set[str]]) -> set[str]:
    """Running headers and footers: the same text (digits ignored) in the top or bottom 8% of at least half of
    the pages, and of three pages or more."""
    if len(keys) < 3:
        return set()
    seen: Counter[str] = Counter(k for page in keys for k in page)
    return {k for k, n in seen.items() if n >= 3 and n * 2 >= len(keys)}


def _strip(boxes: list[Box], height: float, running: set[str]) -> list[Box]:
    edges = {id(b) for b in _edges(boxes) if _edge_key(b) in running}
    return [b for b in boxes if _margin_key(b, height) not in running and id(b) not in edges]


def _margin(b: Box, height: float) -> bool:
    return b.bottom < 0.08 * height or b.top > 0.92 * height


EDGE_CHARS = 80  # a page's first or last line longer than this is text, not furniture
EDGE_WORDS = 4  # a first or last line of at most this many words is compared with its numbers masked
SPOOL_BYTES = 32 * 1024 * 1024  # pages' boxes held in memory up to this, then on disk


class PageSpool:
    """Each page's boxes, written as the page is read and read back in order: a long document holds one
    page's layout at a time, not every page's (about 0.07 MB a page of dense text), past `max_bytes` on disk."""

    def __init__(self, max_bytes: int = SPOOL_BYTES) -> None:
        self._file = tempfile.SpooledTemporaryFile(max_size=max_bytes)  # noqa: SIM115 (closed by __exit__)
        self._max_bytes = max_bytes
        self._count = 0

    def __enter__(self) -> PageSpool:
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()

    def __len__(self) -> int:
        return self._count

    @property
    def on_disk(self) -> bool:
        """Past max_bytes: SpooledTemporaryFile moves to a file as soon as it holds more."""
        return self._file.tell() > self._max_bytes

    def append(self, boxes: list[Box]) -> None:
        pickle.dump(boxes, self._file, protocol=pickle.HIGHEST_PROTOCOL)
        self._count += 1

    def to_bytes(self) -> bytes:
        """The spooled pages as one string of bytes, to hand to another process (`from_bytes` there)."""
        self._file.seek(0)
        data = self._file.read()
        self._file.seek(0, io.SEEK_END)
        return data

    @classmethod
    def from_bytes(cls, parts: Sequence[tuple[int, bytes]], max_bytes: int = SPOOL_BYTES) -> PageSpool:
        """A spool of the pages of other spools' `to_bytes`, given as (page count, bytes), in order."""
        spool = cls(max_bytes)
        for count, data in parts:
            spool._file.write(data)
            spool._count += count
        return spool

    def __iter__(self) -> Iterator[list[Box]]:
        self._file.seek(0)
        for _ in range(self._count):
            yield pickle.load(self._file)  # our own pickles, written above in this process
        self._file.seek(0, io.SEEK_END)


@dataclass
class PagesRead:
    """Pages of a PDF as read, before layout (their boxes are in a PageSpool): each page's height and margin
    texts (running header candidates), the pages read by OCR, warnings, and the title from the metadata."""

    heights: list[float] = field(default_factory=list)
    margins: list[set[str]] = field(default_factory=list)
    ocr_pages: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    title: str | None = None

    def extend(self, later: PagesRead) -> None:
        """Add the pages read after these (the next range of the same document)."""
        self.heights += later.heights
        self.margins += later.margins
        self.ocr_pages += later.ocr_pages
        self.warnings += later.warnings
        self.title = self.title or later.title


def _open(source: Source) -> tuple[Any, list[Any]]:
    from pdfplumber.utils.exceptions import PdfminerException

    from .pdfpages import FastPDF

    try:
        pdf = FastPDF.open_bytes(source.data)
        pages = pdf.pages
    except PdfminerException as exc:
        raise _open_error(source, exc) from exc
    except Exception as exc:  # pdfminer raises a zoo of types on damaged files
        raise CorruptDocument(f"{source.path.name}: damaged PDF ({type(exc).__name__}: {exc})") from exc
    if not pages:
        pdf.close()
        raise EmptyDocument(f"{source.path.name} has no pages")
    return pdf, pages


def page_count(source: Source) -> int:
    """How many pages the PDF has (as read_pages numbers them); an IngestError when it cannot be opened."""
    pdf, pages = _open(source)
    with pdf:
        return len(pages)


def read_pages(source: Source, spool: PageSpool, start: int = 0, stop: int | None = None) -> PagesRead:
    """Read pages start..stop (0-based, stop excluded; all by default), their boxes appended to the spool.
    Each page is read on its own, so ranges read apart and joined in order equal the whole read at once."""
    from pdfplumber.utils.exceptions import PdfminerException

    from .pdfpages import PageTooComplex

    pdf, pages = _open(source)
    read = PagesRead()
    with pdf:
        try:
            for index in range(start, len(pages) if stop is None else min(stop, len(pages))):
                page = pages[index]
                with collector_paused():  # a page's objects live until it is read
                    try:
                        boxes, ocr, warning = _read_page(source.data, index, page)
                    except PageTooComplex as exc:
                        boxes, ocr, warning = [], False, str(exc)
                    page.flush_cache()  # its objects go before the collector runs again
                read.ocr_pages.extend([index + 1] if ocr else [])
                read.warnings.extend([warning] if warning else [])
                read.heights.append(float(page.height))
                read.margins.append(_margin_keys(boxes, read.heights[-1]))
                spool.append(boxes)
            read.title = _title(pdf.metadata) if start == 0 else None
        except PdfminerException as exc:
            raise _open_error(source, exc) from exc
    return read


def lay_out(source: Source, read: PagesRead, spool: PageSpool) -> Iterator[ExtractedDocument | Exception]:
    """The document of pages read into the spool: running headers dropped, each page laid out in turn."""
    running = _running(read.margins)
    laid_out = []
    for number, (boxes, height) in enumerate(zip(spool, read.heights), start=1):
        page_text = PageText(number)
        for leaf in reading_order(_strip(boxes, height, running)):
            page_text.blocks.extend(leaf_blocks(leaf, number))
        laid_out.append(page_text)
    blocks = finish(laid_out)
    yield from single_document(source, "pdf", read.title or _first_heading(blocks), blocks,
                               metadata={"pages": len(read.heights), "ocr_pages": read.ocr_pages},
                               warnings=read.warnings)


class PdfExtractor:
    source_type = "pdf"

    def __init__(self, spool_bytes: int = SPOOL_BYTES) -> None:
        self.spool_bytes = spool_bytes  # pages' boxes kept in memory up to this while a document is read

    def extract(self, source: Source, options: ExtractOptions) -> Iterator[ExtractedDocument | Exception]:
        with PageSpool(self.spool_bytes) as spool:
            try:
                read = read_pages(source, spool)
            except IngestError as exc:
                yield exc
                return
            yield from lay_out(source, read, spool)


def _read_page(data: bytes, index: int, page: Any) -> tuple[list[Box], bool, str | None]:
    """A page's boxes, whether they were read by OCR, and a warning for the report."""
    unmapped = sum(map(methodcaller("startswith", "(cid:"), map(_TEXT, page.chars)))  # iterated in C
    if len(page.chars) < MIN_TEXT_CHARS and (page.images or not page.chars):
        # a scan, or text drawn as outlines (many curves): render and read it
        drawn = bool(page.images) or len(page.curves) > MIN_OUTLINE_CURVES
        return (_ocr_page(data, index) if drawn else []), drawn, None
    if unmapped > max(MAX_UNMAPPED, MAX_UNMAPPED_SHARE * len(page.chars)):
        # fonts without a map to Unicode: the text layer is glyph numbers, the picture is not
        return _ocr_page(data, index), True, (f"page {index + 1}: {unmapped} of {len(page.chars)} characters have no "
                                              "Unicode mapping in the PDF; the page was read by OCR")
    return _text_page(_once(upright(page))), False, None


def _open_error(source: Source, exc: Exception) -> IngestError:
    inner = exc.args[0] if exc.args else exc
    name = type(inner).__name__
    if "Password" in name or "Encrypt" in name:
        return EncryptedDocument(f"{source.path.name} is encrypted: decrypt it first (ragd does not take passwords)")
    return CorruptDocument(f"{source.path.name}: damaged PDF ({inner})")


def _title(metadata: dict[str, Any]) -> str | None:
    value = metadata.get("Title")
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    text = normalize_text(str(value)) if value else ""
    return text if text and text.lower() not in ("untitled", "untitled document") else None


def _first_heading(blocks: list[Block]) -> str | None:
    return next((b.text for b in blocks if b.type == "heading"), None)
