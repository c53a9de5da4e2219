"""Tables on PDFs nobody drew by hand (issue 31, item 1): a seeded generator of table layouts with exact cell
truth, and cell accuracy per layout family for ragd (and camelot, to compare).

    pip install -r bench/requirements-tablegen.txt
    python bench/tablegen.py [--layouts 600] [--seed 31] [--camelot hybrid,network] [--keep DIR] [--json]
                             [--fail-under FAMILY:METRIC=VALUE ...]

Each layout draws its own choice along five dimensions, and figures are reported per value of each (a family is
one value of one dimension, measured over every layout that has it, whatever the others):
- rules: none, horizontal (booktabs: over and under the header and under the last row, sometimes under every
  row), grid (every cell ruled), frame (only the outer frame);
- header: one row; wrapped (header cells of two or three lines, set on a common bottom line); spanning (a top
  cell centred over the figure columns, over a row of years);
- align: figures left, right or decimal-aligned (the decimal points of a column on one vertical);
- shape: plain; wrapped (row labels wrapping onto a second line, the figures on the first); two-column (three to
  six rows of a label and one figure); groups (row groups: a label alone on its row, then indented rows, a
  total); footnotes (superscript marks after some labels, the notes under the table); large (40 to 55 rows of 6
  or 7 columns, small type);
- context: alone; text above (a paragraph over the table); beside (the table in the left column of the page, a
  column of running text to its right); two tables (two tables on the page, a paragraph between); across pages
  (the table starts low on a page and goes on over the next with its header repeated: one table in the truth).

Every layout also varies the typeface (Helvetica, Times, Courier), size (7-11 pt), column gap (10-36 pt), row
pitch, position on the page, row and column counts and the figures' format (plain, thousands, decimal, dollar,
negative in brackets). The truth holds a spanning cell's text in the first column it spans, a wrapped cell's
lines joined by a space, a row group's label alone on its row, and no note line. Scoring is bench/tables.py's
(cells right under the best shift, rows and columns right, adjacency F1), on cells compared without their inner
spaces (the structure is measured, not how a mark is spaced); each truth table is matched with the extracted table
that holds most of its cells, and a truth is found when that table holds half of its cells. `extra` counts
extracted tables that match no truth table (a paragraph read as a table).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reportlab.lib.pagesizes import A4
from reportlab.pdfbase.pdfmetrics import stringWidth
from reportlab.pdfgen import canvas

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import Results as BenchResults
from tables import Score, Table, bag, camelot_tables, cells_right, compact, gate, run_ragd, score_pair

DIMENSIONS: dict[str, tuple[str, ...]] = {
    "rules": ("none", "horizontal", "grid", "frame"),
    "header": ("one", "wrapped", "spanning"),
    "align": ("left", "right", "decimal"),
    "shape": ("plain", "wrapped", "two-column", "groups", "footnotes", "large"),
    "context": ("alone", "text-above", "beside", "two-tables", "across-pages"),
}
LABELS = ["Net sales", "Cost of sales", "Gross margin", "Research and development", "Selling expenses",
          "Administrative expenses", "Operating income", "Interest expense", "Income tax", "Net income",
          "Capital expenditure", "Depreciation", "Inventories", "Trade receivables", "Cash and equivalents",
          "Lease liabilities", "Deferred revenue", "Employees", "Dividends paid", "Share buybacks", "Goodwill",
          "Provisions", "Other income", "Finance costs", "Pension obligations", "Current tax", "Royalties",
          "Licence fees", "Freight", "Energy", "Rent", "Wages and salaries", "Social security", "Training",
          "Travel", "Insurance", "Legal fees", "Audit fees", "Bad debts", "Marketing", "Software", "Hardware",
          "Maintenance", "Consulting", "Subcontractors", "Raw materials", "Packaging", "Warranty", "Grants",
          "Interest income", "Exchange differences", "Impairment", "Amortisation", "Minority interests",
          "Retained earnings", "Share capital", "Treasury shares", "Hedging reserve", "Bonds", "Bank loans"]
GROUPS = ["Assets", "Liabilities", "Revenue", "Expenses", "Operating items", "Financing items", "Europe", "Americas",
          "Asia Pacific", "Segment A", "Segment B"]
COLUMN_HEADS = ["Year ended December 31, {y}", "Twelve months to June {y}", "Audited results {y}",
                "Restated figures {y}", "Fiscal year {y} (unaudited)"]
TOPS = ["Year ended December 31,", "Fiscal year", "In thousands of dollars", "Three months ended", "Group"]
PROSE = ("The figures in the table are unaudited and rounded to the nearest unit. Comparative figures have been "
         "restated where the accounting policies changed during the year, and segment results are shown before "
         "the allocation of central costs. Management reviews these measures monthly and uses them to allocate "
         "resources between the segments, to set targets and to decide on investments in new capacity.")
NOTES = ["Restated for the change in accounting policy.", "Excludes discontinued operations.",
         "Includes a one-off gain on disposal.", "Unaudited."]
MARKS = ["1", "2", "3", "a", "b", "*"]
BOTTOM = 50.0  # points: the lowest a row is drawn before the page breaks


@dataclass
class Spec:
    """One table to draw: its grid (the truth, before spaces are dropped) and how it is set."""

    grid: list[list[str]]
    header_rows: int
    spans: list[tuple[int, int, int]] = field(default_factory=list)  # (row, first column, columns) of header cells
    marks: dict[int, str] = field(default_factory=dict)  # body row -> footnote mark drawn raised after its label
    group_rows: set[int] = field(default_factory=set)  # body rows that are a group's label alone
    label_width: float = 0.0  # labels wrap at this width (0: they do not)
    head_width: float = 0.0  # header cells wrap at this width (0: they do not)


@dataclass
class Layout:
    choice: dict[str, str]
    tables: list[Spec]


def _figure(rng: random.Random, style: str) -> str:
    v = rng.uniform(1, 99_999) if style not in ("decimal", "mixed") else rng.uniform(0, 9_999)
    decimals = rng.choice([0, 1, 2]) if style == "mixed" else 1
    text = {"plain": f"{v:.0f}", "thousands": f"{v:,.0f}", "decimal": f"{v:,.{decimals}f}",
            "mixed": f"{v:,.{decimals}f}", "dollar": f"${v:,.0f}"}[style]
    return f"({text})" if rng.random() < 0.1 else text


def table_spec(rng: random.Random, choice: dict[str, str], small: bool = False) -> Spec:
    shape, header = choice["shape"], choice["header"]
    if shape == "two-column":
        cols, n = 1, rng.randint(3, 6)
    elif shape == "large":
        cols, n = rng.randint(5, 6), rng.randint(40, 55)
    elif choice["context"] == "across-pages":
        cols, n = rng.randint(2, 5), rng.randint(10, 24)
    else:
        cols, n = rng.randint(2, 3 if choice["context"] == "beside" else 5), rng.randint(3, 6 if small else 14)
    style = "mixed" if choice["align"] == "decimal" else rng.choice(["plain", "thousands", "decimal", "dollar"])
    labels = rng.sample(LABELS, n)
    spec = Spec(grid=[], header_rows=1)
    if shape == "wrapped":
        others = rng.sample(LABELS, n)
        labels = [f"{a}, excluding {b.lower()} and other items" for a, b in zip(labels, others)]
        spec.label_width = rng.uniform(90, 140)
    years = [str(y) for y in sorted(rng.sample(range(2000, 2025), cols), reverse=True)]
    heads = years
    if header == "wrapped":
        form = rng.choice(COLUMN_HEADS)
        heads = [form.format(y=y) for y in years]
        spec.head_width = rng.uniform(45, 70)
    body: list[list[str]] = []
    if shape == "groups":
        row = 0
        for group in rng.sample(GROUPS, rng.randint(2, 3)):
            body.append([group, *[""] * cols])
            spec.group_rows.add(row)
            row += 1
            for label in labels[: rng.randint(2, 4)]:
                body.append([label, *(_figure(rng, style) for _ in years)])
                row += 1
            labels = labels[2:] + labels[:2]
            body.append([f"Total {group.lower()}", *(_figure(rng, style) for _ in years)])
            row += 1
    else:
        body = [[label, *(_figure(rng, style) for _ in years)] for label in labels]
    if shape == "footnotes":
        for r in rng.sample(range(len(body)), min(len(body), rng.randint(1, 3))):
            spec.marks[r] = rng.choice(MARKS)
            body[r][0] = body[r][0] + spec.marks[r]  # the truth: the mark joins its label (spaces are not scored)
    if header == "spanning" and cols > 1:
        spec.grid = [["", rng.choice(TOPS), *[""] * (cols - 1)], ["", *heads], *body]
        spec.header_rows, spec.spans = 2, [(0, 1, cols)]
    else:
        spec.grid = [["", *heads], *body]
    return spec


def layout(rng: random.Random, **given: str) -> Layout:
    """A random layout; `given` fixes dimensions (shape="wrapped", context="beside")."""
    choice = {d: given.get(d) or rng.choice(values) for d, values in DIMENSIONS.items()}
    if choice["shape"] == "large" and choice["context"] in ("beside", "two-tables"):
        choice["context"] = rng.choice(["alone", "text-above", "across-pages"])
    if choice["shape"] == "two-column" and choice["header"] == "spanning":
        choice["header"] = rng.choice(["one", "wrapped"])  # one figure column: nothing to span
    count = 2 if choice["context"] == "two-tables" else 1
    return Layout(choice, [table_spec(rng, choice, small=count > 1) for _ in range(count)])


class Page:
    """A canvas with a cursor going down the page; a new page when the cursor passes the bottom margin."""

    def __init__(self, path: Path, rng: random.Random):
        self.pdf = canvas.Canvas(str(path), pagesize=A4)
        self.font, self.size = rng.choice(["Helvetica", "Times-Roman", "Courier"]), float(rng.choice([8, 9, 10, 11]))
        self.x = rng.uniform(50, 80)
        self.y = A4[1] - rng.uniform(60, 120)
        self.lead = self.size * rng.uniform(1.35, 1.8)

    def text(self, words: str, width: float, x: float | None = None) -> None:
        self.pdf.setFont(self.font, self.size)
        for line in wrap(words, self.font, self.size, width):
            self.pdf.drawString(self.x if x is None else x, self.y, line)
            self.y -= self.size * 1.25
        self.y -= self.lead

    def new_page(self) -> None:
        self.pdf.showPage()
        self.y = A4[1] - 60

    def save(self) -> None:
        self.pdf.showPage()
        self.pdf.save()


def wrap(text: str, font: str, size: float, width: float) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if line and stringWidth(f"{line} {word}", font, size) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return [*lines, line] if line else lines


def draw_table(page: Page, spec: Spec, rules: str, align: str, rng: random.Random, gap: float,
               every_row: bool) -> tuple[float, float]:
    """Draw one table from the page's cursor down (breaking pages, the header repeated); its left and right."""
    pdf, font, size = page.pdf, page.font, page.size
    lead = page.lead
    line_h = size * 1.15
    grid, heads = spec.grid, spec.header_rows
    spanning = {(r, c) for r, c, n in spec.spans}

    def lines_of(r: int, c: int) -> list[str]:
        text = grid[r][c]
        if r >= heads and c == 0 and r - heads in spec.marks:
            text = text[: -len(spec.marks[r - heads])]
        if r >= heads and c == 0 and spec.label_width:
            return wrap(text, font, size, spec.label_width)
        if r < heads and c > 0 and spec.head_width and (r, c) not in spanning:
            return wrap(text, font, size, spec.head_width)
        return [text] if text else []

    def text_width(r: int, c: int) -> float:
        return max((stringWidth(s, font, size) for s in lines_of(r, c)), default=0.0)

    cols = len(grid[0])
    indent = size if spec.group_rows else 0.0
    widths = [max(text_width(r, c) + (indent if r >= heads and c == 0 and r - heads not in spec.group_rows else 0)
                  for r in range(len(grid)) if (r, c) not in spanning) for c in range(cols)]
    fraction = [0.0] * cols  # decimal alignment: the widest part after the point, per column
    if align == "decimal":
        for c in range(1, cols):
            fraction[c] = max((stringWidth(_after_point(grid[r][c]), font, size) for r in range(heads, len(grid))),
                              default=0.0)
    lefts = [page.x + sum(widths[:c]) + gap * c for c in range(cols)]
    right = lefts[-1] + widths[-1]
    pad = min(gap / 2, 4.0)

    def row_height(r: int) -> float:
        return max(1, *(len(lines_of(r, c)) for c in range(cols))) * line_h

    def draw_row(r: int, top: float) -> float:
        """Row r with its first baseline at `top`; returns the next row's first baseline."""
        height = max(1, *(len(lines_of(r, c)) for c in range(cols)))
        for c in range(cols):
            lines = lines_of(r, c)
            if not lines:
                continue
            span = next((n for rr, cc, n in spec.spans if (rr, cc) == (r, c)), 1)
            first = top - (height - len(lines)) * line_h if r < heads else top  # headers sit on a common bottom
            for k, text in enumerate(lines):
                y = first - k * line_h
                if span > 1:
                    pdf.drawCentredString((lefts[c] + lefts[c + span - 1] + widths[c + span - 1]) / 2, y, text)
                elif c == 0:
                    shift = indent if r >= heads and r - heads not in spec.group_rows else 0.0
                    pdf.drawString(lefts[c] + shift, y, text)
                    if k == 0 and r >= heads and r - heads in spec.marks:  # a raised footnote mark
                        pdf.setFont(font, size * 0.6)
                        pdf.drawString(lefts[c] + shift + stringWidth(text, font, size) + 0.5, y + size * 0.4,
                                       spec.marks[r - heads])
                        pdf.setFont(font, size)
                elif r < heads or align == "right":
                    pdf.drawRightString(lefts[c] + widths[c], y, text)
                elif align == "decimal":
                    pdf.drawRightString(lefts[c] + widths[c] - fraction[c] + stringWidth(_after_point(text), font,
                                                                                        size), y, text)
                else:
                    pdf.drawString(lefts[c], y, text)
        return top - (height - 1) * line_h - lead

    def rule(y: float) -> None:
        pdf.line(page.x - pad, y, right + pad, y)

    inside = {c for _, first, n in spec.spans for c in range(first + 1, first + n)}  # no rule through a span

    def frame(top: float, bottom: float, below_span: float) -> None:
        if rules in ("grid", "frame"):
            pdf.rect(page.x - pad, bottom, right - page.x + 2 * pad, top - bottom)
        if rules == "grid":
            for c in range(1, cols):
                x = lefts[c] - gap / 2
                pdf.line(x, below_span if c in inside else top, x, bottom)

    pdf.setFont(font, size)
    y = page.y
    top_y = below_span = y + lead * 0.75
    if rules == "horizontal":
        rule(top_y)
    r = 0
    while r < len(grid):
        # the page is full: the table goes on over the next (a group's label kept with the row under it)
        keep = row_height(r) + (row_height(r + 1) if r - heads in spec.group_rows and r + 1 < len(grid) else 0)
        if r >= heads and y - keep < BOTTOM:
            frame(top_y, y + lead * 0.75, below_span)
            if rules == "horizontal":
                rule(y + lead * 0.75)
            page.new_page()
            pdf.setFont(font, size)
            y = page.y
            top_y = y + lead * 0.75
            if rules == "horizontal":
                rule(top_y)
            for h in range(heads):
                y = draw_row(h, y)
                if h == 0 and spec.spans:
                    below_span = y + lead * 0.75
                if rules == "grid" or (rules == "horizontal" and h == heads - 1):
                    rule(y + lead * 0.75)
        y = draw_row(r, y)
        if r == 0 and spec.spans:
            below_span = y + lead * 0.75
        if rules == "grid" or (rules == "horizontal" and (r == heads - 1 or (every_row and r < len(grid) - 1))):
            rule(y + lead * 0.75)
        r += 1
    bottom_y = y + lead * 0.75
    if rules == "horizontal":
        rule(bottom_y)
    frame(top_y, bottom_y, below_span)
    page.y = y - lead
    if spec.marks:  # the notes under the table
        for mark in sorted(set(spec.marks.values())):
            page.text(f"{mark} {rng.choice(NOTES)}", 400)
    return page.x, right


