"""Queued ingestion through 1, 2 and 4 worker processes, against `ragd ingest` in one process.

    python bench/workers.py [--workers 1,2,4] [--long-pdfs 4] [--long-pages 60] [--embedder bge-small-en]

Corpus: the real documents of ../shared/data/docs (the docling PDF sources, the synthetic documents, pdfplumber's
PDFs, the ICDAR 2013 table PDFs) and `--long-pdfs` generated long PDFs of real text-layer pages. Each run writes a
fresh collection of its own tenant (so no embedding is served from another run's cache) in one private embedded
server. `ragd ingest` runs with one extraction process; each `ragd worker` runs one job at a time with one
extraction process, its model threads the cores shared among the workers. Workers are started and registered
before the clock starts, so their start-up is not counted; the clock stops when the run closes.

Printed: files/s, PDF pages/s, chunks/s, the queued run's time against the in-process run's (the target: within
10% with one worker), the queue's own overhead per job (that difference over the files, and the time to queue:
reading the files and writing their bytes and jobs), and peak memory of the workers.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from _common import DATA, private_ragd
from _results import Results
from ingest_throughput import long_pdf

import ragd
from ragd import jobs

REAL = ["docling/pdf/sources", "synthetic", "pdfplumber", "tables/icdar2013"]


def corpus(folder: Path, long_pdfs: int, long_pages: int) -> tuple[list[Path], int]:
    """(the paths to ingest, their PDF pages)."""
    import pypdfium2 as pdfium

    paths = [DATA / "docs" / name for name in REAL if (DATA / "docs" / name).exists()]
    for n in range(long_pdfs):
        long_pdf(long_pages + n, folder / f"long-{n}.pdf")  # each a little longer: different content hashes
    paths.append(folder)
    pages = 0
    for top in paths:
        for path in sorted(top.rglob("*.pdf")):
            with contextlib.suppress(pdfium.PdfiumError):
                pages += len(pdfium.PdfDocument(path))
    return paths, pages


def _workers_registered(client: ragd.Ragd) -> int:
    with client.store.admin() as conn:
        return int(conn.execute("SELECT count(*) FROM procrastinate_workers").fetchone()[0])  # type: ignore[index]


def queued(client: ragd.Ragd, paths: list[Path], n: int, home: Path, embedder: str) -> dict[str, float]:
    cores = len(os.sched_getaffinity(0))
    env = {**os.environ, "RAGD_HOME": str(home), "RAGD_EMBEDDER": embedder, "RAGD_INGEST_WORKERS": "1",
           "RAGD_ONNX_THREADS": str(max(1, cores // n)), "RAGD_WORKER_HEARTBEAT_S": "2"}
    before = _workers_registered(client)
    procs = [subprocess.Popen([sys.executable, "-m", "ragd.cli", "worker"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for _ in range(n)]
    peak = 0.0
    try:
        while _workers_registered(client) < before + n:
            time.sleep(0.2)
        col = client.collection("bench", tenant=f"workers-{n}")
        t0 = time.perf_counter()
        run_id = jobs.enqueue(col, paths).run_id
        enqueued = time.perf_counter() - t0
        while True:
            run = client.run(str(run_id), tenant=col.tenant)
            for p in procs:
                with contextlib.suppress(psutil.NoSuchProcess):
                    peak = max(peak, sum(c.memory_info().rss for c in [psutil.Process(p.pid),
                                                                         *psutil.Process(p.pid).children(True)]))
            if run["status"] not in ("queued", "running"):
                break
            time.sleep(0.25)
        seconds = time.perf_counter() - t0
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(timeout=120)
    counts = run["stats"]["counts"]
    return {"seconds": seconds, "enqueue": enqueued, "files": run["progress"]["files"]["total"],
            "items": run["stats"]["items"], "chunks": run["stats"]["chunks"], "failed": counts.get("failed", 0),
            "peak_mb": peak / 2**20, "status": run["status"] == "succeeded", **_spent(run["items"])}


def _spent(items: list[dict[str, object]]) -> dict[str, object]:
    """Where the items' time went: extraction (reading, OCR, layout, chunking) and storing (embedding, writing),
    summed over the items, and the slowest item."""
    timed = [(float(i["extract_seconds"] or 0.0), float(i["store_seconds"] or 0.0), str(i["external_id"] or ""))
             for i in items if i["extract_seconds"] is not None]  # type: ignore[arg-type]
    slowest = max(timed, key=lambda t: t[0] + t[1], default=(0.0, 0.0, ""))
    return {"extract_s": sum(t[0] for t in timed), "store_s": sum(t[1] for t in timed),
            "slowest": f"{Path(slowest[2]).name} {slowest[0]:.1f}+{slowest[1]:.1f} s"}


def in_process(client: ragd.Ragd, paths: list[Path]) -> dict[str, float]:
    col = client.collection("bench", tenant="workers-inprocess")
    t0 = time.perf_counter()
    report = col.ingest(paths, workers=1)
    seconds = time.perf_counter() - t0
    files = len({i.source_uri.split("#")[0] for i in report.items})
    items = client.run(str(report.run_id), tenant=col.tenant)["items"]
    return {"seconds": seconds, "enqueue": 0.0, "files": files, "items": len(report.items),
            "chunks": report.chunks, "failed": len(report.failed), "peak_mb": 0.0, "status": True, **_spent(items)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--long-pdfs", type=int, default=4)
    parser.add_argument("--long-pages", type=int, default=60)
    parser.add_argument("--embedder", default="bge-small-en")
    args = parser.parse_args()
    counts = [int(n) for n in args.workers.split(",")]
    with tempfile.TemporaryDirectory(prefix="ragd-workers-") as tmp, private_ragd(args.embedder) as client:
        paths, pages = corpus(Path(tmp), args.long_pdfs, args.long_pages)
        home = client.settings.home
        rows = [("ragd ingest, 1 process", in_process(client, paths))]
        rows += [(f"queue, {n} worker{'s' if n > 1 else ''}", queued(client, paths, n, home, args.embedder))
                 for n in counts]
    base = rows[0][1]["seconds"]
    print(f"corpus: {rows[0][1]['files']:.0f} files, {pages} PDF pages, embedder {args.embedder}, "
          f"{len(os.sched_getaffinity(0))} cores")
    print(f"{'run':<24} {'seconds':>8} {'files/s':>8} {'pages/s':>8} {'chunks/s':>9} {'vs 1 proc':>9} "
          f"{'items':>6} {'failed':>6} {'queue s':>8} {'peak MB':>8}")
    for label, r in rows:
        print(f"{label:<24} {r['seconds']:8.1f} {r['files'] / r['seconds']:8.2f} {pages / r['seconds']:8.2f} "
              f"{r['chunks'] / r['seconds']:9.1f} {r['seconds'] / base:8.2f}x {r['items']:6.0f} {r['failed']:6.0f} "
              f"{r['enqueue']:8.2f} {r['peak_mb']:8.0f}" + ("" if r["status"] else "  (run did not succeed)"))
    print(f"{'run':<24} {'extract s':>10} {'store s':>9}  slowest item (extract+store)")
    for label, r in rows:
        print(f"{label:<24} {r['extract_s']:10.1f} {r['store_s']:9.1f}  {r['slowest']}")
    results = Results("workers", config={"workers": args.workers, "long_pdfs": args.long_pdfs,
                                         "long_pages": args.long_pages, "embedder": args.embedder, "pages": pages})
    for label, r in rows:
        results.row("runs", run=label, seconds=r["seconds"], files_per_s=r["files"] / r["seconds"],
                    pages_per_s=pages / r["seconds"], chunks_per_s=r["chunks"] / r["seconds"],
                    vs_one_process=r["seconds"] / base, items=r["items"], failed=r["failed"], peak_mb=r["peak_mb"],
                    succeeded=bool(r["status"]))
    results.save()
    one = next((r for label, r in rows if label == "queue, 1 worker"), None)
    if one is not None:
        print(f"queue overhead per job (1 worker against 1 process): "
              f"{(one['seconds'] - base) / one['files'] * 1000:.0f} ms, of which queueing "
              f"{one['enqueue'] / one['files'] * 1000:.0f} ms")


if __name__ == "__main__":
    main()
