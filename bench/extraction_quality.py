"""Extraction quality against ground truth, per format.

    python bench/extraction_quality.py [--data ../shared/data/docs] [--json]

Ground truth:
- `synthetic/`: the generator scripts in `synthetic/make/` give the exact content: the 8-row revenue table
  (DOCX, PDF, PPTX, HTML, scan), the two XLSX sheets, the cp1252 CSV, the 75-row incident table of
  `long_report.pdf` (pages 6-8), the 16 paragraphs of `twocol_interleaved.pdf` (`truth/twocol_gt.json`) and
  page 1 of the report as text (`truth/gt_report_p1.txt`) for OCR.
- `docling/{pdf,docx,html,xlsx,pptx,csv}`: docling's expected conversions (`groundtruth/*.json`, `*.md`).

Metrics: text recall (share of the truth's words found, as a bag of words), table-cell accuracy (share of the
truth's cells found at the same row and column of the best-matching extracted table, exact after whitespace
folding and with table-of-contents dot leaders left out on both sides), heading recall (truth headings found
among extracted headings), reading order (paragraphs found in order), OCR word recall, pages/s (docling PDFs:
the files read from their text layer alone; a file with a page sent to OCR, such as redp5110's page in fonts
without a Unicode map, is left out of the speed figure).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from _results import Results

from ragd.embed.base import default_token_counter
from ragd.ingest.chunk import chunk_blocks
from ragd.ingest.dedupe import document_text
from ragd.ingest.detect import detect
from ragd.ingest.extract import EXTRACTORS, ExtractOptions, Source
from ragd.types import Block, ChunkPolicy, ExtractedDocument

WORD = re.compile(r"[0-9a-zà-ÿ]+(?:[.,'][0-9a-zà-ÿ]+)*", re.IGNORECASE)
REVENUE = [
    ["Region", "Q3 Revenue (EUR)", "Change vs Q2"],
    ["North America", "1,204,500", "+4.2%"],
    ["Western Europe", "987,310", "-1.8%"],
    ["Eastern Europe", "312,004", "+12.5%"],
    ["Asia Pacific", "1,530,220", "+7.9%"],
    ["Latin America", "221,870", "+0.3%"],
    ["Middle East & Africa", "145,660", "-3.1%"],
    ["Total", "4,401,564", "+4.1%"],
]
HEADCOUNT = [["Department", "Location", "FTE 2023", "FTE 2024"], ["Engineering", "Berlin", "42", "51"],
             ["Engineering", "Austin", "18", "22"], ["Sales", "Paris", "25", "27"], ["Support", "Kraków", "14", "19"],
             ["Finance", "Berlin", "9", "9"], ["HR", "Remote", "5", "6"]]
CUSTOMERS = [["Kunde", "Straße", "Ort", "Umsatz €"],
             ["Müller GmbH", "Königsallee 12", "Düsseldorf", "12.450,00"],
             ["Zoë's Café", "Rue de l'Été 3", "Besançon", "3.120,50"],
             ["Østergaard A/S", "Ågade 7", "Århus", "8.900,00"],
             ["Señor Niño SL", "Calle Año 5", "Málaga", "1.005,75"]]
INCIDENT_HEADER = ("Incident", "Date", "Severity", "Service", "Minutes down")


def sales_rows() -> list[list[str]]:
    """The Sales sheet as build_corpus.py draws it (random.seed(7), same calls in the same order)."""
    import datetime
    import random

    rng = random.Random(7)
    products = [("Widget A", 12.5), ("Widget B", 19.99), ("Gadget X", 149.0), ("Service plan", 299.0)]
    customers = ["Müller GmbH", "Société Générale", "Acme Corp", "Zoë's Café", "Østergaard A/S"]
    rows = [["Order ID", "Date", "Customer", "Product", "Qty", "Unit price", "Total"]]
    for i in range(1, 21):
        p, price = rng.choice(products)
        q = rng.randint(1, 40)
        date = datetime.date(2024, 7, 1) + datetime.timedelta(days=3 * i)
        rows.append([f"SO-{1000 + i}", date.isoformat(), rng.choice(customers), p, str(q), _num(price),
                     _num(q * price)])
    return rows


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(round(v, 10))


def norm(text: str) -> str:
    return " ".join(text.replace("**", "").split())


def _plain(text: str) -> str:
    """Words only, lower case: punctuation differences do not count against reading order."""
    return " ".join(w.lower() for w in WORD.findall(text))


def words(text: str) -> Counter[str]:
    return Counter(w.lower() for w in WORD.findall(text))


def extract(path: Path) -> tuple[ExtractedDocument | Exception, float]:
    data = path.read_bytes()
    started = time.perf_counter()
    try:
        kind = detect(path, data)
        docs = list(EXTRACTORS[kind].extract(Source(path, data, path.as_posix(), path.as_uri()), ExtractOptions()))
    except Exception as exc:
        return exc, time.perf_counter() - started
    return docs[0], time.perf_counter() - started


def grids(doc: ExtractedDocument) -> list[list[list[str]]]:
    return [[list(b.header), *[list(r) for r in b.rows]] for b in doc.blocks if b.type == "table"]


# dot leaders of a table of contents ("Notices . . . . . vii"): layout, not content. ragd drops them; docling's
# truth keeps them, and splits them between its two cells ("Notices . . . ." | ". vii"), so cells are compared
# without them.
LEADERS = re.compile(r"\s*\.(?:\s?\.){2,}(?=\s|$)|^\.\s+(?=\S)")


def _compact(grid: list[list[str]]) -> list[list[str]]:
    rows = [[norm(LEADERS.sub(" ", c)) for c in r] for r in grid]
    rows = [r for r in rows if any(r)]
    if not rows:
        return []
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    keep = [j for j in range(width) if any(r[j] for r in rows)]
    return [[r[j] for j in keep] for r in rows]


def cell_score(truth: list[list[str]], found: list[list[list[str]]]) -> tuple[int, int]:
    """(cells matched in the best extracted table, cells in the truth table)."""
    t = _compact(truth)
    total = sum(len(r) for r in t)
    best = 0
    for g in found:
        g = _compact(g)
        hits = sum(1 for i, row in enumerate(t) for j, cell in enumerate(row)
                   if i < len(g) and j < len(g[i]) and g[i][j] == cell)
        best = max(best, hits)
    return best, total


def recall(truth: Counter[str], found: Counter[str]) -> tuple[int, int]:
    return sum(min(n, found[w]) for w, n in truth.items()), sum(truth.values())


class Tally:
    def __init__(self) -> None:
        self.data: dict[str, dict[str, list[float]]] = {}

    def add(self, fmt: str, metric: str, hit: float, total: float) -> None:
        slot = self.data.setdefault(fmt, {}).setdefault(metric, [0.0, 0.0])
        slot[0] += hit
        slot[1] += total

    def value(self, fmt: str, metric: str) -> float | None:
        slot = self.data.get(fmt, {}).get(metric)
        return None if not slot or not slot[1] else slot[0] / slot[1]


def docling_truth(json_path: Path) -> tuple[list[list[list[str]]], list[str]]:
    doc = json.loads(json_path.read_text())
    tables = [[[c["text"] for c in row] for row in t["data"]["grid"]] for t in doc.get("tables", [])]
    headings = [t["text"] for t in doc.get("texts", []) if t.get("label") in ("section_header", "title") and t["text"]]
    return tables, headings


def run_docling(root: Path, tally: Tally, failures: list[str]) -> None:
    for fmt in ("pdf", "docx", "html", "xlsx", "pptx", "csv"):
        for src in sorted((root / fmt / "sources").iterdir()):
            truth_dir = root / fmt / "groundtruth"
            stem = src.name if (truth_dir / f"{src.name}.json").exists() else src.stem
            gt_json, gt_md = truth_dir / f"{stem}.json", truth_dir / f"{stem}.md"
            if not gt_json.exists() or src.suffix.lower() in (".png", ".jpg"):
                continue
            doc, seconds = extract(src)
            key = f"docling-{fmt}"
            if isinstance(doc, Exception):
                failures.append(f"{src.name}: {type(doc).__name__}: {doc}")
                tally.add(key, "files_ok", 0, 1)
                continue
            tally.add(key, "files_ok", 1, 1)
            tables, headings = docling_truth(gt_json)
            found_tables = grids(doc)
            for t in tables:
                tally.add(key, "table_cells", *cell_score(t, found_tables))
            ours = {norm(b.text).lower() for b in doc.blocks if b.type == "heading"}
            for h in headings:
                tally.add(key, "headings", 1 if norm(h).lower() in ours else 0, 1)
            if gt_md.exists():
                tally.add(key, "text", *recall(words(gt_md.read_text()), words(document_text(doc))))
            if fmt == "pdf" and not doc.metadata.get("ocr_pages"):  # text-layer speed; OCR is timed on scans
                tally.add(key, "pages_per_s", doc.metadata.get("pages", 0), seconds)


def run_synthetic(root: Path, tally: Tally, failures: list[str], checks: dict[str, Any]) -> None:
    page1 = (root / "truth" / "gt_report_p1.txt").read_text()
    expected = {
        "report.docx": [REVENUE], "report.pdf": [REVENUE], "review.pptx": [REVENUE], "article.html": [REVENUE],
        "sales.xlsx": [sales_rows(), HEADCOUNT], "customers_cp1252.csv": [CUSTOMERS], "sales.csv": [sales_rows()],
        "scanned_page.png": [REVENUE], "scanned.pdf": [REVENUE],
    }
    headings = {"report.docx": ["1. Executive Summary", "1.1 Key highlights", "1.2 Actions for Q4",
                                "2. Revenue by Region", "2.1 Methodology", "3. Outlook"],
                "article.html": ["Q3 2024 revenue by region", "Regional breakdown", "Outlook", "Risks", "Guidance"],
                "review.pptx": ["Q3 2024 Business Review", "Highlights", "Revenue by region"]}
    headings["report.pdf"] = headings["report.docx"]
    for src in sorted(p for p in root.iterdir() if p.is_file()):
        doc, seconds = extract(src)
        fmt = "synthetic-" + ("ocr" if src.name.startswith("scanned") else src.suffix.lstrip(".").lower())
        if isinstance(doc, Exception):
            failures.append(f"{src.name}: {type(doc).__name__}: {doc}")
            tally.add(fmt, "files_ok", 0, 1)
            continue
        tally.add(fmt, "files_ok", 1, 1)
        found = grids(doc)
        for t in expected.get(src.name, []):
            tally.add(fmt, "table_cells", *cell_score(t, found))
        ours = {norm(b.text).lower() for b in doc.blocks if b.type == "heading"}
        for h in headings.get(src.name, []):
            tally.add(fmt, "headings", 1 if norm(h).lower() in ours else 0, 1)
        if src.name in ("report.docx", "report.pdf", "scanned_page.png", "scanned.pdf"):
            hit, total = recall(words(page1), words(document_text(doc)))
            tally.add(fmt, "ocr_words" if "scanned" in src.name else "text", hit, total)
            if src.name == "scanned_page.png":
                checks["ocr_word_recall_scanned_page_png"] = round(hit / total, 4)
        if src.suffix == ".pdf":
            tally.add(fmt, "pages_per_s", doc.metadata.get("pages", 0), seconds)
        if src.name == "twocol_interleaved.pdf":
            truth = json.loads((root / "truth" / "twocol_gt.json").read_text())
            text = _plain(" ".join(b.text for b in doc.blocks if b.type != "table"))
            position, in_order = 0, 0
            for para in truth:
                at = text.find(_plain(para), position)
                if at >= 0:
                    in_order += 1
                    position = at + len(_plain(para))
            checks["twocol_interleaved_paragraphs_in_order"] = f"{in_order}/{len(truth)}"
            tally.add(fmt, "reading_order", in_order, len(truth))
        if src.name == "long_report.pdf":
            checks.update(incident_check(doc))


def incident_check(doc: ExtractedDocument) -> dict[str, Any]:
    tables = [b for b in doc.blocks if b.type == "table" and b.header == INCIDENT_HEADER]
    out: dict[str, Any] = {"incident_tables": len(tables)}
    if len(tables) != 1:
        return out
    table = tables[0]
    ids_ok = [r[0] for r in table.rows] == [f"INC-{2000 + i}" for i in range(75)]
    dates_ok = [r[1] for r in table.rows] == [f"2024-{(i % 12) + 1:02d}-{(i % 27) + 1:02d}" for i in range(75)]
    chunks, _ = chunk_blocks([Block("heading", "Incidents", level=1), table], ChunkPolicy(), default_token_counter(),
                             doc_id="bench")
    header_line = "| " + " | ".join(INCIDENT_HEADER) + " |"
    out.update({"incident_rows": len(table.rows), "incident_ids_in_order": ids_ok, "incident_dates_exact": dates_ok,
                "incident_pages": table.meta.get("pages"), "incident_chunks": len(chunks),
                "incident_chunks_start_with_header": all(c.content.startswith(header_line) for c in chunks)})
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/docs")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    tally, failures, checks = Tally(), [], {}
    started = time.perf_counter()
    run_synthetic(args.data / "synthetic", tally, failures, checks)
    run_docling(args.data / "docling", tally, failures)
    metrics = ("files_ok", "text", "table_cells", "headings", "reading_order", "ocr_words", "pages_per_s")
    result = {fmt: {m: tally.value(fmt, m) for m in metrics if tally.value(fmt, m) is not None}
              for fmt in sorted(tally.data)}
    results = Results("extraction_quality", config={"files_failed": len(failures)})
    for fmt, values in result.items():
        results.row("formats", format=fmt, **{m: values.get(m) for m in metrics})
    for key, value in checks.items():
        results.row("checks", check=key, result=value)
    results.save()
    if args.json:
        print(json.dumps({"formats": result, "checks": checks, "failures": failures}, indent=2))
        return
    print(f"{'format':<18}" + "".join(f"{m:>14}" for m in metrics))
    for fmt, values in result.items():
        cells = [f"{values[m]:>14.3f}" if m in values else f"{'-':>14}" for m in metrics]
        print(f"{fmt:<18}" + "".join(cells))
    print()
    for key, value in checks.items():
        print(f"{key}: {value}")
    if failures:
        print("\nfailed files:")
        for f in failures:
            print("  " + f)
    print(f"\ntotal {time.perf_counter() - started:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