def _after_point(text: str) -> str:
    return text[text.index("."):] if "." in text else ""


def draw(path: Path, item: Layout, rng: random.Random) -> None:
    page = Page(path, rng)
    choice = item.choice
    gap = float(rng.randint(10, 36))
    if choice["shape"] == "large":
        page.size, page.lead, gap = float(rng.choice([7, 8])), rng.uniform(9.5, 11.5), float(rng.randint(10, 20))
    every_row = rng.random() < 0.3
    context = choice["context"]
    if context == "text-above":
        page.text(PROSE, 440)
    if context == "across-pages":  # low on the page: the table breaks onto the next after a third to two thirds
        rows = len(item.tables[0].grid)
        page.y = BOTTOM + 4 * page.lead + rows * page.lead * rng.uniform(0.3, 0.6)
        page.text(PROSE[:200], 440)
    top = page.y
    for k, spec in enumerate(item.tables):
        if k:
            page.text(PROSE[:220], 440)
        _, right = draw_table(page, spec, choice["rules"], choice["align"], rng, gap, every_row)
    if context == "beside":  # running text in a column to the right of the table, from its top down past it
        saved = page.y
        page.y = top + page.lead * 0.75
        x = max(right + 30, 300)
        for _ in range(3):
            page.text(PROSE, A4[0] - 50 - x, x=x)
        page.y = min(saved, page.y)
    page.save()


