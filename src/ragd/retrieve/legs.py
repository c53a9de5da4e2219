"""The two candidate legs: vector (HNSW, or exact for small selective sets) and lexical (BM25), as SQL."""

from __future__ import annotations

import dataclasses
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from ..store import queries
from ..types import Candidate, Filters

BM25_K1 = 1.2
BM25_B = 0.75


def hydrate(conn: psycopg.Connection[Any], scored: list[tuple[uuid.UUID, float]]) -> list[Candidate]:
    """Load the chunk rows behind (chunk_id, score) pairs, keeping the given order."""
    if not scored:
        return []
    rows = conn.execute(queries.CANDIDATE_COLUMNS, {"ids": [cid for cid, _ in scored]}).fetchall()
    by_id = {row[0]: row for row in rows}
    return [candidate(by_id[chunk_id], score) for chunk_id, score in scored if chunk_id in by_id]


def candidate(row: Sequence[Any], score: float) -> Candidate:
    """A Candidate from a row laid out as CANDIDATE_COLUMNS."""
    return Candidate(chunk_id=row[0], doc_id=row[1], doc_version_id=row[2], chunk_index=row[3], content=row[4],
                     title=row[5], external_id=row[6], version_label=row[7], heading_path=tuple(row[8] or ()),
                     chunk_type=row[9], tags=tuple(row[10] or ()), metadata=row[11] or {}, score=float(score))


def _ranked(cands: list[Candidate], leg: str, limit: int) -> list[Candidate]:
    ordered = sorted(cands, key=lambda c: (-round(c.score, 9), str(c.doc_id), c.chunk_index))[:limit]
    if leg == "vector":
        return [dataclasses.replace(c, vector_score=c.score, vector_rank=rank) for rank, c in enumerate(ordered, 1)]
    return [dataclasses.replace(c, lexical_score=c.score, lexical_rank=rank) for rank, c in enumerate(ordered, 1)]


def vector_sql(
    collection_id: uuid.UUID, embed_model: str, dims: int, filters: Filters, *, exact: bool
) -> tuple[sql.Composed, dict[str, Any]]:
    _, fparams = queries.filter_clause(filters)
    if exact:
        return queries.vector_exact_sql(filters), fparams
    return queries.vector_index_sql(collection_id, embed_model, dims, filters), fparams


def count_matching(conn: psycopg.Connection[Any], *, collection_id: uuid.UUID, filters: Filters,
                   cap: int) -> int | None:
    """Active chunks passing the filters, counted up to `cap`; None when there are no filters. Both legs decide
    their strategy from it, so a hybrid request counts once and hands the number to each."""
    if filters.empty:
        return None
    _, fparams = queries.filter_clause(filters)
    row = conn.execute(queries.count_filtered_sql(filters),
                       {**fparams, "collection_id": collection_id, "cap": cap}).fetchone()
    return int(row[0]) if row else 0


def prepare_vector_scan(conn: psycopg.Connection[Any], *, collection_id: uuid.UUID, filters: Filters, limit: int,
                        ef_search: int, exact_threshold: int, force_exact: bool,
                        matching: int | None = None) -> tuple[bool, int | None]:
    """Choose exact or HNSW for this request and set the transaction's HNSW parameters.

    `matching` is the filtered count when the caller already has it (counted up to more than
    max(exact_threshold, limit)). Returns (exact, number of matching rows when filters were counted)."""
    exact = force_exact
    if not exact and not filters.empty:
        if matching is None:
            matching = count_matching(conn, collection_id=collection_id, filters=filters,
                                      cap=max(exact_threshold, limit) + 1)
        exact = (matching or 0) <= exact_threshold
    if not exact:
        conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(max(ef_search, limit))))
        if not filters.empty:
            conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
    return exact, matching


