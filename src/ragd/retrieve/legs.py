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

from ..store import blocks, queries
from ..types import Candidate, Filters
from .postings import Postings, PostingsCache, State

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
    collection_id: uuid.UUID, embed_model: str, dims: int, filters: Filters, *, exact: bool, vector_type: str,
) -> tuple[sql.Composed, dict[str, Any]]:
    _, fparams = queries.filter_clause(filters)
    if exact:
        return queries.vector_exact_sql(filters), fparams
    return queries.vector_index_sql(collection_id, embed_model, dims, filters, vector_type), fparams


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


def ef_search_at(ef_search: int, chunks: int, grow_from: int) -> int:
    """The HNSW ef_search for a collection of `chunks` active chunks: `ef_search` up to `grow_from` chunks, then
    growing as the square root of the size, at most 1000 (pgvector's limit); `grow_from` 0: `ef_search` at any
    size. A graph's recall at a fixed ef_search falls as it grows (bench/scale.py, recall@10 at 100: 0.97-0.99 at
    100k chunks, 0.91-0.92 at 1M), and the cost of a search grows about with ef_search, so a small collection
    keeps its speed and a large one its recall."""
    if grow_from <= 0 or chunks <= grow_from:
        return ef_search
    return min(1000, max(ef_search, math.ceil(ef_search * math.sqrt(chunks / grow_from))))


def prepare_vector_scan(conn: psycopg.Connection[Any], *, collection_id: uuid.UUID, filters: Filters, limit: int,
                        ef_search: int, exact_threshold: int, force_exact: bool,
                        matching: int | None = None, ef_grow_from: int = 0) -> tuple[bool, int | None]:
    """Choose exact or HNSW for this request and set the transaction's HNSW parameters (ef_search as
    `ef_search_at` gives it for the collection's size when `ef_grow_from` is set).

    `matching` is the filtered count when the caller already has it (counted up to more than
    max(exact_threshold, limit)). Returns (exact, number of matching rows when filters were counted)."""
    exact = force_exact
    if not exact and not filters.empty:
        if matching is None:
            matching = count_matching(conn, collection_id=collection_id, filters=filters,
                                      cap=max(exact_threshold, limit) + 1)
        exact = (matching or 0) <= exact_threshold
    if not exact:  # (ef_search_at, for the collection's size, in the statement that sets it)
        conn.execute(queries.SET_HNSW_SCAN, {"collection_id": collection_id, "limit": limit, "ef": ef_search,
                                             "grow": ef_grow_from, "iterative": not filters.empty})
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
    vector_type: str,  # the collection's (its index is over this type; no default: a wrong one misses the index)
    force_exact: bool = False,
    matching: int | None = None,
    ef_grow_from: int = 0,
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
                                          force_exact=force_exact, matching=matching,
                                          ef_grow_from=ef_grow_from)
    query, fparams = vector_sql(collection_id, embed_model, dims, filters, exact=exact, vector_type=vector_type)
    rows = conn.execute(query, {**base, **fparams, "limit": overfetch}).fetchall()
    if not exact and matching is not None and len(rows) < min(overfetch, matching):
        query, fparams = vector_sql(collection_id, embed_model, dims, filters, exact=True, vector_type=vector_type)
        rows = conn.execute(query, {**base, **fparams, "limit": overfetch}).fetchall()
    scored = [(row[0], round(float(row[1]), 9)) for row in rows]
    return _ranked(hydrate(conn, scored), "vector", limit)


# A filter matching at most this many chunks is applied before scoring (its chunks' ordinals read first); a wider
# one is applied to the best-scored chunks as they are mapped back, until enough pass.
FILTERED_FIRST = 100_000
DENSE_ORDS = 1 << 22  # BM25 sums go in an array indexed by ordinal up to 4 x the postings read plus this many


@dataclass(frozen=True)
class LexicalPlan:
    """How the BM25 leg runs for one query, decided from the maintained term statistics."""

    mode: str  # "empty" | "blocks" | "blocks, filter first" | "blocks, filter last"
    params: dict[str, Any]
    statement: sql.Composed | None  # the statement reading the query's blocks


def bm25_weights(rows: list[tuple[Any, ...]]) -> tuple[list[str], list[float], float]:
    """Terms (rarest first), their weights and the average chunk length, from rows of (term, df, n_chunks,
    total_len, qtf, ...). A term's weight is its idf times its count in the query: each occurrence adds its term
    score, as in Lucene's BM25."""
    n, total = rows[0][2], rows[0][3]
    idfs = [qtf * math.log(1 + (n - df + 0.5) / (df + 0.5)) for _, df, _, _, qtf, *_ in rows]
    return [r[0] for r in rows], idfs, max(total / n, 1.0) if n else 1.0


