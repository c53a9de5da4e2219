"""HNSW recall@10 against exact search, and both latencies, on SciFact with the default model.

    python bench/hnsw_recall.py [--home DIR] [--ef 40,100,200]

Reuses (or builds) the `eval-scifact-bge-small-en` collection that `ragd eval` creates, in --home (default:
RAGD_HOME). Recall@10 = |HNSW top-10 ∩ exact top-10| / 10, averaged over the 300 test queries.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from _common import SCIFACT, pct, scifact_queries, summary
from _results import Results

import ragd
from ragd.config import Settings


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--home", type=Path)
    parser.add_argument("--ef", default="40,100,200")
    args = parser.parse_args()
    base = Settings(home=args.home) if args.home else Settings()
    queries = scifact_queries()
    results = Results("hnsw_recall", config={"ef": args.ef, "queries": len(queries)})
    for ef in [int(x) for x in args.ef.split(",")]:
        settings = base.model_copy(update={"hnsw_ef_search": ef, "cache_ttl_s": 0, "embedder": "bge-small-en"})
        client = ragd.connect(settings=settings)
        try:
            col = client.collection("eval-scifact-bge-small-en")
            if not col.documents(limit=1):
                col.ingest([SCIFACT / "corpus.jsonl"])
            vectors = {q: col.embedder.embed_query(q) for q in queries}  # time the SQL, not the model
            approx_ms, exact_ms, overlap = [], [], 0.0
            for q in queries:
                plan = col.plan(10, None, fusion="vector")
                t = time.perf_counter()
                approx = _vector(col, plan, vectors[q], exact=False)
                approx_ms.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                exact = _vector(col, plan, vectors[q], exact=True)
                exact_ms.append((time.perf_counter() - t) * 1000)
                overlap += len(set(approx) & set(exact)) / max(len(exact), 1)
            print(f"ef_search {ef:>4}: recall@10 {overlap / len(queries):.4f}   "
                  f"hnsw {summary(approx_ms)}   exact {summary(exact_ms)}")
            results.row("recall", ef_search=ef, recall_at_10=overlap / len(queries), hnsw_p50_ms=pct(approx_ms, 50),
                        hnsw_p95_ms=pct(approx_ms, 95), exact_p50_ms=pct(exact_ms, 50), exact_p95_ms=pct(exact_ms, 95))
        finally:
            client.close()
    results.save()


def _vector(col: ragd.Collection, plan: ragd.Plan, qvec: object, *, exact: bool) -> list[str]:
    from ragd.retrieve.legs import vector_leg

    with col.store.tenant(col.tenant) as conn:
        hits = vector_leg(conn, collection_id=col.collection_id, embed_model=col.embed_model, dims=col.dims,
                          qvec=qvec, limit=10, filters=plan.filters, ef_search=col.settings.hnsw_ef_search,
                          exact_threshold=0, force_exact=exact, vector_type=col.vector_type)  # type: ignore[arg-type]
    return [str(h.chunk_id) for h in hits]


if __name__ == "__main__":
    main()