def vector_leg(
    conn: psycopg.Connection[Any],
    *,
    collection_id: uuid.UUID,
    embed_model: str,
    dims: int,
    qvec: np.ndarray,
    limit: int,
    filters: Filters,
    ef_search: int,
    exact_threshold: int,
    force_exact: bool = False,
    matching: int | None = None,
) -> list[Candidate]:
    """Top `limit` by cosine similarity among active chunks that pass the filters.

    Unfiltered: the collection's HNSW index. Filtered: an exact scan when the matching set is small,
    else an iterative index scan, falling back to exact if it still returned fewer rows than exist.
    """
    if not np.any(qvec) or not np.isfinite(qvec).all():
        return []  # a query vector with no direction (a query of no words: an emoji, punctuation) is near nothing
    base = {"collection_id": collection_id, "embed_model": embed_model, "qvec": qvec}
    overfetch = limit + 10  # room for the canonical tie-break at the cut-off
    exact, matching = prepare_vector_scan(conn, collection_id=collection_id, filters=filters, limit=overfetch,
                                          ef_search=ef_search, exact_threshold=exact_threshold,
                                          force_exact=force_exact, matching=matching)
    query, fparams = vector_sql(collection_id, embed_model, dims, filters, exact=exact)
    rows = conn.execute(query, {**base, **fparams, "limit": overfetch}).fetchall()
    if not exact and matching is not None and len(rows) < min(overfetch, matching):
        query, fparams = vector_sql(collection_id, embed_model, dims, filters, exact=True)
        rows = conn.execute(query, {**base, **fparams, "limit": overfetch}).fetchall()
    scored = [(row[0], round(float(row[1]), 9)) for row in rows]
    return _ranked(hydrate(conn, scored), "vector", limit)


FULL_SCAN_POSTINGS = 20_000  # below this many postings, score them all in one pass
# MaxScore: the rarest terms, up to this many postings, are scored first for a threshold that decides which
# terms are essential. Paired at 100k chunks (p50/p95 of plan + statement): 3,000 18.7/48.1 ms, 4,000 16.5/38.6,
# 5,000 16.7/37.5, 8,000 18.8/40.9, 16,000 21.9/46.8.
SEED_POSTINGS = 5_000
FILTERED_FIRST = 20_000  # a filter matching at most this many chunks is scored from the chunks' side
# MaxScore: the threshold inside the statement comes from the full scores of the PROBE_FACTOR x limit chunks
# with the best essential sums. Measured at 100k chunks, paired per query (p95 of the SQL): 2x 54.9 ms,
# 3x 52.9, 4x 46.5-47.0, 6x 55.2, 8x 54.9: fewer probes leave too many survivors, more cost more than they cut.
PROBE_FACTOR = 4
PROBE_COST = 16  # MaxScore: one key probe costs about as much as reading this many postings (paired: 3, 8, 16, 20, 40)


@dataclass(frozen=True)
class LexicalPlan:
    """How the BM25 leg runs for one query, decided from the maintained term statistics."""

    mode: str  # "empty" | "full" | "filtered" | "maxscore"
    params: dict[str, Any]
    statement: sql.Composed | None


def bm25_weights(rows: list[tuple[str, int, int, int, int]]) -> tuple[list[str], list[float], float]:
    """Terms (rarest first), their weights and the average chunk length, from (term, df, n_chunks, total_len,
    qtf). A term's weight is its idf times its count in the query: each occurrence adds its term score, as in
    Lucene's BM25, so the MaxScore upper bounds (weight x (k1 + 1)) scale with the count too."""
    n, total = rows[0][2], rows[0][3]
    idfs = [qtf * math.log(1 + (n - df + 0.5) / (df + 0.5)) for _, df, _, _, qtf in rows]
    return [r[0] for r in rows], idfs, max(total / n, 1.0) if n else 1.0