# -- scoring --------------------------------------------------------------------------------------------------

def _spaceless(grid: list[list[str]]) -> list[list[str]]:
    return [["".join(c.split()) for c in row] for row in grid]


def score_file(truths: list[list[list[str]]], found: list[Table], into: list[Score]) -> int:
    """Each truth table scored against the extracted table holding most of its cells; the extracted tables that
    match none (returned) are extra."""
    grids = [_spaceless(t.grid) for t in found]
    used: set[int] = set()
    for truth in truths:
        truth = _spaceless(compact(truth))
        best = max(range(len(grids)), key=lambda k: (cells_right(truth, grids[k]), -k), default=None)
        hit = best is not None and sum((bag(truth) & bag(grids[best])).values()) * 2 >= sum(bag(truth).values())
        for s in into:
            s.truths += 1
            s.found += hit
            score_pair(s, truth, grids[best] if best is not None and hit else None)
        if hit and best is not None:
            used.add(best)
    for s in into:
        s.predicted += len(grids)
        s.predicted_found += len(used)
    return len(grids) - len(used)


@dataclass
class Results:
    scores: dict[tuple[str, str], Score] = field(default_factory=dict)  # (dimension, value) -> score
    total: Score = field(default_factory=Score)
    extra: dict[tuple[str, str], int] = field(default_factory=dict)

    def add(self, item: Layout, found: list[Table], seconds: float, error: str | None) -> None:
        keys = [(d, v) for d, v in item.choice.items()]
        into = [self.scores.setdefault(k, Score()) for k in keys] + [self.total]
        extra = score_file([t.grid for t in item.tables], found, into)
        for k in keys:
            self.extra[k] = self.extra.get(k, 0) + extra
        self.extra[("all", "")] = self.extra.get(("all", ""), 0) + extra
        for s in into:
            s.seconds += seconds
            if error:
                s.errors.append(error)

    def rows(self) -> list[dict[str, Any]]:
        out = []
        for (d, v), s in sorted(self.scores.items(), key=lambda kv: (list(DIMENSIONS).index(kv[0][0]),
                                                                     DIMENSIONS[kv[0][0]].index(kv[0][1]))):
            out.append({"family": f"{d}={v}", **s.row(), "extra": self.extra.get((d, v), 0)})
        out.append({"family": "all", **self.total.row(), "extra": self.extra.get(("all", ""), 0)})
        return out