def plan_lexical(conn: psycopg.Connection[Any], *, collection_id: uuid.UUID, query: str, limit: int,
                 filters: Filters, filtered_first: int = FILTERED_FIRST, matching: int | None = None) -> LexicalPlan:
    """How BM25 runs for this query. `matching` is the filtered count when the caller already has it (counted
    up to more than `filtered_first`)."""
    rows = conn.execute(queries.LEXICAL_TERM_STATS, {"query": query, "collection_id": collection_id}).fetchall()
    if not rows:
        return LexicalPlan("empty", {}, None)
    terms, idfs, avg_len = bm25_weights(rows)
    _, fparams = queries.filter_clause(filters)
    params: dict[str, Any] = {**fparams, "collection_id": collection_id, "terms": terms, "idfs": idfs,
                              "avg_len": avg_len, "limit": limit, "posted": [int(r[5]) for r in rows],
                              "state": State(created=rows[0][8], rewrites=int(rows[0][7]), upto=int(rows[0][6]))}
    mode = "blocks"
    if not filters.empty:
        if matching is None:
            matching = count_matching(conn, collection_id=collection_id, filters=filters, cap=filtered_first + 1)
        mode = "blocks, filter first" if (matching or 0) <= filtered_first else "blocks, filter last"
    return LexicalPlan(mode, params, sql.SQL(queries.LEXICAL_BLOCKS))  # type: ignore[arg-type]


def _decoded(rows: Any) -> dict[str, Postings]:
    return {str(term): Postings(*blocks.decode(o, t, n)) for term, o, t, n in rows}


def term_postings(conn: psycopg.Connection[Any], plan: LexicalPlan, cache: PostingsCache | None = None,
                  tenant: str | None = None) -> dict[str, Postings]:
    """Each query term's postings below the next ordinal the plan's statistics read (none at or past it exists in
    their state): from `cache` where it keeps the term still valid (plus the blocks written since), else read from
    its blocks (and kept, for a term with enough postings). One statement for the terms read whole, one for those
    grown since they were kept."""
    p = plan.params
    state: State = p["state"]
    keeping = cache if cache is not None and tenant is not None and cache.max_bytes > 0 else None
    kept_terms = {t for t, n in zip(p["terms"], p["posted"], strict=True) if keeping and keeping.keeps(n)}
    got: dict[str, Postings] = {}
    whole: list[str] = []
    grown: dict[str, tuple[Postings, int]] = {}
    for term in p["terms"]:
        kept, since = (None, None) if keeping is None or term not in kept_terms else \
            keeping.lookup((str(tenant), p["collection_id"], term), state)
        if kept is None:
            whole.append(term)
        elif since is None:
            got[term] = kept
        else:
            grown[term] = (kept, since)
    with conn.cursor(binary=True) as cur:
        if whole:
            read = _decoded(cur.execute(queries.LEXICAL_BLOCKS, {"collection_id": p["collection_id"],
                                                                 "terms": whole}))
            got.update((term, postings.below(state.upto)) for term, postings in read.items())
        if grown:
            terms = sorted(grown)
            added = _decoded(cur.execute(queries.LEXICAL_BLOCKS_SINCE, {
                "collection_id": p["collection_id"], "terms": terms, "since": [grown[t][1] for t in terms]}))
            for term in terms:
                kept, at = grown[term]
                more = added.get(term)
                got[term] = kept if more is None else kept.then(more.between(at, state.upto))
    if keeping is not None:
        for term in sorted(kept_terms & (set(whole) | set(grown))):
            if term in got:
                keeping.put((str(tenant), p["collection_id"], term), state, got[term])
        missed = len(kept_terms & set(whole))
        keeping.count(hits=len(kept_terms) - missed - len(grown), grown=len(grown), misses=missed)
    return got


def bm25_scores(conn: psycopg.Connection[Any], plan: LexicalPlan, cache: PostingsCache | None = None,
                tenant: str | None = None) -> tuple[np.ndarray | None, np.ndarray]:
    """(ords, sums): the BM25 score of every ordinal holding any of the query's terms, not yet rounded (Scores
    rounds the ones it hands out). Dense when ordinals are (ragd hands them out from 0): ords is None and sums is
    indexed by ordinal, 0 where no term occurs; else ords (ascending) and their sums. Postings of retired chunks are
    scored too: mapping ordinals back to active chunks drops them. Terms are summed rarest first: the same sums
    every time, whether a term's postings were kept (`cache`, for `tenant`) or read."""
    p = plan.params
    got = term_postings(conn, plan, cache, tenant)
    present = [(i, got[term]) for i, term in enumerate(p["terms"]) if term in got and len(got[term].ords)]
    if not present:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    ords = np.concatenate([q.ords for _, q in present]).astype(np.int64)
    # weight * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avg_len)): each term's normalised tfs (kept with
    # its postings while the average length stays) times its weight
    parts = np.concatenate([q.normalised(p["avg_len"], BM25_K1, BM25_B) * p["idfs"][i] for i, q in present])
    if not (len(ords) == 0 or (ords.min() >= 0 and parts.min() > 0 and np.isfinite(parts.sum()))):
        # Rows a tenant wrote by hand through its own SQL session may hold anything: negative ordinals and parts
        # that are not finite positive numbers are dropped, so they cannot fail the search or poison a sum.
        sane = (ords >= 0) & np.isfinite(parts) & (parts > 0)
        ords, parts = ords[sane], parts[sane]
    if len(ords) and int(ords.max()) <= 4 * len(ords) + DENSE_ORDS:
        return None, np.bincount(ords, weights=parts)  # the sums in an array indexed by ordinal
    # ordinals far beyond the postings' count (written by hand): summed by sorting, not in an array that large
    found, at = np.unique(ords, return_inverse=True)
    return found, np.bincount(at, weights=parts)


