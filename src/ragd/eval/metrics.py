"""Ranking metrics, computed as trec_eval does (linear gains, binary relevance for all but nDCG).

`run` is an ordered list of document ids per query (best first, no duplicates); `qrels` maps each relevant
document id to its graded relevance (> 0)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import partial

Qrels = Mapping[str, int]


def _relevant(qrels: Qrels) -> set[str]:
    return {doc for doc, rel in qrels.items() if rel > 0}


def hit_at(run: Sequence[str], qrels: Qrels, k: int) -> float:
    rel = _relevant(qrels)
    return 1.0 if any(doc in rel for doc in run[:k]) else 0.0


def mrr_at(run: Sequence[str], qrels: Qrels, k: int) -> float:
    rel = _relevant(qrels)
    for rank, doc in enumerate(run[:k], start=1):
        if doc in rel:
            return 1.0 / rank
    return 0.0


def recall_at(run: Sequence[str], qrels: Qrels, k: int) -> float:
    rel = _relevant(qrels)
    if not rel:
        return 0.0
    return len(rel & set(run[:k])) / len(rel)


def precision_at(run: Sequence[str], qrels: Qrels, k: int) -> float:
    rel = _relevant(qrels)
    return sum(1 for doc in run[:k] if doc in rel) / k


def ndcg_at(run: Sequence[str], qrels: Qrels, k: int) -> float:
    dcg = sum(max(qrels.get(doc, 0), 0) / math.log2(rank + 1) for rank, doc in enumerate(run[:k], start=1))
    ideal = sorted((r for r in qrels.values() if r > 0), reverse=True)[:k]
    idcg = sum(r / math.log2(rank + 1) for rank, r in enumerate(ideal, start=1))
    return dcg / idcg if idcg > 0 else 0.0


Metric = Callable[[Sequence[str], Qrels], float]

METRICS: dict[str, Metric] = {
    "ndcg@10": partial(ndcg_at, k=10),
    "mrr@10": partial(mrr_at, k=10),
    "hit@1": partial(hit_at, k=1),
    "hit@10": partial(hit_at, k=10),
    "precision@10": partial(precision_at, k=10),
    "recall@10": partial(recall_at, k=10),
    "recall@50": partial(recall_at, k=50),
    "recall@100": partial(recall_at, k=100),
}


def evaluate(runs: Mapping[str, Sequence[str]], qrels: Mapping[str, Qrels]) -> dict[str, float]:
    """Mean of each metric over the queries that have relevance judgements (a query with none is skipped,
    as trec_eval does; a judged query with no results scores 0)."""
    judged = sorted(q for q, rels in qrels.items() if _relevant(rels))
    if not judged:
        return {name: 0.0 for name in METRICS}
    return {name: sum(fn(runs.get(q, []), qrels[q]) for q in judged) / len(judged) for name, fn in METRICS.items()}


def per_query(runs: Mapping[str, Sequence[str]], qrels: Mapping[str, Qrels]) -> dict[str, dict[str, float]]:
    return {q: {name: fn(runs.get(q, []), qrels[q]) for name, fn in METRICS.items()}
            for q in sorted(qrels) if _relevant(qrels[q])}
