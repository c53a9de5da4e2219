"""Tenant B's latency while tenant A, with SQL on its own login, holds everything a tenant may hold (issue 56).

    python bench/hostile_tenant.py [--rounds 30] [--uploads 8]

A real `ragd serve` on a private embedded server (hashing embedder, no reranker). B repeats a round of four
requests (search, /readyz, an upload into a collection new each time, a document listing), first while A is quiet,
then while A's logins hold advisory locks on every key ragd ever used, an idle REPEATABLE READ snapshot (which every
CREATE INDEX CONCURRENTLY waits behind), every table and row lock its role may take and every connection its role
may open, and A sends `--uploads` uploads of its own at once, again every `--pause` seconds (0: a flood, which costs
the server CPU: that is load, which rate limits answer, not a stall). Prints p50/p95 per request in both phases, their
ratio, B's 5xx count (must be 0) and what A's own requests got.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psycopg
from _common import pct, serve
from _results import Results

import ragd
from ragd import keys
from ragd.config import Settings
from ragd.store import embedded

REPO = Path(__file__).resolve().parents[1]
# every table of ragd's a tenant role might try to lock (those it may not are refused, which is the point)
TABLES = ("tenants", "collections", "documents", "document_versions", "chunks", "chunk_embeddings",
          "lexical_blocks", "lexical_terms", "lexical_stats", "document_filter_values", "document_minhash",
          "embedding_cache", "ingestion_runs", "ingestion_items", "ingestion_files", "query_executions",
          "idempotency_keys", "evaluations", "tenant_roles", "api_keys", "ragd_locks", "schema_migrations",
          "ragd_secret", "procrastinate_jobs")


def hold_everything(url: str, tenants: list[str]) -> list[psycopg.Connection[Any]]:
    """Logins as one tenant's role (`url`) holding what a tenant may hold: advisory keys (every key ragd ever used,
    for each of `tenants`), an idle REPEATABLE READ transaction, every table lock and row lock its role may take,
    then every connection its role may open. The caller closes them."""
    held: list[psycopg.Connection[Any]] = []
    try:
        advisory = psycopg.connect(url, autocommit=True)
        held.append(advisory)
        for tenant in tenants:
            advisory.execute("SELECT pg_advisory_lock(hashtextextended('ragd-queue:' || %s, 0))", (tenant,))
        for key in ("ragd.tenant_roles", "ragd.migrate"):
            advisory.execute("SELECT pg_advisory_lock(hashtext(%s))", (key,))
        snapshot = psycopg.connect(url)
        held.append(snapshot)
        snapshot.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        snapshot.execute("SELECT count(*) FROM chunks")
        locks = psycopg.connect(url)
        held.append(locks)
        locks.execute("SELECT 1")  # its transaction open: what follows are savepoints of it, held to the end
        for table in TABLES:
            for statement in (f"LOCK TABLE {table} IN ROW EXCLUSIVE MODE", f"SELECT 1 FROM {table} FOR UPDATE"):
                with contextlib.suppress(psycopg.Error), locks.transaction():
                    locks.execute(statement)
        while len(held) < 1000:  # then every connection left to its role
            try:
                held.append(psycopg.connect(url, autocommit=True))
            except psycopg.OperationalError as exc:
                if "too many connections for role" not in str(exc):
                    raise
                break
        return held
    except BaseException:
        for conn in held:
            conn.close()
        raise


def rounds(http: httpx.Client, auth: dict[str, str], n: int, tag: str) -> tuple[dict[str, list[float]], Counter[int]]:
    """B's n rounds: each request's latency (ms) by kind, and the statuses seen."""
    calls: dict[str, Callable[[int], httpx.Response]] = {
        "search": lambda i: http.post("/v1/search", json={"query": "ledger of tin", "namespace": "mine"},
                                      headers=auth),
        "readyz": lambda i: http.get("/readyz"),
        "upload new collection": lambda i: http.post(
            "/v1/documents", params={"collection": f"new-{tag}-{i}"}, headers=auth,
            files=[("files", (f"b-{i}.md", f"# B {i}\n\nB's note {i} on tin.\n".encode(), "text/markdown"))]),
        "list documents": lambda i: http.get("/v1/documents", params={"collection": "mine"}, headers=auth),
    }
    timings: dict[str, list[float]] = {name: [] for name in calls}
    statuses: Counter[int] = Counter()
    for i in range(n):
        for name, call in calls.items():
            started = time.perf_counter()
            statuses[call(i).status_code] += 1
            timings[name].append((time.perf_counter() - started) * 1000)
    return timings, statuses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--uploads", type=int, default=8, help="A's uploads kept in flight while hostile")
    parser.add_argument("--pause", type=float, default=1.0,
                        help="seconds each of A's upload loops waits between uploads (0: a closed-loop flood)")
    parser.add_argument("--rate-limit", type=int, default=0,
                        help="RAGD_RATE_LIMIT_PER_MINUTE of the server (default 0: A's flood is not cut short)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ragd-hostile-") as home:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAGD_")} | {
            "RAGD_HOME": home, "RAGD_EMBEDDER": "hash", "RAGD_RERANKER": "none",
            "RAGD_RATE_LIMIT_PER_MINUTE": str(args.rate_limit)}
        settings = Settings(home=Path(home), embedder="hash", reranker="none")
        with ragd.connect(settings=settings) as client:
            _, key_a = keys.create(client.store, "tenant-a", "bench")
            _, key_b = keys.create(client.store, "tenant-b", "bench")
            client.collection("mine", tenant="tenant-a").ingest(documents=[{"id": "a", "text": "A's copper."}])
            client.collection("mine", tenant="tenant-b").ingest(documents=[{"id": "b", "text": "B's ledger of tin."}])
            login_a = client.store._login_url(client.store.tenant_role("tenant-a"))
        proc, url = serve(env)
        auth_a, auth_b = {"Authorization": f"Bearer {key_a}"}, {"Authorization": f"Bearer {key_b}"}
        try:
            with httpx.Client(base_url=url, timeout=120) as http:
                rounds(http, auth_b, 1, "warm")
                quiet, quiet_status = rounds(http, auth_b, args.rounds, "quiet")
                held = hold_everything(login_a, ["tenant-a", "tenant-b"])
                stop, a_status = threading.Event(), Counter[int]()

                def upload_a(n: int) -> None:
                    with httpx.Client(base_url=url, timeout=120) as own:
                        i = 0
                        while not stop.is_set():
                            files = [("files", (f"a-{n}-{i}.md", f"# A {n}\n\nA's upload {i}.\n".encode(),
                                                "text/markdown"))]
                            r = own.post("/v1/documents", params={"collection": f"a-{n}-{i}", "wait": str(i % 2 == 0)
                                                                  .lower()}, files=files, headers=auth_a)
                            a_status[r.status_code] += 1
                            i += 1
                            stop.wait(args.pause)

                threads = [threading.Thread(target=upload_a, args=(n,)) for n in range(args.uploads)]
                for t in threads:
                    t.start()
                try:
                    time.sleep(1.0)
                    hostile, hostile_status = rounds(http, auth_b, args.rounds, "hostile")
                finally:
                    stop.set()
                    for t in threads:
                        t.join()
                    for conn in held:
                        conn.close()
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)
            embedded.stop(Path(home) / "pgdata")
    print(f"hostile tenant: {args.rounds} rounds of B's requests, A quiet then A holding everything "
          f"({len(held)} logins) with {args.uploads} uploads every {args.pause:g} s; "
          f"rate limit {args.rate_limit or 'off'}; {os.cpu_count()} cores")
    print(f"{'request':>22} {'quiet p50':>10} {'p95':>8} {'hostile p50':>12} {'p95':>8} {'p95 ratio':>10}")
    for name in quiet:
        q50, q95, h50, h95 = pct(quiet[name], 50), pct(quiet[name], 95), pct(hostile[name], 50), pct(hostile[name], 95)
        print(f"{name:>22} {q50:>10.1f} {q95:>8.1f} {h50:>12.1f} {h95:>8.1f} {h95 / q95:>10.2f}")
    every = [ms for times in hostile.values() for ms in times]
    print(f"B's p95 over every request while A is hostile: {pct(every, 95):.1f} ms; B's statuses quiet "
          f"{dict(sorted(quiet_status.items()))}, hostile {dict(sorted(hostile_status.items()))}; "
          f"A's own: {dict(sorted(a_status.items()))}")
    results = Results("hostile_tenant", config={"rounds": args.rounds, "uploads": args.uploads, "pause": args.pause,
                                                "rate_limit": args.rate_limit, "logins_held": len(held)})
    for name in quiet:
        results.row("requests", request=name, quiet_p50_ms=pct(quiet[name], 50), quiet_p95_ms=pct(quiet[name], 95),
                    hostile_p50_ms=pct(hostile[name], 50), hostile_p95_ms=pct(hostile[name], 95),
                    p95_ratio=pct(hostile[name], 95) / pct(quiet[name], 95))
    results.row("every request", hostile_p95_ms=pct(every, 95), quiet_statuses=str(dict(sorted(quiet_status.items()))),
                hostile_statuses=str(dict(sorted(hostile_status.items()))))
    results.save()


if __name__ == "__main__":
    main()