# The best `take` of many sums are found among the sums at least the take-th largest of their groups' maxima (a
# lower bound of the take-th largest sum: each group's maximum is a sum); about this many groups a sum taken.
GROUPS_PER_TAKEN = 8
ROUNDING = 1e-9  # scores are rounded to it, so that summation order cannot reorder ties


def best_sums(sums: np.ndarray, take: int, positive: int) -> np.ndarray:
    """The positions of the `positive` positive sums whose rounded value is at least the take-th largest rounded
    value (ties all in), ascending; every positive one when there are no more than `take`. Without sorting or
    partitioning them all (at a million chunks a common term's sums are most of the array): the groups' maxima
    give a lower bound, and only the sums above it are rounded and partitioned."""
    if take >= positive:
        everything: np.ndarray = np.flatnonzero(sums > 0)
        return everything
    width = len(sums) // (GROUPS_PER_TAKEN * take)
    low = 0.0
    if width > 1:
        maxima = sums[: len(sums) // width * width].reshape(-1, width).max(axis=1)
        # a rounded value at least the rounded take-th largest is at least the bound less one rounding step
        low = float(np.partition(maxima, len(maxima) - take)[len(maxima) - take]) - 2 * ROUNDING
    near = np.flatnonzero(sums >= low) if low > 0 else np.flatnonzero(sums > 0)
    rounded = np.round(sums[near], 9)
    threshold = np.partition(rounded, len(rounded) - take)[len(rounded) - take]
    best: np.ndarray = near[rounded >= threshold]
    return best


def lexical_leg(
    conn: psycopg.Connection[Any], *, collection_id: uuid.UUID, query: str, limit: int, filters: Filters,
    matching: int | None = None, filtered_first: int = FILTERED_FIRST, cache: PostingsCache | None = None,
    tenant: str | None = None,
) -> list[Candidate]:
    """Top `limit` by BM25 (k1 1.2, b 0.75) over the active chunks that pass the filters; exact: every posting of
    the query's terms is scored, and the best are mapped back to active chunks until `limit` of them (and every
    chunk tied with the last) are found."""
    plan = plan_lexical(conn, collection_id=collection_id, query=query, limit=limit, filters=filters,
                        matching=matching, filtered_first=filtered_first)
    if plan.statement is None:
        return []
    ords, sums = bm25_scores(conn, plan, cache, tenant)
    if plan.mode == "blocks, filter first":
        allowed = np.array([r[0] for r in conn.execute(queries.filtered_ords_sql(filters), plan.params)],
                           dtype=np.int64)
        if ords is None:
            allowed = allowed[(allowed >= 0) & (allowed < len(sums))]
            kept = np.zeros_like(sums)
            kept[allowed] = sums[allowed]
            sums = kept
        else:
            keep = np.isin(ords, allowed)
            ords, sums = ords[keep], sums[keep]
    found = _best_active(conn, plan, filters, ords, sums, limit)
    return _ranked(found, "lexical", limit)


def _best_active(conn: psycopg.Connection[Any], plan: LexicalPlan, filters: Filters, ords: np.ndarray | None,
                 sums: np.ndarray, limit: int) -> list[Candidate]:
    """The active chunks passing the filters among the best-scored ordinals: at least `limit` of them and every
    one scoring as much as the last, or all there are. Candidates are taken by score threshold (ties all in), the
    threshold lowered fourfold while too few of them map to active chunks."""
    statement = queries.chunks_by_ord_sql(filters)
    found: list[Candidate] = []
    looked = np.zeros(0, dtype=np.int64)  # positions in sums already mapped back
    take = limit + 10
    positive = int(np.count_nonzero(sums > 0))
    while True:
        best = best_sums(sums, take, positive)
        pick = best[~np.isin(best, looked, assume_unique=True)]
        if len(pick):
            ordinals = pick if ords is None else ords[pick]
            score_of = dict(zip(ordinals.tolist(), np.round(sums[pick], 9).tolist()))
            rows = conn.execute(statement, {**plan.params, "ords": sorted(score_of)}).fetchall()
            found += [candidate(row[1:], score_of[row[0]]) for row in rows]
            looked = np.union1d(looked, pick)
        if len(found) >= limit or take >= positive:
            return found
        take *= 4
