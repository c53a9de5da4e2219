"""ragd beside the PostgreSQL retrievers of LlamaIndex, LangChain and Haystack, on BEIR SciFact.

    python bench/peers/run.py [--docs 5183] [--rounds 1] [--systems ragd,llamaindex,langchain,haystack,floor]

Every system gets the same precomputed bge-small-en vectors (ragd's own model; computed once and kept under
bench/results/peers/) and the same embedded PostgreSQL, each in a database of its own; the frameworks run in their
own environment (bench/.venv-peers, made from bench/peers/requirements.txt on first use, never in ragd's
dependencies). Each round runs every system once, in a rotated order, so machine noise hits all alike.

Reported per system: ingest time from an empty store to searchable (indexes built), search p50/p95 at k=10, and
nDCG@10 / Recall@100 of the keyword, vector and hybrid modes over the 300 judged queries (document level). ragd
ingests with every guarantee on (versions, runs, exact BM25 statistics, near-duplicate signatures, embedding cache),
its vectors coming through an embedder that looks them up; what each framework does is in bench/peers/_peer.py.
One more row, `floor`, is no framework: one table written by a binary COPY, then a GIN and an HNSW index (the
least a store searchable both ways does), so the frameworks' and ragd's ingest times can be read against it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from _common import SCIFACT, chunk_texts, embed_once, pct, peak_rss_mb, private_ragd, scifact_docs  # noqa: E402
from _results import Results  # noqa: E402

from ragd.embed.base import Vectors  # noqa: E402
from ragd.eval import metrics  # noqa: E402
from ragd.eval.datasets import load_beir  # noqa: E402
from ragd.eval.runner import plan_overrides  # noqa: E402
from ragd.retrieve.search import retrieve  # noqa: E402

VENV = HERE.parent / ".venv-peers"
CACHE = HERE.parent / "results" / "peers"
PEERS = ("llamaindex", "langchain", "haystack", "floor")  # floor: a plain COPY and two indexes, no framework
RAGD_MODES = {"keyword": "lexical", "vector": "vector", "hybrid": "weighted"}


class Given:
    """ragd's embedder contract over precomputed vectors: a text it was not given is an error, never a guess."""

    def __init__(self, vectors: dict[str, np.ndarray], queries: dict[str, np.ndarray]):
        self._vectors, self._queries = vectors, queries

    @property
    def name(self) -> str:
        return "bge-small-en-given"

    @property
    def dims(self) -> int:
        return 384

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return np.stack([self._vectors[t] for t in texts]).astype(np.float32)

    def embed_query(self, text: str) -> Vectors:
        return self._queries[text].astype(np.float32)