def plan_lexical(conn: psycopg.Connection[Any], *, collection_id: uuid.UUID, query: str, limit: int,
                 filters: Filters, full_scan_postings: int = FULL_SCAN_POSTINGS, seed_postings: int = SEED_POSTINGS,
                 filtered_first: int = FILTERED_FIRST, probe_cost: float = PROBE_COST,
                 matching: int | None = None) -> LexicalPlan:
    """How BM25 runs for this query. `matching` is the filtered count when the caller already has it (counted
    up to more than `filtered_first`)."""
    rows = conn.execute(queries.LEXICAL_TERM_STATS, {"query": query, "collection_id": collection_id}).fetchall()
    if not rows:
        return LexicalPlan("empty", {}, None)
    terms, idfs, avg_len = bm25_weights(rows)
    _, fparams = queries.filter_clause(filters)
    params: dict[str, Any] = {**fparams, "collection_id": collection_id, "terms": terms, "idfs": idfs,
                              "avg_len": avg_len, "k1": BM25_K1, "b": BM25_B, "limit": limit}
    if not filters.empty:
        if matching is None:
            matching = count_matching(conn, collection_id=collection_id, filters=filters, cap=filtered_first + 1)
        if (matching or 0) <= filtered_first:
            return LexicalPlan("filtered", params, queries.lexical_filtered_sql(filters))
    dfs = [int(r[1]) for r in rows]
    if sum(dfs) <= full_scan_postings or len(terms) == 1:
        return LexicalPlan("full", params, queries.lexical_sql(filters))
    seed = 1
    while seed < len(terms) and sum(dfs[: seed + 1]) <= seed_postings:
        seed += 1
    found = conn.execute(queries.lexical_threshold_sql(filters),
                         {**params, "terms": terms[:seed], "idfs": idfs[:seed], "offset": limit - 1}).fetchone()
    theta = float(found[0]) if found else 0.0
    # MaxScore: the commonest terms whose upper bounds sum below theta cannot lift a chunk into the top
    # `limit` on their own, so only chunks holding one of the other (essential) terms are candidates.
    bound, cut = 0.0, len(terms)
    while cut > 1 and bound + idfs[cut - 1] * (BM25_K1 + 1) < theta:
        cut -= 1
        bound += idfs[cut] * (BM25_K1 + 1)
    # Even when no term can be dropped, scoring through the partial-sum bound beats a plain full scan here.
    # The survivors get the non-essential terms by key probes or by one scan, whichever the SQL finds cheaper.
    per_term = {f"term{i}": t for i, t in enumerate(terms[:cut])} | {f"idf{i}": x for i, x in enumerate(idfs[:cut])}
    # the non-essential terms, rarest first, each with the upper bound of the ones after it
    after = bound
    for j, i in enumerate(range(cut, len(terms))):
        after -= idfs[i] * (BM25_K1 + 1)
        per_term |= {f"rterm{j}": terms[i], f"ridf{j}": idfs[i], f"rdf{j}": dfs[i], f"rub{j}": max(after, 0.0)}
    return LexicalPlan("maxscore", {**params, **per_term, "rest": terms[cut:],
                                    "ub_rest": bound, "probe": PROBE_FACTOR * limit, "probe_cost": probe_cost},
                       queries.lexical_maxscore_sql(filters, cut, len(terms) - cut))


def lexical_leg(
    conn: psycopg.Connection[Any], *, collection_id: uuid.UUID, query: str, limit: int, filters: Filters,
    matching: int | None = None,
) -> list[Candidate]:
    """Top `limit` by BM25 (k1 1.2, b 0.75) over the active chunks that pass the filters; exact in every mode."""
    plan = plan_lexical(conn, collection_id=collection_id, query=query, limit=limit, filters=filters,
                        matching=matching)
    if plan.statement is None:
        return []
    # unprepared: each query is planned with its own terms (a generic plan would guess their posting counts)
    rows = conn.execute(plan.statement, plan.params, prepare=False).fetchall()
    return _ranked([candidate((row[0], *row[2:]), row[1]) for row in rows], "lexical", limit)
