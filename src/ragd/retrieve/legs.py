"""The two candidate legs: vector (HNSW, or exact for small selective sets) and lexical (BM25), as SQL."""

from __future__ import annotations

import dataclasses
import uuid
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
    out = []
    for chunk_id, score in scored:
        row = by_id.get(chunk_id)
        if row is None:
            continue
        out.append(
            Candidate(
                chunk_id=row[0],
                doc_id=row[1],
                doc_version_id=row[2],
                chunk_index=row[3],
                content=row[4],
                title=row[5],
                external_id=row[6],
                version_label=row[7],
                heading_path=tuple(row[8] or ()),
                chunk_type=row[9],
                tags=tuple(row[10] or ()),
                metadata=row[11] or {},
                score=float(score),
            )
        )
    return out


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


def prepare_vector_scan(conn: psycopg.Connection[Any], *, collection_id: uuid.UUID, filters: Filters, limit: int,
                        ef_search: int, exact_threshold: int, force_exact: bool) -> tuple[bool, int | None]:
    """Choose exact or HNSW for this request and set the transaction's HNSW parameters.

    Returns (exact, number of matching rows when filters were counted)."""
    matching: int | None = None
    exact = force_exact
    if not exact and not filters.empty:
        _, fparams = queries.filter_clause(filters)
        cap = max(exact_threshold, limit) + 1
        row = conn.execute(queries.count_filtered_sql(filters),
                           {**fparams, "collection_id": collection_id, "cap": cap}).fetchone()
        matching = int(row[0]) if row else 0
        exact = matching <= exact_threshold
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
) -> list[Candidate]:
    """Top `limit` by cosine similarity among active chunks that pass the filters.

    Unfiltered: the collection's HNSW index. Filtered: an exact scan when the matching set is small,
    else an iterative index scan, falling back to exact if it still returned fewer rows than exist.
    """
    base = {"collection_id": collection_id, "embed_model": embed_model, "qvec": qvec}
    overfetch = limit + 10  # room for the canonical tie-break at the cut-off
    exact, matching = prepare_vector_scan(conn, collection_id=collection_id, filters=filters, limit=overfetch,
                                          ef_search=ef_search, exact_threshold=exact_threshold,
                                          force_exact=force_exact)
    query, fparams = vector_sql(collection_id, embed_model, dims, filters, exact=exact)
    rows = conn.execute(query, {**base, **fparams, "limit": overfetch}).fetchall()
    if not exact and matching is not None and len(rows) < min(overfetch, matching):
        query, fparams = vector_sql(collection_id, embed_model, dims, filters, exact=True)
        rows = conn.execute(query, {**base, **fparams, "limit": overfetch}).fetchall()
    scored = [(row[0], round(float(row[1]), 9)) for row in rows]
    return _ranked(hydrate(conn, scored), "vector", limit)


def lexical_params(collection_id: uuid.UUID, query: str, filters: Filters, limit: int) -> dict[str, Any]:
    _, fparams = queries.filter_clause(filters)
    return {
        **fparams,
        "collection_id": collection_id,
        "query": query,
        "limit": limit,
        "k1": BM25_K1,
        "b": BM25_B,
    }


def lexical_leg(
    conn: psycopg.Connection[Any], *, collection_id: uuid.UUID, query: str, limit: int, filters: Filters
) -> list[Candidate]:
    """Top `limit` by BM25 over the active chunks that pass the filters."""
    rows = conn.execute(
        queries.lexical_sql(filters), lexical_params(collection_id, query, filters, limit)
    ).fetchall()
    return _ranked(hydrate(conn, [(row[0], float(row[1])) for row in rows]), "lexical", limit)