def peers_venv() -> Path:
    python = VENV / "bin" / "python"
    if not python.exists():
        print("making bench/.venv-peers (once) ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "-r", str(HERE / "requirements.txt")], check=True)
    return python


def database(admin_url: str, name: str) -> str:
    """A fresh database on the same server, with pgvector; its URL."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = urllib.parse.urlsplit(admin_url)._replace(path=f"/{name}").geturl()  # the frameworks want a URL
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return url


def run_ragd(client: Any, name: str, docs: list[dict[str, str]], queries: dict[str, str],
             depth: int, k: int) -> dict[str, Any]:
    col = client.collection(name)
    t0 = time.perf_counter()
    report = col.ingest(documents=docs, duplicates="keep", near_duplicates=1.0)
    seconds = time.perf_counter() - t0
    assert not report.failed, report.failed[:3]
    out: dict[str, Any] = {"system": "ragd", "ingest_s": seconds, "runs": {}, "latency_ms": {}}
    for mode, plan_name in RAGD_MODES.items():
        deep, top = col.plan(depth, None, **plan_overrides(plan_name)), col.plan(k, None, **plan_overrides(plan_name))
        for text in list(queries.values())[:10]:
            retrieve(text, top, col)
        runs = {}
        for qid, text in queries.items():
            seen: list[str] = []
            for hit in retrieve(text, deep, col):
                if hit.external_id not in seen:
                    seen.append(str(hit.external_id))
            runs[qid] = seen
        timings = []
        for text in queries.values():
            started = time.perf_counter()
            retrieve(text, top, col)
            timings.append((time.perf_counter() - started) * 1000)
        out["runs"][mode], out["latency_ms"][mode] = runs, timings
    return out


def run_peer(python: Path, system: str, url: str, data: Path, depth: int, k: int) -> dict[str, Any]:
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run([str(python), str(HERE / "_peer.py"), system, url, str(data), str(depth), str(k)],
                          capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{system} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=None, help="the first N SciFact documents (default: all 5,183)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--systems", default="ragd," + ",".join(PEERS))
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()
    systems = args.systems.split(",")

    dataset = load_beir(SCIFACT)
    docs = [{k: str(v) for k, v in d.items()} for d in scifact_docs(args.docs)]
    # the text a framework is given is the text ragd embeds for a one-chunk document: the title, a blank line, the body
    peer_texts = [f"{d['title']}\n\n{d['text']}" if d["title"] else d["text"] for d in docs]
    ragd_texts = chunk_texts(docs)
    vectors = embed_once(sorted(set(peer_texts) | set(ragd_texts)), "scifact-docs", CACHE)
    query_vectors = embed_once(list(dataset.queries.values()), "scifact-queries", CACHE, query=True)
    python = peers_venv() if any(s in PEERS for s in systems) else None

    results: dict[str, list[dict[str, Any]]] = {s: [] for s in systems}
    with tempfile.TemporaryDirectory(prefix="ragd-peers-") as tmp, \
            private_ragd("hash") as client:
        data = Path(tmp)
        (data / "docs.jsonl").write_text("".join(json.dumps({"id": d["id"], "text": t}) + "\n"
                                                 for d, t in zip(docs, peer_texts)), encoding="utf-8")
        np.save(data / "doc_vectors.npy", np.stack([vectors[t] for t in peer_texts]))
        (data / "queries.jsonl").write_text("".join(json.dumps({"id": q, "text": t}) + "\n"
                                                    for q, t in dataset.queries.items()), encoding="utf-8")
        np.save(data / "query_vectors.npy", np.stack([query_vectors[t] for t in dataset.queries.values()]))
        import ragd

        given = ragd.connect(settings=client.settings, embedder=Given(vectors, query_vectors))
        try:
            for r in range(args.rounds):
                order = systems[r % len(systems):] + systems[:r % len(systems)]
                for system in order:
                    print(f"round {r + 1}: {system} ...", flush=True)
                    if system == "ragd":
                        results[system].append(run_ragd(given, f"scifact-{r}", docs, dataset.queries,
                                                        args.depth, args.k))
                    else:
                        assert python is not None
                        url = database(client.store.url, f"peers_{system}")
                        results[system].append(run_peer(python, system, url, data, args.depth, args.k))
        finally:
            given.close()
    report(results, dataset.qrels, len(docs), args.k)
    print(f"peak RSS of this process {peak_rss_mb():.0f} MB")


def report(results: dict[str, list[dict[str, Any]]], qrels: dict[str, dict[str, int]], n_docs: int, k: int) -> None:
    saved = Results("peers", config={"documents": n_docs, "judged_queries": len(qrels), "k": k})
    print(f"\nBEIR SciFact, {n_docs} documents, {len(qrels)} judged queries, given bge-small-en vectors; "
          f"best ingest of {len(next(iter(results.values())))} round(s), latency at k={k} over every round")
    print(f"{'system':<11} {'ingest s':>9} {'docs/s':>8}  {'mode':<8} {'nDCG@10':>8} {'R@100':>7} "
          f"{'p50 ms':>8} {'p95 ms':>8}")
    for system, rounds in results.items():
        if not rounds:
            continue
        ingest = min(r["ingest_s"] for r in rounds)
        for i, mode in enumerate(("keyword", "vector", "hybrid")):
            runs = rounds[-1]["runs"][mode]
            ndcg = sum(metrics.ndcg_at(runs.get(q, []), rel, 10) for q, rel in qrels.items()) / len(qrels)
            recall = sum(metrics.recall_at(runs.get(q, []), rel, 100) for q, rel in qrels.items()) / len(qrels)
            times = [t for r in rounds for t in r["latency_ms"][mode]]
            head = f"{system:<11} {ingest:9.1f} {n_docs / ingest:8.1f}" if i == 0 else " " * 29
            print(f"{head}  {mode:<8} {ndcg:8.4f} {recall:7.4f} {pct(times, 50):8.2f} {pct(times, 95):8.2f}")
            saved.row("systems", system=system, ingest_s=ingest, docs_per_s=n_docs / ingest, mode=mode,
                      ndcg_at_10=ndcg, recall_at_100=recall, p50_ms=pct(times, 50), p95_ms=pct(times, 95))
    saved.save()


if __name__ == "__main__":
    main()
