"""Tables on PDFs nobody drew by hand (issue 31, item 1, first part): a seeded generator of table layouts with
exact cell truth, and ragd's cell accuracy per layout family.

    pip install -r bench/requirements-tablegen.txt
    python bench/tablegen.py [--per-family 20] [--seed 31] [--keep DIR]

Families vary the rules (none, horizontal only, full grid, outer frame only), the header (one row, or two with a
top cell spanning the figure columns), the alignment of figures (left, right), whether running text stands
above the table, and the shape (plain; labels that wrap onto a second line; a small two-column table of labels
and one figure column); each layout also varies the font size, column gap, row and column count and figure format.
The truth grid of a spanning header cell holds its text in the first column it spans. Scored as bench/tables.py
scores ICDAR: cells right at the same position under the best shift, rows and columns right, per family.
Not yet: row groups, footnote marks, decimal alignment, two tables on a page, tables across pages, large
borderless tables (the issue's other families).
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from reportlab.lib.pagesizes import A4
from reportlab.pdfbase.pdfmetrics import stringWidth
from reportlab.pdfgen import canvas

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tables import Score, compact, ragd_tables, score_pair

RULES = ("none", "horizontal", "grid", "frame")
HEADERS = ("one", "spanning")
ALIGNS = ("left", "right")
TEXT = ("no", "above")
SHAPES = ("plain", "wrapped", "two-column")
LABELS = ["Net sales", "Cost of sales", "Gross margin", "Research and development", "Selling expenses",
          "Administrative expenses", "Operating income", "Interest expense", "Income tax", "Net income",
          "Capital expenditure", "Depreciation", "Inventories", "Trade receivables", "Cash and equivalents",
          "Lease liabilities", "Deferred revenue", "Employees", "Dividends paid", "Share buybacks"]
PROSE = ("The figures below are unaudited and rounded to the nearest unit. Comparative figures have been "
         "restated where the accounting policies changed during the year.")


@dataclass(frozen=True)
class Layout:
    family: tuple[str, ...]
    grid: list[list[str]]  # the truth, spanning header text in its first column
    spans: list[tuple[int, int, int]]  # (row, first column, columns spanned) of header cells spanning columns
    label_width: float = 0.0  # wrapped: the label column's width (its labels wrap onto more lines)


def layout(rng: random.Random, family: tuple[str, ...]) -> Layout:
    _, header_kind, _, _, shape = family
    cols = 1 if shape == "two-column" else rng.randint(2, 5)
    years = [str(y) for y in sorted(rng.sample(range(2010, 2025), cols), reverse=True)]
    labels = rng.sample(LABELS, rng.randint(3, 5) if shape == "two-column" else rng.randint(4, 14))
    if shape == "wrapped":  # long labels, as in notes to accounts: "Cost of sales, excluding depreciation ..."
        others = rng.sample(LABELS, len(labels))
        labels = [f"{a}, excluding {b.lower()} and other items" for a, b in zip(labels, others)]
    style = rng.choice(["plain", "thousands", "decimal", "dollar"])

    def figure() -> str:
        v = rng.uniform(1, 99_999) if style != "decimal" else rng.uniform(0, 999)
        text = {"plain": f"{v:.0f}", "thousands": f"{v:,.0f}", "decimal": f"{v:.1f}", "dollar": f"${v:,.0f}"}[style]
        return f"({text})" if rng.random() < 0.1 else text

    body = [[label, *(figure() for _ in years)] for label in labels]
    wrap = rng.uniform(110, 150) if shape == "wrapped" else 0.0
    if header_kind == "one" or cols == 1:
        return Layout(family, [["", *years], *body], [], wrap)
    top = rng.choice(["Year ended December 31,", "Fiscal year", "In thousands of dollars"])
    return Layout(family, [["", top, *[""] * (cols - 1)], ["", *years], *body], [(0, 1, cols)], wrap)


def draw(path: Path, item: Layout, rng: random.Random) -> None:
    rules, _, align, text, _ = item.family
    font, size = rng.choice(["Helvetica", "Times-Roman", "Courier"]), rng.choice([8, 9, 10, 11])
    gap, lead = rng.randint(12, 36), size * rng.uniform(1.4, 1.9)
    grid = item.grid
    spanning = {(r, c) for r, c, n in item.spans if n > 1}  # as wide as the columns it spans, not wider
    width = [max(stringWidth(grid[i][j], font, size) for i in range(len(grid)) if (i, j) not in spanning)
             for j in range(len(grid[0]))]
    if item.label_width:
        width[0] = item.label_width
    x0, y = rng.uniform(50, 90), A4[1] - rng.uniform(70, 140)
    pdf = canvas.Canvas(str(path), pagesize=A4)
    pdf.setFont(font, size)
    if text == "above":
        for line in _wrap(PROSE, font, size, 440):
            pdf.drawString(x0, y, line)
            y -= lead
        y -= lead
    lefts = [x0 + sum(width[:j]) + gap * j for j in range(len(width))]
    right = lefts[-1] + width[-1]
    top_y = y + lead * 0.7
    for i, row in enumerate(grid):
        for j, value in enumerate(row):
            if not value:
                continue
            spanned = next((n for r, c, n in item.spans if r == i and c == j), 1)
            if spanned > 1:  # centred over the columns it spans
                mid = (lefts[j] + lefts[j + spanned - 1] + width[j + spanned - 1]) / 2
                pdf.drawCentredString(mid, y, value)
            elif j > 0 and align == "right":
                pdf.drawRightString(lefts[j] + width[j], y, value)
            elif j == 0 and item.label_width:  # the label wraps; the figures stand on its first line
                for k, line in enumerate(_wrap(value, font, size, item.label_width)):
                    pdf.drawString(lefts[j], y - k * size * 1.15, line)
            else:
                pdf.drawString(lefts[j], y, value)
        extra = (len(_wrap(row[0], font, size, item.label_width)) - 1) * size * 1.15 if item.label_width else 0.0
        y -= extra
        if rules in ("horizontal", "grid") and i < len(grid) - 1:
            pdf.line(x0 - 4, y - lead * 0.3, right + 4, y - lead * 0.3)
        y -= lead
    bottom_y = y + lead * 0.7
    if rules in ("grid", "frame", "horizontal"):
        pdf.rect(x0 - 4, bottom_y, right - x0 + 8, top_y - bottom_y)
    if rules == "grid":
        for j in range(1, len(lefts)):
            x = lefts[j] - gap / 2
            pdf.line(x, top_y, x, bottom_y)
    pdf.showPage()
    pdf.save()


def _wrap(text: str, font: str, size: float, width: float) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if line and stringWidth(f"{line} {word}", font, size) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return [*lines, line] if line else lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-family", type=int, default=20)
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--keep", type=Path, help="Write the PDFs and truth here (default: a temporary folder).")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    families = [f for f in itertools.product(RULES, HEADERS, ALIGNS, TEXT, SHAPES)
                if not (f[4] == "two-column" and f[1] == "spanning")]  # one figure column: nothing to span
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        scores: dict[tuple[str, ...], Score] = {}
        shapes: dict[str, Score] = {}
        for family in families:
            s = scores.setdefault(family, Score())
            for n in range(args.per_family):
                item = layout(rng, family)
                path = folder / f"{'-'.join(family)}-{n:03d}.pdf"
                draw(path, item, rng)
                truth = compact(item.grid)
                s.truths += 1
                found, error = ragd_tables(path)
                if error:
                    s.errors.append(error)
                best = max((t.grid for t in found), default=None,
                           key=lambda g: sum(1 for row in g for c in row if c))
                s.predicted += len(found)
                s.found += best is not None
                s.predicted_found += best is not None
                score_pair(s, truth, best)
                by_shape = shapes.setdefault(family[4], Score())
                score_pair(by_shape, truth, best)
                by_shape.truths += 1
                by_shape.found += best is not None
    print(f"{'rules':<11}{'header':<10}{'align':<7}{'text':<7}{'shape':<11}{'tables':>7}{'det R':>7}{'cell acc':>9}"
          f"{'rows ok':>8}"
          f"{'cols ok':>8}{'adj F1':>8}")
    total = Score()
    for family, s in scores.items():
        r = s.row()
        print(f"{family[0]:<11}{family[1]:<10}{family[2]:<7}{family[3]:<7}{family[4]:<11}{r['tables']:>7}{r['det_r']:>7.2f}"
              f"{r['cell_acc']:>9.3f}{r['rows_ok']:>8.2f}{r['cols_ok']:>8.2f}{r['adj_f1']:>8.3f}")
        for key in ("truths", "found", "cells", "cells_right", "rows_right", "cols_right", "adj_truth", "adj_pred",
                    "adj_common"):
            setattr(total, key, getattr(total, key) + getattr(s, key))
    for shape, s in shapes.items():
        r = s.row()
        print(f"{'shape ' + shape:<46}{r['tables']:>7}{r['det_r']:>7.2f}{r['cell_acc']:>9.3f}{r['rows_ok']:>8.2f}"
              f"{r['cols_ok']:>8.2f}{r['adj_f1']:>8.3f}")
    r = total.row()
    print(f"{'all':<46}{r['tables']:>7}{r['det_r']:>7.2f}{r['cell_acc']:>9.3f}{r['rows_ok']:>8.2f}"
          f"{r['cols_ok']:>8.2f}{r['adj_f1']:>8.3f}")


if __name__ == "__main__":
    main()
