"""A search as the library composes it: the question's scope (the documents it names), the query embedded, the
legs the plan asks for (side by side in one snapshot when a second connection is free), fused, reranked, cut to k.

It knows the collection it searches through `Searched`, what it needs of one (engine.Searched is one), and
imports nothing above retrieval."""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ..config import Settings
from ..embed import Embedder
from ..errors import CollectionNotFound, InvalidRequest
from ..rerank import CrossEncoder, Reranker, RerankOutcome, rerank_fail_open
from ..store import Store, queries
from ..telemetry import annotate, span
from ..types import Candidate, Filters, Plan
from .cache import ResultCache, cache_key
from .filters import parse_filters
from .fuse import METHODS, fuse
from .legs import (
    FILTERED_FIRST,
    count_matching,
    lexical_leg,
    plan_lexical,
    prepare_vector_scan,
    vector_leg,
    vector_sql,
)
from .postings import PostingsCache
from .scope import HeldCache, Scope, scope_of


class Reading(Protocol):
    """What a search needs of the library (engine.Ragd is one): read sessions, the caches, the reranker."""

    @property
    def postings(self) -> PostingsCache: ...

    @property
    def held(self) -> HeldCache: ...

    @property
    def reranker(self) -> Reranker | None: ...

    @property
    def cache(self) -> ResultCache: ...

    def reading(self, tenant: str) -> contextlib.AbstractContextManager[Any]: ...

    def reading_pair(self, tenant: str, *, pair: bool = True) -> contextlib.AbstractContextManager[Any]: ...


