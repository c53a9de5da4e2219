"""Choose the rerank blend by measurement: nDCG@10 and MRR@10 of the default fused plan, reranked with each
(head size, cross-encoder weight, tokens per pair), on a development half of the queries and a held-out half.

    python bench/rerank_tuning.py DATASET [--home DIR] [--max-queries N] [--tokens 256,128]

DATASET is what `ragd eval` reads (a BEIR folder, a SQuAD file). The corpus is ingested as `ragd eval` does
(into --home, reused). Each query's fused list is retrieved once and its first 50 passages scored once per token
budget, so every blend is compared on the same lists. Queries split by a hash of their id: odd to tune, even to
check. Prints one line per setting and the latency of scoring the head (ms per query, p50/p95).
"""

from __future__ import annotations

import argparse
import hashlib
import time
from pathlib import Path

from _common import pct, private_ragd

from ragd.eval import metrics
from ragd.eval.datasets import load
from ragd.rerank import CrossEncoder, blend, passage
from ragd.retrieve.search import retrieve

TOPS = (10, 20, 30, 50)
WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--home", type=Path)
    parser.add_argument("--max-queries", type=int)
    parser.add_argument("--tokens", default="256,128")
    args = parser.parse_args()
    dataset = load(args.dataset).head(args.max_queries)
    budgets = [int(t) for t in args.tokens.split(",")]
    with private_ragd("bge-small-en", keep=args.home) as client:
        col = client.collection(f"eval-{dataset.name}-bge-small-en")
        col.ingest([dataset.corpus] if dataset.corpus else [], documents=dataset.documents, near_duplicates=1.0)
        plan = col.plan(100, None, fusion="weighted")
        fused = {qid: retrieve(text, plan, col) for qid, text in dataset.queries.items()}
        scores: dict[int, dict[str, list[float]]] = {}
        for tokens in budgets:
            model = CrossEncoder(max_tokens=tokens)
            model.score("warm up", ["the model loads once"])
            scores[tokens], spent = {}, []
            for qid, hits in fused.items():
                started = time.perf_counter()
                scores[tokens][qid] = model.score(dataset.queries[qid], [passage(c) for c in hits[: max(TOPS)]])
                spent.append((time.perf_counter() - started) * 1000 / max(1, min(len(hits), max(TOPS))))
            print(f"tokens {tokens}: {pct(spent, 50):.1f} / {pct(spent, 95):.1f} ms per pair (p50 / p95)")
    halves = {"dev": [q for q in fused if _odd(q)], "held-out": [q for q in fused if not _odd(q)], "all": list(fused)}

    def measure(runs: dict[str, list[str]]) -> str:
        parts = []
        for label, qids in halves.items():
            m = metrics.evaluate({q: runs[q] for q in qids}, {q: dataset.qrels.get(q, {}) for q in qids})
            parts.append(f"{label} {m['ndcg@10']:.4f}/{m['mrr@10']:.4f}")
        return "  ".join(parts)

    print(f"{'setting':<32} nDCG@10/MRR@10 ({len(halves['dev'])} dev, {len(halves['held-out'])} held-out queries)")
    print(f"{'weighted (no rerank)':<32} {measure({q: _ids(h, dataset.unit) for q, h in fused.items()})}")
    for tokens in budgets:
        for top in TOPS:
            for weight in WEIGHTS:
                runs = {q: _ids(blend(h[:top], scores[tokens][q][:top], weight) + h[top:], dataset.unit)
                        for q, h in fused.items()}
                print(f"{f'tokens {tokens} top {top} weight {weight}':<32} {measure(runs)}")


def _odd(qid: str) -> bool:
    return hashlib.sha256(qid.encode()).digest()[0] % 2 == 1


def _ids(hits: list, unit: str) -> list[str]:  # type: ignore[type-arg]
    seen: list[str] = []
    for h in hits:
        key = str(h.chunk_id) if unit == "chunk" else (h.external_id or str(h.doc_id))
        if key not in seen:
            seen.append(key)
    return seen


if __name__ == "__main__":
    main()
