"""Search latency p50/p95 at 10k and 100k chunks, per leg and fused.

    python bench/search_latency.py [--sizes 10000,100000] [--queries 200]

Corpus: SciFact documents, copied with a seeded sentence shuffle per copy until the collection holds the
target number of chunks (the hashing embedder keeps the build fast; vectors are 384-dimensional as with the
default model). Queries: SciFact's. Each plan first runs every query once untimed (the steady state of a
running service, not the cold pages right after a build or VACUUM), then once timed; latency covers the whole
`Collection.search` call (query embedding, SQL, hydration, fusion). The result cache is off.
"""

from __future__ import annotations

import argparse
import gc
import random
import re
import time
from pathlib import Path

import psycopg
from _common import pct, peak_rss_mb, private_ragd, scifact_docs, scifact_queries, summary
from _results import Results

SPLIT = re.compile(r"(?<=[.!?])\s+")


def synthetic(n_chunks: int) -> list[dict[str, object]]:
    base = scifact_docs()
    rng = random.Random(42)
    docs: list[dict[str, object]] = []
    copy = 0
    while len(docs) < n_chunks:
        for d in base:
            sentences = SPLIT.split(str(d["text"]))
            if copy:
                rng.shuffle(sentences)
            docs.append({"id": f"{d['id']}-{copy}", "title": d["title"], "text": " ".join(sentences),
                         "tags": [f"copy{copy}"] + (["rare"] if len(docs) % 1000 == 0 else [])})
            if len(docs) >= n_chunks:
                break
        copy += 1
    return docs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--home", type=Path, help="keep the database here and reuse it on the next run")
    args = parser.parse_args()
    queries = scifact_queries()[: args.queries]
    results = Results("search_latency", config={"sizes": args.sizes, "queries": len(queries), "embedder": "hash"})
    with private_ragd("hash", args.home) as client:
        col = client.collection("latency")
        have = 0
        for size in [int(s) for s in args.sizes.split(",")]:
            docs = synthetic(size)
            t0 = time.perf_counter()
            ingested = col.ingest(documents=docs[have:]).count("ingested")
            have = len(docs)
            # the build's objects would make every garbage collection in the timed loop walk a million of them:
            # a client-side pause, not search latency
            del docs
            gc.collect()
            gc.freeze()
            with psycopg.connect(client.store.url, autocommit=True) as conn:
                conn.execute("VACUUM (ANALYZE)")  # the steady state autovacuum reaches: visibility map set
            with client.store.admin() as conn:
                chunks = conn.execute("SELECT count(*) FROM chunks WHERE collection_id = %s AND is_active",
                                      (col.collection_id,)).fetchone()[0]
            print(f"\n== {chunks} chunks (built +{ingested} docs in {time.perf_counter() - t0:.0f} s)")
            for label, plan in [("vector (HNSW)", {"fusion": "vector"}), ("lexical (BM25)", {"fusion": "lexical"}),
                                ("hybrid rrf", {"fusion": "rrf"}), ("hybrid weighted", {"fusion": "weighted"}),
                                ("rrf + rare filter", {"fusion": "rrf", "filters": {"tags_any": ["rare"]}})]:
                for q in queries:  # one untimed pass: a running service has these pages in memory
                    col.search(q, k=10, **plan)
                times = []
                for q in queries:
                    t = time.perf_counter()
                    col.search(q, k=10, **plan)
                    times.append((time.perf_counter() - t) * 1000)
                print(f"{label:<20} {summary(times)}  ({len(times)} queries)")
                results.row("latency", documents=size, chunks=chunks, plan=label, p50_ms=pct(times, 50),
                            p95_ms=pct(times, 95))
    print(f"peak RSS (client) {peak_rss_mb():.0f} MB")
    results.row("memory", peak_rss_mb_client=peak_rss_mb())
    results.save()


if __name__ == "__main__":
    main()
