"""The remote client's cost over the same calls in process, and the cost of a /metrics scrape.

    python bench/remote.py [--docs 2000] [--queries 200] [--scrapes 200]

A private embedded database holds SciFact's first `--docs` abstracts (hashing embedder, no reranker, result cache
off) in one tenant's collection. The same queries are sent, one at a time, to `Collection.search` / `ask` in
process and to `ragd.connect("http://...", api_key=...)` against a `ragd serve` process on the same database:
the difference is what REST, JSON and the key check add (p50/p95). Then /metrics is scraped `--scrapes` times
(after the queries, so its series are populated): latency and size per scrape. Every query runs once untimed
first on each side (steady state).
"""

from __future__ import annotations

import argparse
import os
import time

import httpx
from _common import pct, private_ragd, scifact_docs, scifact_queries, serve
from _results import Results

from ragd import keys
from ragd.remote import RemoteRagd


def timed(calls: list[object], run: object) -> list[float]:
    assert callable(run)
    for q in calls:
        run(q)
    times = []
    for q in calls:
        started = time.perf_counter()
        run(q)
        times.append((time.perf_counter() - started) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--scrapes", type=int, default=200)
    args = parser.parse_args()
    queries = scifact_queries()[: args.queries]
    results = Results("remote", config={"docs": args.docs, "queries": len(queries), "embedder": "hash",
                                        "reranker": "none", "scrapes": args.scrapes})
    with private_ragd("hash", reranker="none") as client:
        col = client.collection("bench", tenant="bench")
        col.ingest(documents=scifact_docs(args.docs))
        _, key = keys.create(client.store, "bench")
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAGD_")} | {
            "RAGD_HOME": str(client.settings.home), "RAGD_EMBEDDER": "hash", "RAGD_RERANKER": "none",
            "RAGD_CACHE_TTL_S": "0", "RAGD_RATE_LIMIT_PER_MINUTE": "0", "RAGD_REQUEST_LOG": "off"}
        server, url = serve(env)
        try:
            with RemoteRagd(url, key) as remote:
                far = remote.collection("bench")
                print(f"{args.docs} documents, {len(queries)} queries, one at a time\n")
                print(f"{'call':8} {'in process p50/p95':>22} {'remote p50/p95':>22} {'overhead p50/p95':>22}")
                for call in ("search", "ask"):
                    near = timed(queries, lambda q, c=call: getattr(col, c)(q, k=10))  # type: ignore[misc]
                    remote_ms = timed(queries, lambda q, c=call: getattr(far, c)(q, k=10))  # type: ignore[misc]
                    row = {"call": call, "in_process_p50_ms": pct(near, 50), "in_process_p95_ms": pct(near, 95),
                           "remote_p50_ms": pct(remote_ms, 50), "remote_p95_ms": pct(remote_ms, 95)}
                    row["overhead_p50_ms"] = row["remote_p50_ms"] - row["in_process_p50_ms"]
                    row["overhead_p95_ms"] = row["remote_p95_ms"] - row["in_process_p95_ms"]
                    results.row("overhead", **row)
                    print(f"{call:8} {row['in_process_p50_ms']:10.2f} / {row['in_process_p95_ms']:7.2f} ms "
                          f"{row['remote_p50_ms']:10.2f} / {row['remote_p95_ms']:7.2f} ms "
                          f"{row['overhead_p50_ms']:10.2f} / {row['overhead_p95_ms']:7.2f} ms")
            with httpx.Client(base_url=url, timeout=30) as http:
                sizes, scrape_ms = [], []
                for n in range(args.scrapes + 10):
                    started = time.perf_counter()
                    body = http.get("/metrics").content
                    if n >= 10:
                        scrape_ms.append((time.perf_counter() - started) * 1000)
                        sizes.append(len(body))
            results.row("metrics", scrape_p50_ms=pct(scrape_ms, 50), scrape_p95_ms=pct(scrape_ms, 95),
                        bytes_per_scrape=max(sizes))
            print(f"\n/metrics: p50 {pct(scrape_ms, 50):.2f} ms, p95 {pct(scrape_ms, 95):.2f} ms, "
                  f"{max(sizes)} bytes per scrape")
        finally:
            server.terminate()
            server.wait(30)
    results.save()


if __name__ == "__main__":
    main()