class Searched(Protocol):
    """What a search needs of the collection it searches (engine.Searched is one)."""

    @property
    def client(self) -> Reading: ...

    @property
    def tenant(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def collection_id(self) -> uuid.UUID: ...

    @property
    def embed_model(self) -> str: ...

    @property
    def dims(self) -> int: ...

    @property
    def vector_type(self) -> str: ...

    @property
    def embedder(self) -> Embedder: ...

    @property
    def store(self) -> Store: ...

    @property
    def settings(self) -> Settings: ...

    def check_dims(self, dims: int) -> None: ...


MAX_QUERY_CHARS = 8192
MAX_K = 1000


def make_plan(k: int = 12, filters: Mapping[str, Any] | Filters | None = None, **overrides: Any) -> Plan:
    """A search's plan from k, filters and overrides (any field of Plan), checked; each leg fetches at least k."""
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
        raise InvalidRequest(f"k must be an integer from 1 to {MAX_K}")
    unknown = sorted(set(overrides) - set(Plan.__dataclass_fields__))
    if unknown:
        raise InvalidRequest(f"unknown plan option(s): {', '.join(unknown)}")
    plan = Plan(k=k, filters=parse_filters(filters), **overrides)
    if plan.fusion not in (*METHODS, "vector", "lexical"):
        raise InvalidRequest(f"unknown fusion {plan.fusion!r}: use {', '.join([*METHODS, 'vector'])} or lexical")
    return dataclasses.replace(plan, k_vec=max(plan.k_vec, plan.k), k_lex=max(plan.k_lex, plan.k))


def search_cached(query: str, full: Plan, col: Searched, debug: dict[str, Any]) -> list[Candidate]:
    """retrieve(), served from the library's result cache while the collection is unchanged (its generation);
    `debug` receives the reranker's outcome or `cached: true`. A result the reranker failed on is not kept: it may
    answer next time."""
    cache = col.client.cache
    if not cache.enabled:
        return retrieve(query, full, col, debug=debug)
    key = cache_key(col.tenant, col.collection_id, query, full)
    with col.client.reading(col.tenant) as conn:
        row = conn.execute(queries.COLLECTION_GENERATION, {"collection_id": col.collection_id}).fetchone()
    if row is None:
        raise CollectionNotFound(f"collection {col.name!r} no longer exists")
    hit = cache.get(key, int(row[0]))
    if hit is not None:
        debug["cached"] = True
        return hit
    results = retrieve(query, full, col, debug=debug)
    if not debug.get("reranker_skipped"):
        cache.put(key, int(row[0]), results)
    return results


def retrieve(query: str, plan: Plan, store: Searched, *, timings: dict[str, float] | None = None,
             debug: dict[str, Any] | None = None, scope: Scope | None = None) -> list[Candidate]:
    """Embed the query, run the legs the plan asks for, fuse, rerank, cut to k.

    A hybrid plan runs its two legs side by side on two connections sharing one snapshot when the tenant's pool
    has a second free at once, else one after the other on one (`debug["legs"]`: concurrent or sequential); the
    results are the same either way. When `timings` is given, it receives each stage's milliseconds: embed (the
    query vector), vector and lexical (each leg's own SQL and results read: side by side, their sum exceeds the
    time they took together), release (ending the read transaction), fuse (hybrid plans only), rerank; `debug`
    receives the reranker's outcome (reranker_used, reranker_skipped, reranker_error, reranker_latency_ms)."""
    with span("rag.retriever.retrieve_documents", **{"rag.collection": store.name, "rag.k": plan.k,
                                                      "rag.fusion": plan.fusion, "rag.rerank": plan.rerank}) as s:
        results = _retrieve(query, plan, store, timings, debug, scope)
        annotate(s, **{"rag.results": len(results)})
        return results


def _retrieve(query: str, plan: Plan, store: Searched, timings: dict[str, float] | None,
              debug: dict[str, Any] | None, scope: Scope | None = None) -> list[Candidate]:
    clock = Stopwatch(timings)
    if not isinstance(query, str) or not query.strip():
        raise InvalidRequest("the query is empty")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidRequest(f"the query is {len(query)} characters, over the {MAX_QUERY_CHARS} limit")
    col = store
    scope = scope or scope_for(query, col)
    if scope.doc_ids and not (plan.filters.doc_ids or plan.filters.external_ids):
        plan = dataclasses.replace(plan, filters=dataclasses.replace(plan.filters, doc_ids=scope.doc_ids))
    query = scope.query or query
    if debug is not None and (scope.issuers or scope.unknown or scope.unheld):
        debug["scope"] = {**scope.as_dict(), "unknown": list(scope.unknown)}
    clock.lap("scope")
    legs: list[list[Candidate]] = []
    qvec = col.embedder.embed_query(query) if plan.fusion != "lexical" else None
    if qvec is not None:
        col.check_dims(int(qvec.shape[0]))
        clock.lap("embed")
    both = qvec is not None and plan.fusion != "vector"
    with col.client.reading_pair(col.tenant, pair=both) as (conn, beside):
        if debug is not None and col.store.replicas:  # which server answered: a replica is in recovery
            debug["served_by"] = "replica" if conn.execute("SELECT pg_is_in_recovery()").fetchone() == (True,) \
                else "primary"
        matching = hybrid_filter_count(conn, col, plan)

        def vector(on: Any) -> list[Candidate]:
            assert qvec is not None
            return vector_leg(on, collection_id=col.collection_id, embed_model=col.embed_model, dims=col.dims,
                              qvec=qvec, limit=plan.k_vec, filters=plan.filters, ef_search=col.settings.hnsw_ef_search,
                              exact_threshold=col.settings.exact_scan_threshold, force_exact=plan.exact,
                              matching=matching, vector_type=col.vector_type,
                              ef_grow_from=col.settings.hnsw_ef_search_grow_from)

        def lexical(on: Any) -> list[Candidate]:
            return lexical_leg(on, collection_id=col.collection_id, query=query, limit=plan.k_lex,
                               filters=plan.filters, matching=matching, cache=col.client.postings, tenant=col.tenant)

        def vector_beside() -> tuple[list[Candidate], float] | None:
            assert beside is not None
            with beside() as spare:  # (its connection is taken, and given back, in this thread)
                return None if spare is None else _timed(vector, spare)

        if beside is not None:  # the vector leg beside the lexical one, in one snapshot
            with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="ragd-vector-leg") as worker:
                pending = worker.submit(vector_beside)
                found, lexical_ms = _timed(lexical, conn)  # (the executor's exit waits for the vector leg)
            ran = pending.result()
            if debug is not None:
                debug["legs"] = "sequential" if ran is None else "concurrent"
            if ran is None:  # no second connection was free: after the lexical leg, on the same one
                ran = _timed(vector, conn)
            legs += [ran[0], found]
            clock.record(vector=ran[1], lexical=lexical_ms)  # each leg's own time
        else:
            if qvec is not None:
                legs.append(vector(conn))
                clock.lap("vector")
            if plan.fusion != "vector":
                legs.append(lexical(conn))
                clock.lap("lexical")
    clock.lap("release")  # the read-only transaction ends and its connection goes back to the pool
    if plan.fusion in METHODS:
        ranked = fuse(legs, plan.fusion, {"k": plan.rrf_k, "keyword_weight": plan.keyword_weight,
                                          "semantic_weight": plan.semantic_weight})
        clock.lap("fuse")
    else:
        ranked = legs[0]
    if debug is not None:
        vec = len(legs[0]) if qvec is not None else 0
        debug.update(num_vec_candidates=vec, num_fts_candidates=len(legs[-1]) if plan.fusion != "vector" else 0,
                     num_merged_candidates=len(ranked))
    if plan.rerank:
        ranked, outcome = rerank(query, ranked, col)
        clock.lap("rerank")
        if debug is not None:
            debug.update(reranker_used=outcome.used, reranker_skipped=outcome.skipped,
                         reranker_error=outcome.error, reranker_latency_ms=round(outcome.latency_ms, 2),
                         reranker=outcome.model, k_rerank=outcome.pairs)
    return ranked[: plan.k]