def run(items: list[tuple[Layout, Path]],
        extract: Callable[[list[Path]], dict[str, tuple[list[Table], str | None, float]]]) -> Results:
    res = Results()
    found = extract([p for _, p in items])
    for item, path in items:
        tables, error, seconds = found[path.name]
        res.add(item, tables, seconds, error)
    return res


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layouts", type=int, default=600)
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--camelot", default="", help="camelot flavours to compare, e.g. hybrid,network")
    parser.add_argument("--keep", type=Path, help="Write the PDFs and their truth here (default: a temporary folder).")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--fail-under", action="append", default=[], metavar="FAMILY:METRIC=VALUE",
                        help="exit 1 when ragd's METRIC on FAMILY (e.g. 'shape=wrapped' or 'all') is below VALUE")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        items = []
        for n in range(args.layouts):
            item = layout(rng)
            path = folder / f"layout-{n:05d}.pdf"
            draw(path, item, random.Random(rng.random()))
            if args.keep:
                path.with_suffix(".json").write_text(json.dumps({"choice": item.choice,
                                                                 "tables": [t.grid for t in item.tables]}))
            items.append((item, path))
        systems = {"ragd": run(items, run_ragd)}
        for flavor in [f for f in args.camelot.split(",") if f]:
            systems[f"camelot-{flavor}"] = run(items, lambda paths, f=flavor: camelot_tables(f, paths))
    rows = [{"system": name, **row} for name, res in systems.items() for row in res.rows()]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(f"generated tables: {args.layouts} layouts (seed {args.seed}); a family is one value of one dimension")
        head = ("family", "system", "tables", "det R", "cell acc", "rows ok", "cols ok", "adj F1", "extra", "s/table")
        print(f"{head[0]:<24}{head[1]:<16}" + "".join(f"{h:>9}" for h in head[2:]))
        for r in sorted(rows, key=lambda r: ([x["family"] for x in rows].index(r["family"]), r["system"])):
            print(f"{r['family']:<24}{r['system']:<16}{r['tables']:>9}{r['det_r']:>9.3f}{r['cell_acc']:>9.3f}"
                  f"{r['rows_ok']:>9.3f}{r['cols_ok']:>9.3f}{r['adj_f1']:>9.3f}{r['extra']:>9}"
                  f"{r['seconds'] / max(1, r['tables']):>9.3f}")
    results = BenchResults("tablegen", config={"layouts": args.layouts, "seed": args.seed, "camelot": args.camelot})
    for r in rows:
        results.row("families", **r)
    results.save()
    gate(rows, args.fail_under, "family", "generated-table quality gate")


if __name__ == "__main__":
    main()
