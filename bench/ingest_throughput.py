"""Ingest throughput: documents/s and chunks/s for the hashing and the ONNX embedders, with peak memory.

    python bench/ingest_throughput.py [--docs-hash 5183] [--docs-onnx 1000] [--files 1000] [--real-docs]
                                      [--workers 1,2] [--long-pages 300] [--office-sections 300]
                                      [--office-rows 30000] [--only files|real|long|office|hash|onnx]

Corpus: BEIR SciFact (../shared/data/beir/scifact/corpus.jsonl), ingested through the Python API into a fresh
embedded server. A second, unchanged ingest measures the no-op path (dedupe by content hash).

`files`: the same documents written as Markdown files and ingested from their folder, with each file extracted
in the worker process (the default: time and memory limits per item) and in-process, alternating, so the cost
of the isolation is a ratio within one run. With `--real-docs`, the real documents (PDF, Office, scans, the ICDAR
table PDFs) are also ingested with 1..N files extracted at once (`--workers`), alternating.

`office`: a long Word document with many tables and a 30,000-row workbook, generated: seconds to extract each.

`long`: one long dense PDF made of real text-layer pages (the Federal Register issue, the IBM Redbook sample, the
20-page report and two ICDAR reports, repeated to `--long-pages`): pages/s extracted on one core, then the same file
ingested end to end with one worker and with as many as there are cores (its pages read in ranges by all of them),
with the largest worker's peak memory; the same file without the pages read by OCR (seconds each), extracted on
one core: the rate of text-layer pages alone; and the parser alone, PLAYA against pdfminer, reading every page's
objects.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import DATA, chunk_texts, peak_rss_mb, private_ragd, scifact_docs

import ragd
from ragd.ingest.pipeline import default_workers


def raw_embedder(embedder: str, docs: list[dict[str, object]]) -> float:
    """Texts/s of the embedder alone over the texts ragd embeds for these documents (its chunks' search text)."""
    from ragd.embed import make_embedder

    texts = chunk_texts(docs)
    model = make_embedder(embedder)
    model.embed_documents(texts[:16])  # load the model first
    t0 = time.perf_counter()
    model.embed_documents(texts)
    return len(texts) / (time.perf_counter() - t0)


def raw_around(embedder: str, docs: list[dict[str, object]], ingest: Callable[[], float]) -> tuple[float, float]:
    """(the embedder alone, ingest end to end), chunks/s: the embedder timed before and after the ingest, on a
    sample as long as a third of it, and averaged, so a machine that speeds up or slows down meanwhile (a
    shared host does) biases the share less."""
    sample = docs[: max(50, len(docs) // 3)]
    before = raw_embedder(embedder, sample)
    end_to_end = ingest()
    after = raw_embedder(embedder, sample)
    return (before + after) / 2, end_to_end


def run(embedder: str, n: int) -> None:
    docs = scifact_docs(n)
    with private_ragd(embedder) as client:
        col = client.collection("bench")
        timed: dict[str, Any] = {}

        def ingest() -> float:
            t0 = time.perf_counter()
            timed["report"] = col.ingest(documents=docs)
            timed["first"] = time.perf_counter() - t0
            return float(timed["report"].chunks / timed["first"])

        raw: float | None = None
        if embedder == "hash":
            ingest()
        else:
            raw = raw_around(embedder, docs, ingest)[0]
        report, first = timed["report"], timed["first"]
        t0 = time.perf_counter()
        again = col.ingest(documents=docs)
        second = time.perf_counter() - t0
    assert not report.failed, report.failed[:3]
    print(f"{embedder:<14} docs {len(docs):>5}  chunks {report.chunks:>5}  "
          f"{len(docs) / first:8.1f} docs/s  {report.chunks / first:8.1f} chunks/s  ({first:6.1f} s)  "
          f"re-ingest unchanged {len(docs) / second:8.1f} docs/s ({again.count('unchanged')} unchanged)  "
          f"peak RSS {peak_rss_mb():.0f} MB")
    if raw is not None:
        print(f"{embedder:<14} the embedder alone {raw:8.1f} chunks/s: ingest end to end is "
              f"{report.chunks / first / raw:.0%} of it")


def files(n: int, rounds: int = 2) -> None:
    docs = scifact_docs(n)
    with tempfile.TemporaryDirectory(prefix="ragd-bench-files-") as tmp:
        folder = Path(tmp)
        for doc in docs:
            (folder / f"{doc['id']}.md").write_text(f"# {doc['title']}\n\n{doc['text']}\n", encoding="utf-8")
        isolation_cost(f"{len(docs)} small files", [folder], rounds)


def isolation_cost(label: str, paths: list[Path], rounds: int) -> None:
    """The same folders ingested with each file extracted in the worker process and in-process, alternating."""
    with private_ragd("hash") as isolated:
        inline = ragd.connect(settings=isolated.settings.model_copy(update={"extract_isolation": False}))
        timings: dict[str, list[float]] = {"worker process": [], "in-process": []}
        try:
            for r in range(rounds):
                for mode, client in (("worker process", isolated), ("in-process", inline)):
                    col = client.collection(f"files-{mode.split()[0]}-{r}")
                    t0 = time.perf_counter()
                    report = col.ingest(paths)
                    timings[mode].append(time.perf_counter() - t0)
        finally:
            inline.close()
    best = {mode: min(t) for mode, t in timings.items()}
    for mode, seconds in best.items():
        print(f"{label}: {mode:<15} {len(report.items) / seconds:8.1f} items/s  (best of {rounds}: {seconds:6.1f} s)")
    print(f"{label}: isolation cost {best['worker process'] / best['in-process'] - 1:+.1%} time per run")


def parallel(label: str, paths: list[Path], workers: list[int], rounds: int) -> None:
    """The same folders ingested with 1..N files extracted at once, alternating: items/s per worker count."""
    timings: dict[int, list[float]] = {n: [] for n in workers}
    with private_ragd("hash") as client:
        for r in range(rounds):
            for n in workers:
                col = client.collection(f"parallel-{n}-{r}")
                t0 = time.perf_counter()
                report = col.ingest(paths, workers=n)
                timings[n].append(time.perf_counter() - t0)
    base = min(timings[workers[0]])
    for n in workers:
        best = min(timings[n])
        print(f"{label}: {n} extraction worker(s) {len(report.items) / best:8.2f} items/s  (best of {rounds}: "
              f"{best:6.1f} s, {base / best:.2f}x)")


LONG_SOURCES = ["pdfplumber/federal-register-2020-17221.pdf", "docling/pdf/sources/redp5110_sampled.pdf",
                "synthetic/long_report.pdf", "tables/icdar2013/us-001.pdf", "tables/icdar2013/eu-001.pdf"]


def long_pdf(pages: int, path: Path) -> int:
    """A PDF of `pages` real text-layer pages (the sources' pages with 200 characters or more, in turn, repeated;
    scans and picture pages left out: they measure OCR); returns the page count written."""
    import pypdfium2 as pdfium

    out = pdfium.PdfDocument.new()
    sources = []
    for name in LONG_SOURCES:
        if (DATA / "docs" / name).exists():
            src = pdfium.PdfDocument(DATA / "docs" / name)
            sources.append((src, [i for i in range(len(src)) if src[i].get_textpage().count_chars() >= 200]))
    while len(out) < pages:
        for src, text_pages in sources:
            take = text_pages[: pages - len(out)]
            if take:
                out.import_pages(src, take)
    out.save(path)
    return len(out)


def objects_per_s(path: Path, use_playa: bool) -> float:
    """Pages/s reading every page's objects (characters, rules, images) as pdfplumber holds them, with PLAYA or
    with pdfminer: the parser alone, before words, tables and layout."""
    from ragd.ingest.extract.pdfpages import FastPDF

    data = path.read_bytes()
    t0 = time.perf_counter()
    with FastPDF.open_bytes(data, use_playa=use_playa) as pdf:
        for page in pdf.pages:
            assert page.objects is not None
            page.flush_cache()
        n = len(pdf.pages)
    return n / (time.perf_counter() - t0)


def extract_pdf(path: Path) -> tuple[Any, float]:
    """(the document, seconds) extracting a PDF in this process, on one core."""
    from ragd.ingest.extract import EXTRACTORS, ExtractOptions, Source

    source = Source(path=path, data=path.read_bytes(), external_id=str(path), source_uri=path.as_uri())
    t0 = time.perf_counter()
    docs = list(EXTRACTORS["pdf"].extract(source, ExtractOptions()))
    took = time.perf_counter() - t0
    assert not isinstance(docs[0], Exception), docs[0]
    return docs[0], took


def text_layer_rate(path: Path, ocr_pages: list[int], out: Path) -> tuple[int, float]:
    """(pages, seconds) extracting on one core the long PDF without the pages it read by OCR: the rate of
    text-layer pages alone, which a few OCR pages (seconds each) would otherwise hide."""
    import pypdfium2 as pdfium

    src, dst, ocr = pdfium.PdfDocument(path), pdfium.PdfDocument.new(), set(ocr_pages)
    dst.import_pages(src, [i for i in range(len(src)) if i + 1 not in ocr])
    dst.save(out)
    doc, took = extract_pdf(out)
    assert not doc.metadata.get("ocr_pages"), doc.metadata  # the same pages, read the same way
    return len(dst), took


def long(pages: int) -> None:
    with tempfile.TemporaryDirectory(prefix="ragd-bench-long-") as tmp:
        path = Path(tmp) / "long.pdf"
        n = long_pdf(pages, path)
        doc, extract_s = extract_pdf(path)
        playa, pdfminer = objects_per_s(path, True), objects_per_s(path, False)
        cores = default_workers()
        timings = {}
        with private_ragd("hash") as client:
            for workers in sorted({1, cores}):
                col = client.collection(f"long{workers}")
                t0 = time.perf_counter()
                report = col.ingest([path], workers=workers)
                timings[workers] = time.perf_counter() - t0
                assert not report.failed, report.failed
        worker_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        ocr_pages = list(doc.metadata.get("ocr_pages") or [])
        ocr = len(ocr_pages)
        text_n, text_s = text_layer_rate(path, ocr_pages, Path(tmp) / "text.pdf")
        split = (f"; {cores} workers reading page ranges {n / timings[cores]:6.1f} pages/s ({timings[cores]:6.1f} s, "
                 f"{timings[1] / timings[cores]:.2f}x)") if cores > 1 else ""
        print(f"long PDF {n} pages ({path.stat().st_size / 1e6:.1f} MB, {ocr} read by OCR: glyphs without a Unicode "
              f"map): extraction on one core {n / extract_s:6.1f} "
              f"pages/s ({extract_s:6.1f} s), its {text_n} text-layer pages alone {text_n / text_s:6.1f} pages/s "
              f"({text_s:6.1f} s); ingest end to end, 1 worker {n / timings[1]:6.1f} pages/s "
              f"({timings[1]:6.1f} s, {report.chunks} chunks){split}; peak RSS this process {peak_rss_mb():.0f} MB, "
              f"largest worker {worker_mb:.0f} MB; page objects alone on one core: PLAYA {playa:6.1f} pages/s, "
              f"pdfminer {pdfminer:6.1f} pages/s ({playa / pdfminer:.2f}x)")


def long_office(sections: int, rows: int) -> None:
    """A long Word document (`sections` headed sections of prose, a 20 x 6 table in every other one) and a
    workbook (`rows` rows x 10 columns), made with python-docx and openpyxl from a seeded generator: seconds
    to extract each on one core, in-process."""
    import random

    import docx
    import openpyxl

    from ragd.ingest.extract import EXTRACTORS, ExtractOptions, Source

    rnd = random.Random(7)
    vocabulary = [f"term{i}" for i in range(5000)]

    def words(n: int) -> str:
        return " ".join(rnd.choice(vocabulary) for _ in range(n))

    with tempfile.TemporaryDirectory(prefix="ragd-bench-office-") as tmp:
        doc = docx.Document()
        for i in range(sections):
            doc.add_heading(f"Section {i} {words(4)}", level=1 + i % 3)
            for _ in range(5):
                doc.add_paragraph(words(90))
            if i % 2 == 0:
                table = doc.add_table(rows=20, cols=6)
                for r, row in enumerate(table.rows):
                    for c, cell in enumerate(row.cells):
                        cell.text = f"{rnd.randint(0, 99999):,}" if r and c else words(2)
        book = openpyxl.Workbook()
        sheet = book.active
        sheet.append([f"column {i}" for i in range(10)])
        for _ in range(rows):
            sheet.append([words(2)] + [rnd.randint(0, 10**6) for _ in range(9)])
        for kind, name, save in (("docx", "long.docx", doc.save), ("xlsx", "long.xlsx", book.save)):
            path = Path(tmp) / name
            save(path)
            source = Source(path=path, data=path.read_bytes(), external_id=name, source_uri=path.as_uri())
            t0 = time.perf_counter()
            docs = list(EXTRACTORS[kind].extract(source, ExtractOptions()))
            took = time.perf_counter() - t0
            assert not isinstance(docs[0], Exception), docs[0]
            what = f"{sections} sections, {sections // 2} tables" if kind == "docx" else f"{rows} rows x 10 columns"
            print(f"long {kind.upper()} ({what}, {path.stat().st_size / 1e6:.1f} MB): extracted in {took:6.2f} s "
                  f"({len(docs[0].blocks)} blocks)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs-hash", type=int, default=5183)
    parser.add_argument("--docs-onnx", type=int, default=1000)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--real-docs", action="store_true",
                        help="also the real documents of shared/data/docs (PDF, Office, scans), worker vs in-process")
    parser.add_argument("--workers", default="1,2", help="extraction worker counts to compare on the real documents")
    parser.add_argument("--long-pages", type=int, default=300, help="pages of the long dense PDF (0: skip)")
    parser.add_argument("--office-sections", type=int, default=300, help="sections of the long DOCX")
    parser.add_argument("--office-rows", type=int, default=30000, help="rows of the long workbook")
    parser.add_argument("--only", choices=["files", "real", "long", "office", "hash", "onnx"], action="append",
                        help="run only these parts (repeatable)")
    args = parser.parse_args()
    only = set(args.only or ["files", "real", "long", "office", "hash", "onnx"])
    if args.long_pages and "long" in only:
        long(args.long_pages)
    if "office" in only:
        long_office(args.office_sections, args.office_rows)
    if "files" in only:
        files(args.files)
    if args.real_docs or "real" in (args.only or []):
        docs = DATA / "docs"
        real = [docs / "docling" / "pdf" / "sources", docs / "synthetic", docs / "pdfplumber"]
        isolation_cost("real documents", real, rounds=2)
        parallel("real documents", [*real, docs / "tables" / "icdar2013"],
                 [int(n) for n in args.workers.split(",")], rounds=2)
    if "hash" in only:
        run("hash", args.docs_hash)
    if "onnx" in only:
        run("bge-small-en", args.docs_onnx)


if __name__ == "__main__":
    main()
