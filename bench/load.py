"""Load on the REST server: concurrent closed-loop clients on loopback for a bounded time against /v1/search and
/v1/query, for each worker count. Every worker is warmed (models loaded) before anything is timed. Prints throughput,
p50/p95/p99 latency and errors per client count, and each search p95 against the one-client p95 of the same server (a
ratio, so machine noise hits both).

    python bench/load.py                                  # workers 1,2; search with 1,2,4,8 clients; 60 s per row
    python bench/load.py --routes search --seconds 20 --set RAGD_ONNX_THREADS=1   # compare a server setting
    python bench/load.py --workers 1,2,4 --clients 1,4,16 --embedder hash

The clients run on the same machine as the server and take CPU from it: on 2 cores, figures are a floor. A closed
loop with more clients than cores queues by construction; capacity is the client count where throughput stops growing.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
from _common import pct, scifact_docs, scifact_queries, serve
from _results import Results

REPO = Path(__file__).resolve().parents[1]


def _cli(args: list[str], env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-m", "ragd.cli", *args], env=env, capture_output=True, text=True,
                          check=True, cwd=REPO)
    return done.stdout


def _request(client: httpx.Client, route: str, query: str) -> tuple[float, bool]:
    body = ({"query": query, "namespace": "bench", "limit": 10, "useReranking": False, "threshold": 0.0}
            if route == "search" else {"question": query, "collection": "bench", "top_k": 10})
    started = time.perf_counter()
    try:
        ok = client.post(f"/v1/{route}", json=body).status_code == 200
    except httpx.HTTPError:
        ok = False
    return (time.perf_counter() - started) * 1000, ok


def _load(url: str, key: str, queries: list[str], clients: int, seconds: float, route: str) -> dict[str, float]:
    """`clients` closed-loop clients (each sends its next request when the last one is answered) for `seconds`."""
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def worker(n: int) -> None:
        nonlocal errors
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as client:
            i = n
            while time.monotonic() < stop:
                ms, ok = _request(client, route, queries[i % len(queries)])
                i += clients
                with lock:
                    latencies.append(ms)
                    errors += 0 if ok else 1

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(clients)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    return {"requests": len(latencies), "rps": len(latencies) / elapsed, "p50": pct(latencies, 50),
            "p95": pct(latencies, 95), "p99": pct(latencies, 99), "errors": errors}


def _warm(url: str, key: str, queries: list[str], workers: int) -> None:
    """Enough concurrent requests that every worker process has loaded its models before anything is timed."""
    for route in ("search", "query"):
        _load(url, key, queries, 2 * workers, 3.0, route)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", default="1,2", help="Comma-separated worker counts (default 1,2).")
    parser.add_argument("--clients", default="1,2,4,8",
                        help="Comma-separated concurrent client counts for search (default 1,2,4,8); query runs "
                             "with the largest.")
    parser.add_argument("--seconds", type=float, default=60.0, help="Per measurement (default 60).")
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--embedder", default="bge-small-en")
    parser.add_argument("--routes", default="search,query")
    parser.add_argument("--set", action="append", default=[], metavar="RAGD_X=V",
                        help="An extra RAGD_ setting for the servers (repeatable), to compare configurations.")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    queries = scifact_queries()[:300]
    clients = sorted({int(c) for c in args.clients.split(",")})
    routes = args.routes.split(",")
    with tempfile.TemporaryDirectory(prefix="ragd-load-") as home:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAGD_")} | {
            "RAGD_HOME": home, "RAGD_EMBEDDER": args.embedder, "RAGD_RATE_LIMIT_PER_MINUTE": "0",
            "RAGD_CACHE_TTL_S": "0"} | dict(item.split("=", 1) for item in args.set)
        corpus = Path(home) / "corpus.jsonl"
        corpus.write_text("".join(json.dumps(d) + "\n" for d in scifact_docs(args.docs)), encoding="utf-8")
        _cli(["ingest", str(corpus), "-c", "bench"], env)
        key = _cli(["keys", "create", "--tenant", "default", "--name", "load"], env).strip().splitlines()[-1]
        rows = []
        try:
            for workers in [int(w) for w in args.workers.split(",")]:
                proc, url = serve(env, "--workers", str(workers))
                try:
                    _warm(url, key, queries, workers)
                    quiet = None
                    for route in routes:
                        for n in (clients if route == "search" else clients[-1:]):
                            loaded = _load(url, key, queries, n, args.seconds, route)
                            if route == "search" and n == 1:
                                quiet = loaded["p95"]
                            rows.append({"workers": workers, "route": route, "clients": n, **loaded,
                                         "p95_vs_unloaded": loaded["p95"] / quiet
                                         if route == "search" and quiet else None})
                finally:
                    proc.send_signal(signal.SIGINT)
                    proc.wait(timeout=60)
        finally:
            subprocess.run([sys.executable, "-m", "ragd.cli", "db", "stop"], env=env, capture_output=True, cwd=REPO)
    results = Results("load", config={"seconds": args.seconds, "docs": args.docs, "embedder": args.embedder,
                                      "set": args.set})
    for r in rows:
        results.row("load", **r)
    results.save()
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"load: {args.seconds:.0f} s per row, {args.docs} SciFact docs, {args.embedder}, {os.cpu_count()} cores"
          + (f", {' '.join(args.set)}" if args.set else ""))
    print(f"{'workers':>7} {'route':>7} {'clients':>7} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} "
          f"{'errors':>7} {'p95/1 client':>13}")
    for r in rows:
        ratio = f"{r['p95_vs_unloaded']:.2f}" if r["p95_vs_unloaded"] else "-"
        print(f"{r['workers']:>7} {r['route']:>7} {r['clients']:>7} {r['rps']:>8.1f} {r['p50']:>8.1f} "
              f"{r['p95']:>8.1f} {r['p99']:>8.1f} {r['errors']:>7} {ratio:>13}")


if __name__ == "__main__":
    main()