def scope_for(query: str, col: Searched) -> Scope:
    """What the query names among the collection's document identities (retrieve.scope): the issuers' documents
    to search, the periods written as filings write them."""
    with col.client.reading(col.tenant) as conn:
        held = col.client.held.get(conn, col.tenant, col.collection_id)
    return scope_of(query, held) if held else Scope(query=query)


def rerank(query: str, ranked: list[Candidate], col: Searched) -> tuple[list[Candidate], RerankOutcome]:
    reranker = col.client.reranker
    if reranker is None:
        return ranked, RerankOutcome(used=False)
    s = col.settings
    provider = "local" if isinstance(reranker, CrossEncoder) else reranker.name.split(":")[0]
    with span(f"rag.reranker.{provider}", **{"rag.reranker": reranker.name, "rag.candidates": len(ranked),
                                             "rag.rerank_top": s.rerank_top}) as current:
        out, outcome = rerank_fail_open(query, ranked, reranker, top=s.rerank_top, weight=s.rerank_weight,
                                        timeout_s=s.rerank_timeout_s)
        annotate(current, **{"rag.pairs": outcome.pairs, "rag.reranker_skipped": outcome.skipped,
                             "rag.reranker_error": outcome.error, "rag.latency_ms": round(outcome.latency_ms, 2)})
    return out, outcome


def hybrid_filter_count(conn: Any, col: Searched, plan: Plan) -> int | None:
    """For a filtered request that runs both legs, the filtered count once, capped above both legs' thresholds;
    None otherwise (a single leg counts for itself, up to its own threshold)."""
    if plan.filters.empty or plan.fusion not in METHODS:
        return None
    cap = max(col.settings.exact_scan_threshold, plan.k_vec + 10, FILTERED_FIRST) + 1
    return count_matching(conn, collection_id=col.collection_id, filters=plan.filters, cap=cap)


class Stopwatch:
    def __init__(self, sink: dict[str, float] | None):
        self._sink = sink
        self._last = time.perf_counter()

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        if self._sink is not None:
            self._sink[stage] = self._sink.get(stage, 0.0) + (now - self._last) * 1000
        self._last = now

    def record(self, **stages: float) -> None:
        """Stages that ran side by side, each with its own milliseconds; the next lap starts now."""
        for stage, ms in stages.items():
            if self._sink is not None:
                self._sink[stage] = self._sink.get(stage, 0.0) + ms
        self._last = time.perf_counter()


def _timed(run: Callable[[Any], list[Candidate]], conn: Any) -> tuple[list[Candidate], float]:
    started = time.perf_counter()
    found = run(conn)
    return found, (time.perf_counter() - started) * 1000


def explain(col: Searched, query: str, full: Plan, analyze: bool = False) -> list[dict[str, str]]:
    """The SQL each leg would run for a search, with PostgreSQL's plan (EXPLAIN [ANALYZE])."""
    out: list[dict[str, str]] = []
    with col.store.tenant(col.tenant) as conn:
        matching = hybrid_filter_count(conn, col, full)
        if full.fusion != "lexical":
            qvec = col.embedder.embed_query(query)
            exact, _ = prepare_vector_scan(conn, collection_id=col.collection_id, filters=full.filters,
                                           limit=full.k_vec + 10, ef_search=col.settings.hnsw_ef_search,
                                           exact_threshold=col.settings.exact_scan_threshold,
                                           force_exact=full.exact, matching=matching,
                                           ef_grow_from=col.settings.hnsw_ef_search_grow_from)
            stmt, params = vector_sql(col.collection_id, col.embed_model, col.dims, full.filters, exact=exact,
                                      vector_type=col.vector_type)
            params = {**params, "collection_id": col.collection_id, "embed_model": col.embed_model,
                      "qvec": qvec, "limit": full.k_vec + 10}
            leg = "vector (exact)"
            if not exact:  # the breadth the leg set for this collection's size
                (ef,) = conn.execute("SHOW hnsw.ef_search").fetchone() or ("?",)
                leg = f"vector (hnsw, ef_search {ef})"
            out.append(_explain(conn, leg, stmt, params, analyze))
        if full.fusion != "vector":
            lex = plan_lexical(conn, collection_id=col.collection_id, query=query, limit=full.k_lex,
                               filters=full.filters, matching=matching)
            if lex.statement is not None:
                out.append(_explain(conn, f"lexical (bm25, {lex.mode})", lex.statement, lex.params, analyze))
    return out


def _explain(conn: Any, leg: str, stmt: Any, params: dict[str, Any], analyze: bool) -> dict[str, str]:
    text = stmt.as_string(conn)
    prefix = b"EXPLAIN (ANALYZE, BUFFERS) " if analyze else b"EXPLAIN "
    lines = [row[0] for row in conn.execute(prefix + stmt.as_bytes(conn), params)]
    return {"leg": leg, "sql": text, "plan": "\n".join(lines)}
