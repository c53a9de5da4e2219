"""Ingest throughput: documents/s and chunks/s for the hashing and the ONNX embedders, with peak memory.

    python bench/ingest_throughput.py [--docs-hash 5183] [--docs-onnx 1000]

Corpus: BEIR SciFact (../shared/data/beir/scifact/corpus.jsonl), ingested through the Python API into a fresh
embedded server. A second, unchanged ingest measures the no-op path (dedupe by content hash).
"""

from __future__ import annotations

import argparse
import time

from _common import peak_rss_mb, private_ragd, scifact_docs


def run(embedder: str, n: int) -> None:
    docs = scifact_docs(n)
    with private_ragd(embedder) as client:
        col = client.collection("bench")
        t0 = time.perf_counter()
        report = col.ingest(documents=docs)
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = col.ingest(documents=docs)
        second = time.perf_counter() - t0
    assert not report.failed, report.failed[:3]
    print(f"{embedder:<14} docs {len(docs):>5}  chunks {report.chunks:>5}  "
          f"{len(docs) / first:8.1f} docs/s  {report.chunks / first:8.1f} chunks/s  ({first:6.1f} s)  "
          f"re-ingest unchanged {len(docs) / second:8.1f} docs/s ({again.count('unchanged')} unchanged)  "
          f"peak RSS {peak_rss_mb():.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs-hash", type=int, default=5183)
    parser.add_argument("--docs-onnx", type=int, default=1000)
    args = parser.parse_args()
    run("hash", args.docs_hash)
    run("bge-small-en", args.docs_onnx)


if __name__ == "__main__":
    main()
