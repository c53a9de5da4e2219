"""Run several retrieval plans over an evaluation set and measure quality and per-stage latency."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..embed import make_embedder
from ..engine import Collection
from ..errors import InvalidRequest, RagdError
from ..retrieve.search import retrieve
from ..types import ITEM_STATUSES, Plan
from . import metrics
from .datasets import EvalSet

PLANS: dict[str, dict[str, Any]] = {
    "lexical": {"fusion": "lexical"},
    "vector": {"fusion": "vector"},
    "vector-exact": {"fusion": "vector", "exact": True},
    "rrf": {"fusion": "rrf"},
    "weighted": {"fusion": "weighted"},
}


WARM_UP = 5  # untimed queries per plan before measuring


def plan_overrides(name: str) -> dict[str, Any]:
    """`lexical`, `vector`, `rrf`, `weighted`, or `weighted:W` with W the keyword weight (0..1); any of them with
    `+rerank` reranks the fused head (RAGD_RERANKER)."""
    name, plus, extra = name.partition("+")
    if plus and extra != "rerank":
        raise InvalidRequest(f"plan {name}+{extra}: the only addition is +rerank")
    base, _, arg = name.partition(":")
    if base not in PLANS:
        raise InvalidRequest(f"unknown plan {name!r}: use {', '.join(PLANS)} or weighted:KEYWORD_WEIGHT")
    overrides = dict(PLANS[base])
    if arg:
        try:
            weight = float(arg)
        except ValueError as exc:
            raise InvalidRequest(f"plan {name!r}: the weight must be a number") from exc
        if base != "weighted" or not 0 <= weight <= 1:
            raise InvalidRequest(f"plan {name!r}: only weighted takes a keyword weight from 0 to 1")
        overrides.update(keyword_weight=weight, semantic_weight=1 - weight)
    if plus:
        overrides["rerank"] = True
    return overrides


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


@dataclass
class PlanResult:
    name: str
    metrics: dict[str, float]
    latency_ms: dict[str, float]
    stages_ms: dict[str, dict[str, float]]
    runs: dict[str, list[str]] = field(repr=False)
    per_query: dict[str, dict[str, float]] = field(repr=False)
    # queries whose reranking failed open (the fused order stood in) and queries that failed outright (no results,
    # counted as misses): a plan's figures are its name's only when both are 0
    rerank_skipped: int = 0
    failed_queries: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {**{k: round(v, 4) for k, v in self.metrics.items()},
                "latency_ms": {k: round(v, 2) for k, v in self.latency_ms.items()},
                "stages_ms": {s: {k: round(v, 2) for k, v in d.items()} for s, d in self.stages_ms.items()},
                "rerank_skipped": self.rerank_skipped, "failed_queries": len(self.failed_queries)}


def run_plan(col: Collection, dataset: EvalSet, name: str, depth: int = 100,
             on_query: Callable[[], None] | None = None) -> PlanResult:
    plan = col.plan(depth, None, **plan_overrides(name))
    for text in list(dataset.queries.values())[:WARM_UP]:  # warm caches so plan order does not skew latency
        retrieve(text, plan, col)
    runs: dict[str, list[str]] = {}
    totals: list[float] = []
    stages: dict[str, list[float]] = {}
    skipped, failed = 0, {}
    for qid, text in dataset.queries.items():
        timings: dict[str, float] = {}
        debug: dict[str, Any] = {}
        started = time.perf_counter()
        try:
            hits = retrieve(text, plan, col, timings=timings, debug=debug)
        except RagdError as exc:  # one query's failure is that query's miss, not the end of the measurement
            failed[qid] = str(exc)
            hits = []
        totals.append((time.perf_counter() - started) * 1000)
        skipped += bool(debug.get("reranker_skipped"))
        for stage, ms in timings.items():
            stages.setdefault(stage, []).append(ms)
        seen: list[str] = []
        for hit in hits:
            key = str(hit.chunk_id) if dataset.unit == "chunk" else (hit.external_id or str(hit.doc_id))
            if key not in seen:
                seen.append(key)
        runs[qid] = seen
        if on_query:
            on_query()
    return PlanResult(
        name=name,
        metrics=metrics.evaluate(runs, dataset.qrels),
        latency_ms={"p50": percentile(totals, 50), "p95": percentile(totals, 95)},
        stages_ms={s: {"p50": percentile(v, 50), "p95": percentile(v, 95)} for s, v in sorted(stages.items())},
        runs=runs,
        per_query=metrics.per_query(runs, dataset.qrels),
        rerank_skipped=skipped,
        failed_queries=failed,
    )


@dataclass
class EvalReport:
    dataset: str
    collection: str
    embed_model: str
    queries: int
    depth: int
    ingest: dict[str, Any]
    plans: dict[str, PlanResult]
    default_plan: str | None = None  # the plan among those run that `search` uses by default

    def as_dict(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "collection": self.collection, "embed_model": self.embed_model,
                "queries": self.queries, "depth": self.depth, "ingest": self.ingest,
                "default_plan": self.default_plan,
                "plans": {name: result.as_dict() for name, result in self.plans.items()}}


def evaluate(client: Any, dataset: EvalSet, plans: Sequence[str], *, collection: str | None = None,
             tenant: str | None = None, depth: int = 100,
             on_progress: Callable[..., None] | None = None) -> EvalReport:
    """Ingest the set's corpus (idempotently: unchanged documents are no-ops and embeddings come from the
    cache), then run every plan over every query."""
    for name in plans:
        plan_overrides(name)
    if dataset.has_corpus:
        embedder = client._explicit_embedder() or make_embedder(client.settings.embedder, client.settings)
        name = collection or f"eval-{dataset.name}-{embedder.name}"
        col = client.collection(name, tenant=tenant)
        # a benchmark corpus goes in as published: its duplicates and near-duplicates may be judged documents
        report = col.ingest([dataset.corpus] if dataset.corpus else [], documents=dataset.documents,
                            duplicates="keep", near_duplicates=1.0,
                            on_progress=(lambda d, t, note: on_progress("ingest", d, t, note)) if on_progress else None)
        ingest: dict[str, Any] = {"seconds": round(report.seconds, 2), "embedded": report.embedded,
                                  "cache_hits": report.cache_hits, **{s: report.count(s) for s in ITEM_STATUSES},
                                  "failed_items": [{"item": i.external_id or i.source_uri, "code": i.error_code,
                                                    "reason": i.reason} for i in report.failed]}
    else:
        if not collection:
            raise InvalidRequest("a questions file is evaluated against an existing collection: pass --collection")
        col = client.collection(collection, tenant=tenant, create=False)
        ingest = {}
    # judged documents that are not in the collection can never be found: say how many, not only lower scores
    present = set(external_ids(col).values())
    judged_docs = {doc for judged in dataset.qrels.values() for doc in judged}
    ingest["judged_documents"] = len(judged_docs)
    ingest["judged_missing"] = len(judged_docs - present)
    results: dict[str, PlanResult] = {}
    judged = sum(1 for q in dataset.queries if dataset.qrels.get(q))
    if judged == 0:
        raise InvalidRequest(f"{dataset.name}: no query has a relevance judgement")
    for name in plans:
        done = 0

        def tick(label: str = name) -> None:
            nonlocal done
            done += 1
            if on_progress:
                on_progress(label, done, len(dataset.queries))

        results[name] = run_plan(col, dataset, name, depth, on_query=tick)
    return EvalReport(dataset=dataset.name, collection=col.name, embed_model=col.embed_model,
                      queries=len(dataset.queries), depth=depth, ingest=ingest, plans=results,
                      default_plan=next((name for name in plans if is_default(name)), None))


def is_default(name: str) -> bool:
    """Whether the plan is what `search` does when not told otherwise."""
    return replace(Plan(), **plan_overrides(name)) == Plan()


def external_ids(col: Collection) -> dict[str, str]:
    """The collection's documents: doc id -> external id."""
    ids: dict[str, str] = {}
    offset = 0
    while batch := col.documents(limit=10_000, offset=offset):
        ids.update({str(d["doc_id"]): str(d["external_id"]) for d in batch})
        offset += len(batch)
    return ids
