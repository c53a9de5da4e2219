"""Tables on PDFs nobody tuned for: ragd against camelot, side by side, on two sets with human or maintainer truth.

    python bench/tables.py [--data ../shared/data/docs/tables] [--flavors lattice,network,hybrid] [--no-camelot]
                           [--json] [--show]

Sets (see ../shared/data/README.md):
- `icdar2013/`: ICDAR 2013 table competition, development half: each table region's page and bounding box
  (`*-reg.xml`) and its cells with start/end row and column and text (`*-str.xml`).
- `camelot/`: camelot's test PDFs with the tables its maintainers expect (`index.json`: one or more acceptable CSVs
  per table; a table is scored against the variant that matches best).

Metrics, per set and system (micro-averaged over the set's truth tables):
- detection P/R: ICDAR, per region: a truth region is found by an extracted table box on its page with IoU >= 0.5
  (one to one, best IoU first); precision is found boxes over all extracted boxes. camelot set (no regions): a truth
  table is found when some extracted table holds at least half of its non-empty cell texts; precision is extracted
  tables that found a truth table over all extracted tables (a lower bound: a file may hold tables its maintainers
  did not list).
- cell accuracy: the truth's non-empty cells whose text (NFKC, whitespace folded) is at the same row and column of
  the matched extracted table, after the best shift of rows and columns (a title row kept or left out is not a
  structure error); a truth table with no match scores 0.
- rows / cols right: matched tables whose count of non-empty rows (columns) equals the truth's.
- adjacency F1 (ICDAR 2013 structure metric): the pairs of horizontally and vertically nearest non-empty cells,
  texts reduced to lower-case letters and digits, compared as multisets between truth and extracted table; a span
  written into every cell it covers counts once.

The files of both sets are split by a hash of their name into a tuning part and a held-out part (about one
third), and both are reported: a change that helps only the tuning part is fitted to it. camelot runs in its own virtual
environment (`bench/.venv-camelot`, made from `bench/requirements-camelot.txt` on first use), so its dependencies
never enter ragd's; it reads every page (`pages="all"`), as ragd does.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import re
import subprocess
import sys
import time
import unicodedata
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _results import Results

from ragd.ingest.detect import detect
from ragd.ingest.extract import EXTRACTORS, ExtractOptions, Source

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "data" / "docs" / "tables"
CAMELOT_VENV = HERE / ".venv-camelot"
IOU_FOUND = 0.5
_ALNUM = re.compile(r"[^0-9a-z]+")

Box = tuple[int, float, float, float, float]  # page, x0, top, x1, bottom (points, origin at the top left)


@dataclass
class Table:
    grid: list[list[str]]
    boxes: list[Box] = field(default_factory=list)


@dataclass
class Truth:
    file: str
    grid: list[list[str]]
    box: Box | None = None
    held_out: bool = False


@dataclass
class Score:
    truths: int = 0
    found: int = 0
    predicted: int = 0
    predicted_found: int = 0
    cells: int = 0
    cells_right: int = 0
    rows_right: int = 0
    cols_right: int = 0
    adj_truth: int = 0
    adj_pred: int = 0
    adj_common: int = 0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        p = self.adj_common / self.adj_pred if self.adj_pred else 0.0
        r = self.adj_common / self.adj_truth if self.adj_truth else 0.0
        n = max(self.truths, 1)
        return {"tables": self.truths, "det_p": self.predicted_found / self.predicted if self.predicted else 0.0,
                "det_r": self.found / n, "cell_acc": self.cells_right / self.cells if self.cells else 0.0,
                "rows_ok": self.rows_right / n, "cols_ok": self.cols_right / n,
                "adj_f1": 2 * p * r / (p + r) if p + r else 0.0, "seconds": self.seconds,
                "errors": len(self.errors)}


# -- text and grids ---------------------------------------------------------------------------------------------

def cell(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).split())


def compact(grid: list[list[str]]) -> list[list[str]]:
    """Cells normalised; rows and columns with no text dropped."""
    rows = [[cell(c) for c in r] for r in grid]
    rows = [r for r in rows if any(r)]
    if not rows:
        return []
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    keep = [j for j in range(width) if any(r[j] for r in rows)]
    return [[r[j] for j in keep] for r in rows]


def cells_right(truth: list[list[str]], found: list[list[str]]) -> int:
    """Truth cells found at the same position, under the best shift of rows and columns: shifts are proposed by
    cells whose text occurs in both grids, plus no shift."""
    where: dict[str, list[tuple[int, int]]] = {}
    for i, row in enumerate(found):
        for j, c in enumerate(row):
            if c:
                where.setdefault(c, []).append((i, j))
    votes: Counter[tuple[int, int]] = Counter({(0, 0): 0})
    for i, row in enumerate(truth):
        for j, c in enumerate(row):
            for fi, fj in where.get(c, [])[:20]:
                votes[(fi - i, fj - j)] += 1
    best = 0
    for (di, dj), _ in votes.most_common(8):
        hits = sum(1 for i, row in enumerate(truth) for j, c in enumerate(row)
                   if c and 0 <= i + di < len(found) and 0 <= j + dj < len(found[i + di])
                   and found[i + di][j + dj] == c)
        best = max(best, hits)
    return best


def adjacency(grid: list[list[str]]) -> Counter[tuple[str, str, str]]:
    """(text, next text, direction) for each pair of nearest non-empty cells along rows and down columns."""
    keys = [[_ALNUM.sub("", c.lower()) for c in row] for row in grid]
    width = max((len(r) for r in keys), default=0)
    keys = [r + [""] * (width - len(r)) for r in keys]
    out: Counter[tuple[str, str, str]] = Counter()
    lines = [(r, "h") for r in keys] + [([row[j] for row in keys], "v") for j in range(width)]
    for line, direction in lines:
        texts = [t for t in line if t]
        texts = [t for k, t in enumerate(texts) if k == 0 or t != texts[k - 1]]  # a span copied across its cells
        out.update((a, b, direction) for a, b in zip(texts, texts[1:]))
    return out


def bag(grid: list[list[str]]) -> Counter[str]:
    return Counter(c for row in grid for c in row if c)


def iou(a: Box, b: Box) -> float:
    if a[0] != b[0]:
        return 0.0
    w = min(a[3], b[3]) - max(a[1], b[1])
    h = min(a[4], b[4]) - max(a[2], b[2])
    if w <= 0 or h <= 0:
        return 0.0
    inter = w * h
    union = (a[3] - a[1]) * (a[4] - a[2]) + (b[3] - b[1]) * (b[4] - b[2]) - inter
    return inter / union if union > 0 else 0.0


def held_out(name: str) -> bool:
    return int(hashlib.sha256(name.encode()).hexdigest(), 16) % 3 == 0


# -- truth ----------------------------------------------------------------------------------------------------

def page_heights(pdf: Path) -> list[float]:
    import pypdfium2

    try:
        doc = pypdfium2.PdfDocument(str(pdf))
    except pypdfium2.PdfiumError:  # encrypted: its tables are not located (and not read) by either system
        return []
    try:
        return [float(doc[i].get_size()[1]) for i in range(len(doc))]
    finally:
        doc.close()


def icdar_truth(root: Path) -> list[Truth]:
    out = []
    for pdf in sorted(root.glob("*.pdf")):
        heights = page_heights(pdf)
        regions = {}
        for table in ET.parse(pdf.with_name(pdf.stem + "-reg.xml")).getroot().iter("table"):
            for region in table.iter("region"):
                page = int(region.get("page", "1"))
                bb = region.find("bounding-box")
                assert bb is not None
                x1, y1, x2, y2 = (float(bb.get(k, "0")) for k in ("x1", "y1", "x2", "y2"))
                h = heights[page - 1]
                regions[(table.get("id"), region.get("id"))] = (page, x1, h - y2, x2, h - y1)
        for table in ET.parse(pdf.with_name(pdf.stem + "-str.xml")).getroot().iter("table"):
            for region in table.iter("region"):
                cells = [(int(c.get("start-row", "0")), int(c.get("start-col", "0")), c.findtext("content") or "")
                         for c in region.iter("cell")]
                if not cells:
                    continue
                grid = [[""] * (max(c[1] for c in cells) + 1) for _ in range(max(c[0] for c in cells) + 1)]
                for r, c, text in cells:
                    grid[r][c] = text
                out.append(Truth(pdf.name, compact(grid), regions.get((table.get("id"), region.get("id"))),
                                 held_out(pdf.name)))
    return out


def camelot_truth(root: Path) -> list[tuple[Truth, list[list[list[str]]]]]:
    """Each expected table with all its acceptable variants."""
    out = []
    for entry in json.loads((root / "index.json").read_text(encoding="utf-8")):
        variants = []
        for name in entry["expected_any_of"]:
            with (root / name).open(encoding="utf-8", newline="") as f:
                variants.append(compact(list(csv.reader(f))))
        pdf = Path(entry["pdf"]).name
        out.append((Truth(pdf, variants[0], None, held_out(pdf)), variants))
    return out


# -- systems --------------------------------------------------------------------------------------------------

def ragd_tables(pdf: Path) -> tuple[list[Table], str | None]:
    pdf = pdf.resolve()
    data = pdf.read_bytes()
    try:
        docs = list(EXTRACTORS[detect(pdf, data)].extract(Source(pdf, data, pdf.as_posix(), pdf.as_uri()),
                                                          ExtractOptions()))
    except Exception as exc:  # a crash is a result here: no tables, with the reason
        return [], f"{type(exc).__name__}: {exc}"
    tables = []
    for doc in docs:
        if isinstance(doc, Exception):
            return [], f"{type(doc).__name__}: {doc}"
        for b in doc.blocks:
            if b.type != "table":
                continue
            boxes = [(int(w["page"]), *map(float, w["bbox"])) for w in b.meta.get("boxes", []) if "bbox" in w]
            tables.append(Table(compact([list(b.header), *[list(r) for r in b.rows]]), boxes))  # type: ignore[misc]
    return tables, None


def camelot_tables(flavor: str, pdfs: list[Path]) -> dict[str, tuple[list[Table], str | None, float]]:
    python = CAMELOT_VENV / "bin" / "python"
    if not python.exists():
        print(f"making {CAMELOT_VENV} for camelot (once)", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(CAMELOT_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "-r", str(HERE / "requirements-camelot.txt")],
                       check=True)
    done = subprocess.run([str(python), str(HERE / "_camelot_runner.py"), flavor, *map(str, pdfs)],
                          capture_output=True, text=True, check=True)
    heights = {p.name: page_heights(p) for p in pdfs}
    out = {}
    for line in done.stdout.splitlines():
        item = json.loads(line)
        name = Path(item["file"]).name
        tables = []
        for t in item["tables"]:
            boxes: list[Box] = []
            if t["bbox"] and heights[name]:
                x1, y1, x2, y2 = t["bbox"]
                h = heights[name][t["page"] - 1]
                boxes = [(t["page"], x1, h - y2, x2, h - y1)]
            tables.append(Table(compact(t["grid"]), boxes))
        out[name] = (tables, item.get("error"), item["seconds"])
    return out


# -- scoring --------------------------------------------------------------------------------------------------

def score_pair(s: Score, truth: list[list[str]], found: list[list[str]] | None) -> None:
    s.cells += sum(1 for row in truth for c in row if c)
    s.adj_truth += sum(adjacency(truth).values())
    if found is None:
        return
    s.cells_right += cells_right(truth, found)
    s.rows_right += len(found) == len(truth)
    s.cols_right += max((len(r) for r in found), default=0) == max((len(r) for r in truth), default=0)
    t, f = adjacency(truth), adjacency(found)
    s.adj_pred += sum(f.values())
    s.adj_common += sum((t & f).values())


def score_icdar(truths: list[Truth], results: dict[str, tuple[list[Table], str | None, float]],
                part: bool | None) -> Score:
    s = Score()
    for name in sorted({t.file for t in truths if part is None or t.held_out == part}):
        tables, error, seconds = results[name]
        s.seconds += seconds
        if error:
            s.errors.append(f"{name}: {error}")
        mine = [t for t in truths if t.file == name]
        boxes = [(k, b) for k, t in enumerate(tables) for b in t.boxes]
        s.predicted += len(boxes)
        pairs = sorted(((iou(t.box, b), i, j) for i, t in enumerate(mine) if t.box for j, (_, b) in enumerate(boxes)),
                       reverse=True)
        used_t: set[int] = set()
        used_b: set[int] = set()
        for value, i, j in pairs:
            if value >= IOU_FOUND and i not in used_t and j not in used_b:
                used_t.add(i)
                used_b.add(j)
        s.found += len(used_t)
        s.predicted_found += len(used_b)
        for truth in mine:
            s.truths += 1
            best = max(((iou(truth.box, b), k) for k, b in boxes if truth.box), default=(0.0, -1))
            score_pair(s, truth.grid, tables[best[1]].grid if best[0] > 0.1 else None)
    return s


def score_camelot(truths: list[tuple[Truth, list[list[list[str]]]]],
                  results: dict[str, tuple[list[Table], str | None, float]], part: bool | None = None) -> Score:
    s = Score()
    for name in sorted({t.file for t, _ in truths if part is None or t.held_out == part}):
        tables, error, seconds = results[name]
        s.seconds += seconds
        if error:
            s.errors.append(f"{name}: {error}")
        s.predicted += len(tables)
        hit: set[int] = set()
        for _, variants in (x for x in truths if x[0].file == name):
            s.truths += 1
            options = [(cells_right(v, t.grid) / max(1, sum(1 for r in v for c in r if c)), k, v)
                       for v in variants for k, t in enumerate(tables)]
            acc, k, variant = max(options, key=lambda o: o[0], default=(0.0, -1, variants[0]))
            found = k >= 0 and sum((bag(variant) & bag(tables[k].grid)).values()) * 2 >= sum(bag(variant).values())
            if found:
                s.found += 1
                hit.add(k)
            score_pair(s, variant, tables[k].grid if k >= 0 and acc > 0 else None)
        s.predicted_found += len(hit)
    return s


def run_ragd(pdfs: list[Path]) -> dict[str, tuple[list[Table], str | None, float]]:
    out = {}
    for pdf in pdfs:
        started = time.perf_counter()
        tables, error = ragd_tables(pdf)
        out[pdf.name] = (tables, error, time.perf_counter() - started)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--flavors", default="lattice,network,hybrid", help="camelot flavours to compare")
    parser.add_argument("--no-camelot", action="store_true", help="ragd only")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--show", action="store_true", help="print each file's errors")
    parser.add_argument("--fail-under", action="append", default=[], metavar="SET:METRIC=VALUE",
                        help="exit 1 when ragd's METRIC on SET is below VALUE (repeatable), e.g. "
                             "'icdar2013 all:cell_acc=0.9' (the quality gate)")
    args = parser.parse_args()
    icdar = icdar_truth(args.data / "icdar2013")
    cam = camelot_truth(args.data / "camelot")
    icdar_pdfs = sorted((args.data / "icdar2013").glob("*.pdf"))
    cam_pdfs = sorted({args.data / "camelot" / "pdfs" / t.file for t, _ in cam})
    systems = {"ragd": (run_ragd(icdar_pdfs), run_ragd(cam_pdfs))}
    if not args.no_camelot:
        for flavor in args.flavors.split(","):
            systems[f"camelot-{flavor}"] = (camelot_tables(flavor, icdar_pdfs), camelot_tables(flavor, cam_pdfs))
    rows = []
    for system, (on_icdar, on_cam) in systems.items():
        for label, s in (("icdar2013 all", score_icdar(icdar, on_icdar, None)),
                         ("icdar2013 tune", score_icdar(icdar, on_icdar, False)),
                         ("icdar2013 held-out", score_icdar(icdar, on_icdar, True)),
                         ("camelot", score_camelot(cam, on_cam)),
                         ("camelot tune", score_camelot(cam, on_cam, False)),
                         ("camelot held-out", score_camelot(cam, on_cam, True))):
            rows.append({"set": label, "system": system, **s.row()})
            if args.show:
                for e in s.errors:
                    print(f"  {system} {label}: {e}", file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        _print(rows, icdar, cam, icdar_pdfs, cam_pdfs)
    results = Results("tables", config={"flavors": "" if args.no_camelot else args.flavors,
                                        "icdar_pdfs": len(icdar_pdfs), "camelot_pdfs": len(cam_pdfs)})
    for row in sorted(rows, key=lambda r: (r["set"], r["system"])):
        results.row("tables", **row)
    results.save()
    gate(rows, args.fail_under, "set", "table quality gate")


def gate(rows: list[dict[str, Any]], floors: list[str], key: str, name: str) -> None:
    """Exit 1 naming every floor ragd's figures fell under: floors are "WHERE:METRIC=VALUE", WHERE the row's `key`."""
    failed = []
    for floor in floors:
        where, _, value = floor.rpartition("=")
        label, _, metric = where.rpartition(":")
        row = next((r for r in rows if r["system"] == "ragd" and r[key] == label), None)
        if row is None or metric not in row:
            raise SystemExit(f"unknown gate {floor!r}: use {key.upper()}:METRIC=VALUE with a {key} and metric of the "
                             "table")
        if row[metric] < float(value):
            failed.append(f"{label} {metric} {row[metric]:.3f} < {float(value):.3f}")
    if failed:
        raise SystemExit(f"{name} failed: " + "; ".join(failed))
    if floors:
        print(f"{name}: {len(floors)} floors held")


def _print(rows: list[dict[str, Any]], icdar: list[Truth], cam: list[tuple[Truth, Any]], icdar_pdfs: list[Path],
           cam_pdfs: list[Path]) -> None:
    print(f"tables: ICDAR 2013 dev half ({len(icdar_pdfs)} PDFs, {len(icdar)} table regions, held-out "
          f"{sum(t.held_out for t in icdar)}), camelot expected ({len(cam_pdfs)} PDFs, {len(cam)} tables)")
    head = ("set", "system", "tables", "det P", "det R", "cell acc", "rows ok", "cols ok", "adj F1", "s", "errors")
    print(f"{head[0]:<19} {head[1]:<16}" + "".join(f"{h:>9}" for h in head[2:]))
    for r in sorted(rows, key=lambda r: (r["set"], r["system"])):
        print(f"{r['set']:<19} {r['system']:<16}{r['tables']:>9}{r['det_p']:>9.3f}{r['det_r']:>9.3f}"
              f"{r['cell_acc']:>9.3f}{r['rows_ok']:>9.3f}{r['cols_ok']:>9.3f}{r['adj_f1']:>9.3f}"
              f"{r['seconds']:>9.1f}{r['errors']:>9}")


if __name__ == "__main__":
    main()
