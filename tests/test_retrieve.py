"""Retrieval against the real database: the HNSW index is used, filters keep k rows, fusion is exact."""

from __future__ import annotations

import contextlib
import json
import math
import random
import uuid

import numpy as np
import psycopg
import pytest
from psycopg import sql

import ragd
from ragd.config import Settings
from ragd.errors import InvalidRequest
from ragd.retrieve.legs import best_sums, ef_search_at, vector_sql
from ragd.store.postgres import TENANT_POOL_SIZE
from ragd.types import Candidate, Filters

from .conftest import DATA
from .pools import two_free_connections

WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
         "quebec romeo sierra tango uniform victor whiskey xray yankee zulu").split()


def corpus(n: int, rare_every: int = 0) -> list[dict[str, object]]:
    rng = random.Random(20261122)
    vocab = WORDS + [f"{a}{b}" for a in WORDS[:20] for b in WORDS[:20]]
    docs = []
    for i in range(n):
        words = [rng.choice(vocab) for _ in range(14)]
        tags = ["common"] + (["rare"] if rare_every and i % rare_every == 0 else [])
        docs.append({"id": f"d{i:04d}", "text": "record " + " ".join(words) + f" item{i}.", "tags": tags,
                     "metadata": {"group": i % 5, "rare": bool(rare_every and i % rare_every == 0)}})
    return docs


@pytest.fixture(scope="module")
def big(client: ragd.Ragd) -> ragd.Collection:
    col = client.collection("retrieve" + uuid.uuid4().hex[:8])
    report = col.ingest(documents=corpus(1200, rare_every=100))
    assert report.count("ingested") == 1200
    return col


def test_vector_leg_uses_the_hnsw_index(client: ragd.Ragd, big: ragd.Collection) -> None:
    query, params = vector_sql(big.collection_id, big.embed_model, big.dims, Filters(), exact=False,
                               vector_type=big.vector_type)
    qvec = big.embedder.embed_query("alpha bravo")
    with client.store.admin() as conn:  # the table owner: ANALYZE from a tenant session is skipped
        conn.execute("ANALYZE chunk_embeddings")
    with client.store.tenant(big.tenant) as conn:
        # the index must match the query (its predicate and cast repeated literally); whether the planner prefers
        # it to sorting this tenant's rows depends on its estimate of a tenant's share, which other tests' tenants
        # change: with sorting priced out, a plan without the index would still sort
        conn.execute("SET LOCAL enable_sort = off")
        plan = "\n".join(r[0] for r in conn.execute(
            b"EXPLAIN " + query.as_bytes(conn), {**params, "qvec": qvec, "limit": 50}))
    assert "chunk_embeddings_hnsw_" in plan, plan
    assert "Index Scan" in plan


@pytest.mark.parametrize("exact_threshold", [5000, 0])
def test_rare_filter_still_returns_k_rows(settings: Settings, big: ragd.Collection, exact_threshold: int) -> None:
    client = ragd.connect(settings=settings.model_copy(update={"exact_scan_threshold": exact_threshold}))
    try:
        col = client.collection(big.name)
        for fusion in ("vector", "lexical", "rrf", "weighted"):
            hits = col.search("record alpha bravo charlie", k=10, filters={"tags_any": ["rare"]}, fusion=fusion)
            assert len(hits) == 10, (fusion, exact_threshold)
            assert all("rare" in h.tags for h in hits)
        hits = col.search("alpha", k=12, filters={"tags_all": ["common", "rare"]}, fusion="vector")
        assert len(hits) == 12
        meta = col.search("alpha", k=5, filters={"metadata": {"group": 3}}, fusion="vector")
        assert len(meta) == 5 and all(h.metadata["group"] == 3 for h in meta)
        by_doc = col.search("alpha", k=5, filters={"doc_ids": [str(meta[0].doc_id)]})
        assert {h.doc_id for h in by_doc} == {meta[0].doc_id}
        assert col.search("alpha", k=5, filters={"tags_any": ["nonexistent"]}) == []
    finally:
        client.close()


def test_hnsw_recall_against_exact_search(big: ragd.Collection) -> None:
    found = total = 0
    for query in ("kilo lima mike", "zulu item900", "alpha bravo", "echo golf hotel", "sierra tango"):
        approx = {h.chunk_id for h in big.search(query, k=10, fusion="vector")}
        exact = {h.chunk_id for h in big.search(query, k=10, fusion="vector", exact=True)}
        found, total = found + len(approx & exact), total + len(exact)
    assert found / total >= 0.9


def test_ef_search_grows_as_the_square_root_of_the_collection_past_its_threshold(
        settings: Settings, client: ragd.Ragd, big: ragd.Collection) -> None:
    assert [ef_search_at(100, n, 62_500) for n in (0, 62_500, 100_000, 250_000, 1_000_000, 4_000_000)] == \
        [100, 100, 127, 200, 400, 800]
    assert ef_search_at(100, 10**9, 62_500) == 1000  # pgvector's limit
    assert ef_search_at(100, 10**9, 0) == 100  # growth off
    with client.store.admin() as conn:
        chunks = conn.execute("SELECT count(*) FROM chunks WHERE collection_id = %s AND is_active",
                              (big.collection_id,)).fetchone()[0]
    assert chunks >= 1200
    for grow_from, want in ((0, 100), (chunks, 100), (chunks // 4, 200)):
        client = ragd.connect(settings=settings.model_copy(
            update={"hnsw_ef_search": 100, "hnsw_ef_search_grow_from": grow_from}))
        try:  # the ef_search the vector leg set in its transaction, as the collection's statistics size it
            legs = client.collection(big.name).explain("alpha bravo", k=10, fusion="vector")
            assert legs[0]["leg"] == f"vector (hnsw, ef_search {want})", grow_from
        finally:
            client.close()


def test_the_breadth_set_in_sql_is_ef_search_at_for_every_size(client: ragd.Ragd, big: ragd.Collection) -> None:
    """The vector leg sets ef_search in the statement that reads the collection's size: the same number as
    ef_search_at (the same float8 operations), at least the scan's limit, for sizes around and far past the
    threshold (the statistics' count set by hand in a transaction that is rolled back)."""
    from ragd.store import queries

    rng = random.Random(5)
    sizes = [0, 1, 7, 62_499, 62_500, 62_501, 100_000, 999_999, 1_000_000, 1_163_038, 4_000_000, 10**8, 2**31 - 1]
    sizes += [rng.randrange(1, 10**7) for _ in range(200)]
    with client.store.admin() as conn:
        # pgvector's library loaded in this session (a cast does it), so hnsw.iterative_scan is its setting, 'off'
        # when reset; before that it is a placeholder that resets to '' (the test alone on a new connection)
        conn.execute("SELECT '[1]'::vector")
        for n in sizes:
            conn.execute("UPDATE lexical_stats SET n_chunks = %s WHERE collection_id = %s", (n, big.collection_id))
            for ef, grow, limit in ((100, 62_500, 20), (40, 1, 60), (7, 3, 5), (1000, 62_500, 10), (100, 0, 20),
                                    (1, 13, 500)):
                conn.execute(queries.SET_HNSW_SCAN, {"collection_id": big.collection_id, "limit": limit, "ef": ef,
                                                     "grow": grow, "iterative": n % 2 == 0})
                got = int(conn.execute("SHOW hnsw.ef_search").fetchone()[0])
                assert got == max(ef_search_at(ef, n, grow), limit), (n, ef, grow, limit)
                assert conn.execute("SHOW hnsw.iterative_scan").fetchone()[0] == \
                    ("relaxed_order" if n % 2 == 0 else "off")
                conn.execute("RESET hnsw.iterative_scan")
        raise psycopg.Rollback()  # the statistics as they were


def test_a_halfvec_collection_walks_a_half_precision_index_and_scores_at_full_precision(
        client: ragd.Ragd, settings: Settings, name: str) -> None:
    """RAGD_VECTOR_TYPE=halfvec: the new collection's HNSW index is over embedding::halfvec(dims), its searches use
    it (recall against exact search as with float4), every score is the full-precision cosine, and the choice is
    pinned: a client configured otherwise opens the collection as it was made."""
    from ragd.store import queries

    half = ragd.connect(settings=settings.model_copy(update={"vector_type": "halfvec"}))
    try:
        col = half.collection(name)
        assert col.ingest(documents=corpus(1200)).count("ingested") == 1200
        assert col.vector_type == "halfvec"
        with half.store.admin() as conn:
            indexdef = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s",
                                    (queries.hnsw_index_name(col.collection_id),)).fetchone()[0]
            conn.execute("ANALYZE chunk_embeddings")
        assert "(embedding)::halfvec(384)" in indexdef and "halfvec_cosine_ops" in indexdef, indexdef
        query, params = vector_sql(col.collection_id, col.embed_model, col.dims, Filters(), exact=False,
                                   vector_type="halfvec")
        with half.store.tenant(col.tenant) as conn:
            conn.execute("SET LOCAL enable_sort = off")
            plan = "\n".join(r[0] for r in conn.execute(b"EXPLAIN " + query.as_bytes(conn), {
                **params, "qvec": col.embedder.embed_query("alpha bravo"), "limit": 50}))
        assert "chunk_embeddings_hnsw_" in plan and "Index Scan" in plan, plan
        found = total = 0
        for q in ("kilo lima mike", "zulu item900", "alpha bravo", "echo golf hotel", "sierra tango"):
            approx = {h.chunk_id: h.score for h in col.search(q, k=10, fusion="vector")}
            exact = {h.chunk_id: h.score for h in col.search(q, k=10, fusion="vector", exact=True)}
            found, total = found + len(approx.keys() & exact.keys()), total + len(exact)
            for chunk in approx.keys() & exact.keys():  # full precision: the exact scan's score to 1e-9
                assert approx[chunk] == pytest.approx(exact[chunk], abs=1e-9)
        assert found / total >= 0.9
    finally:
        half.close()
    full = ragd.connect(settings=settings.model_copy(update={"vector_type": "vector"}))
    try:
        assert full.collection(name).vector_type == "halfvec"  # pinned
        assert full.collection(name + "f").vector_type == "vector"  # this client's choice for new ones
        assert {c["name"]: c["vector_type"] for c in full.collections()}[name] == "halfvec"
    finally:
        full.close()
    assert client.collection(name + "d").vector_type == "halfvec"  # the default for new ones


def test_a_collections_hnsw_breadth_is_pinned_at_creation_through_inserts_and_rebuilds(
        settings: Settings, name: str) -> None:
    """RAGD_HNSW_EF_CONSTRUCTION: the new collection's graph is built at it (pgvector keeps it with the index, so
    later inserts link at it too); a client configured otherwise opens the collection as it was made, rebuilds a
    lost index at the collection's breadth, and makes its own new collections at its own."""
    from ragd.store import queries

    def breadth(client: ragd.Ragd, col: ragd.Collection) -> list[str]:
        with client.store.admin() as conn:
            row = conn.execute("SELECT reloptions FROM pg_class WHERE relname = %s",
                               (queries.hnsw_index_name(col.collection_id),)).fetchone()
        return sorted(row[0]) if row else []

    wide = ragd.connect(settings=settings.model_copy(update={"hnsw_ef_construction": 128}))
    narrow = ragd.connect(settings=settings.model_copy(update={"hnsw_ef_construction": 40}))
    try:
        col = wide.collection(name)
        assert col.ingest(documents=corpus(300)).count("ingested") == 300
        assert (col.ef_construction, breadth(wide, col)) == (128, ["ef_construction=128", "m=16"])
        again = narrow.collection(name)
        assert again.ef_construction == 128  # pinned
        with narrow.store.maintenance() as conn:  # the index lost (as a killed build leaves none valid)
            conn.execute(queries.drop_hnsw_index(col.collection_id))
        assert again.ingest(documents=[{"id": "late", "text": "record late alpha item9999."}]).count("ingested") == 1
        assert breadth(narrow, again) == ["ef_construction=128", "m=16"]  # rebuilt at the collection's breadth
        exact = [h.chunk_id for h in again.search("kilo lima mike", k=10, fusion="vector", exact=True)]
        assert len(set(exact) & {h.chunk_id for h in again.search("kilo lima mike", k=10, fusion="vector")}) >= 9
        other = narrow.collection(name + "n")
        other.ingest(documents=corpus(50))
        assert (other.ef_construction, breadth(narrow, other)) == (40, ["ef_construction=40", "m=16"])
        listed = {c["name"]: c["hnsw_ef_construction"] for c in narrow.collections()}
        assert (listed[name], listed[name + "n"]) == (128, 40)
        with pytest.raises(ValueError, match="hnsw_ef_construction"):
            Settings(hnsw_ef_construction=16)  # pgvector needs at least 2 m
    finally:
        wide.close()
        narrow.close()


def test_hybrid_carries_both_legs(big: ragd.Collection) -> None:
    hits = big.search("item42", k=5, fusion="rrf")
    assert hits[0].external_id == "d0042"
    assert hits[0].lexical_rank == 1 and hits[0].vector_rank is not None
    assert hits[0].fused_score == pytest.approx(1 / 61 + 1 / (60 + hits[0].vector_rank))
    weighted = big.search("item42", k=5, fusion="weighted", keyword_weight=0.7, semantic_weight=0.3)
    assert weighted[0].external_id == "d0042"
    assert all(0 <= h.score <= 1.0 + 1e-9 for h in weighted)


def test_hybrid_legs_run_side_by_side_with_the_same_results_as_one_after_the_other(settings: Settings,
                                                                                  big: ragd.Collection) -> None:
    client = ragd.connect(settings=settings.model_copy(update={"cache_ttl_s": 0}))
    try:
        col = client.collection(big.name)
        for fusion in ("rrf", "weighted"):
            for query, filters in (("item42 record", None), ("alpha bravo charlie", None),
                                   ("delta echo", {"tags_any": ["rare"]}), ("golf hotel", {"metadata": {"group": 3}})):
                debug: dict[str, object] = {}
                two_free_connections(client.store, col.tenant)
                side_by_side = col.search(query, k=10, fusion=fusion, filters=filters, debug=debug)
                assert debug["legs"] == "concurrent"
                assert side_by_side and any(h.vector_rank for h in side_by_side) \
                    and any(h.lexical_rank for h in side_by_side)
                with contextlib.ExitStack() as held:  # every other connection of the tenant's pool taken
                    for _ in range(TENANT_POOL_SIZE - 1):
                        held.enter_context(client.store.tenant(col.tenant))
                    debug = {}
                    alone = col.search(query, k=10, fusion=fusion, filters=filters, debug=debug)
                assert debug["legs"] == "sequential"  # no second connection free: not waited for
                assert alone == side_by_side
        debug = {}
        col.search("item42", k=5, fusion="vector", debug=debug)
        assert "legs" not in debug  # one leg: one connection
    finally:
        client.close()


def test_a_pair_of_reading_sessions_sees_one_snapshot(settings: Settings, name: str) -> None:
    client, other = ragd.connect(settings=settings), ragd.connect(settings=settings)
    count = "SELECT count(*) FROM documents WHERE collection_id = %s"
    try:
        col = client.collection(name)
        col.ingest(documents=[{"id": "a", "text": "Tide tables list high and low water."}])
        two_free_connections(client.store, col.tenant)
        with client.store.reading_pair(col.tenant) as (conn, beside), beside() as spare:
            assert spare is not None and spare is not conn
            # committed by another client after the pair opened: neither session sees it, the second one
            # included (it imported the first one's snapshot; a snapshot of its own would be taken later)
            other.collection(name).ingest(documents=[{"id": "b", "text": "Spring tides follow the full moon."}])
            assert conn.execute(count, (col.collection_id,)).fetchone() == (1,)
            assert spare.execute(count, (col.collection_id,)).fetchone() == (1,)
        two_free_connections(client.store, col.tenant)
        with client.store.reading_pair(col.tenant) as (conn, beside), beside() as spare:
            assert spare is not None and spare.execute(count, (col.collection_id,)).fetchone() == (2,)
            with contextlib.ExitStack() as held:  # every other connection of the pool taken: none beside
                for _ in range(TENANT_POOL_SIZE - 2):
                    held.enter_context(client.store.tenant(col.tenant))
                with beside() as none:
                    assert none is None
        with client.store.reading_pair(col.tenant, pair=False) as (conn, beside):
            assert beside is None and conn.execute(count, (col.collection_id,)).fetchone() == (2,)
    finally:
        client.close()
        other.close()


def test_bad_search_requests_are_refused(big: ragd.Collection) -> None:
    with pytest.raises(InvalidRequest, match="query is empty"):
        big.search("   ")
    with pytest.raises(InvalidRequest, match="k must be"):
        big.search("alpha", k=0)
    with pytest.raises(InvalidRequest, match="unknown filter"):
        big.search("alpha", filters={"color": "red"})
    with pytest.raises(InvalidRequest, match="unknown fusion"):
        big.search("alpha", fusion="magic")


def cand(doc: str, idx: int, score: float, leg: str) -> Candidate:
    return Candidate(chunk_id=uuid.uuid5(uuid.NAMESPACE_URL, f"{doc}/{idx}"), doc_id=uuid.UUID(doc),
                     doc_version_id=uuid.UUID(doc), chunk_index=idx, content=f"{doc}{idx}", score=score,
                     **{f"{leg}_score": score})


D1 = "00000000-0000-0000-0000-000000000001"
D2 = "00000000-0000-0000-0000-000000000002"


def test_rrf_matches_hand_computation() -> None:
    vec = [cand(D1, 0, 0.9, "vector"), cand(D2, 0, 0.8, "vector"), cand(D1, 1, 0.1, "vector")]
    lex = [cand(D2, 0, 7.0, "lexical"), cand(D1, 1, 3.0, "lexical")]
    fused = ragd.fuse([vec, lex], "rrf", {"k": 60})
    scores = {(str(c.doc_id), c.chunk_index): c.score for c in fused}
    assert scores[(D2, 0)] == pytest.approx(1 / 62 + 1 / 61)
    assert scores[(D1, 1)] == pytest.approx(1 / 63 + 1 / 62)
    assert scores[(D1, 0)] == pytest.approx(1 / 61)
    assert [(str(c.doc_id), c.chunk_index) for c in fused] == [(D2, 0), (D1, 1), (D1, 0)]
    assert fused[0].vector_score == 0.8 and fused[0].lexical_score == 7.0


def test_weighted_fusion_normalises_each_leg() -> None:
    vec = [cand(D1, 0, 0.9, "vector"), cand(D2, 0, 0.5, "vector")]
    lex = [cand(D2, 0, 10.0, "lexical"), cand(D1, 0, 5.0, "lexical"), cand(D1, 1, 0.0, "lexical")]
    fused = ragd.fuse([vec, lex], "weighted", {"keyword_weight": 0.25, "semantic_weight": 0.75})
    scores = {(str(c.doc_id), c.chunk_index): c.score for c in fused}
    assert scores[(D1, 0)] == pytest.approx(0.75 * 1.0 + 0.25 * 0.5)
    assert scores[(D2, 0)] == pytest.approx(0.75 * 0.0 + 0.25 * 1.0)
    assert scores[(D1, 1)] == pytest.approx(0.0)


def test_ties_break_by_doc_id_then_chunk_index() -> None:
    tied = [cand(D2, 0, 0.5, "vector"), cand(D1, 3, 0.5, "vector"), cand(D1, 1, 0.5, "vector")]
    fused = ragd.fuse([tied], "weighted")
    assert [(str(c.doc_id), c.chunk_index) for c in fused] == [(D1, 1), (D1, 3), (D2, 0)]


def test_compress_keeps_query_sentences() -> None:
    c = cand(D1, 0, 1.0, "vector")
    c = Candidate(**{**c.__dict__, "content": "Intro line. Parental leave is 14 weeks. Unrelated. Other. Last."})
    out = ragd.compress("parental leave", [c], None)
    assert out[0]["text"] == "Intro line. Parental leave is 14 weeks. Unrelated."
    reranked = ragd.rerank("parental leave", [c])  # the canonical block: the local cross-encoder's score added
    assert [x.chunk_id for x in reranked] == [c.chunk_id] and reranked[0].rerank_score is not None


def test_query_vector_is_normalised(big: ragd.Collection) -> None:
    v = big.embedder.embed_query("alpha")
    assert v.shape == (big.dims,) and abs(float(np.linalg.norm(v)) - 1) < 1e-5


def test_result_cache_serves_repeats_and_invalidates_on_change(settings: Settings, name: str) -> None:
    client = ragd.connect(settings=settings)
    other = ragd.connect(settings=settings)  # another client: its writes must invalidate our cache
    try:
        col = client.collection(name)
        col.ingest(documents=[{"id": "a", "text": "Heat pumps lower energy bills."}])
        first = col.search("heat pumps", k=5)
        info = client.cache.info
        assert (info.hits, info.misses) == (0, 1)
        assert col.search("  heat   pumps ", k=5) == first  # normalised query: same entry
        assert (info.hits, info.misses) == (1, 1)
        assert col.search("heat pumps", k=4) == first[:4] and info.misses == 2  # another plan: its own entry
        other.collection(name).ingest(documents=[{"id": "b", "text": "Heat pumps need yearly service."}])
        after = col.search("heat pumps", k=5)
        assert info.misses == 3
        assert {h.external_id for h in after} == {"a", "b"}
    finally:
        client.close()
        other.close()
    uncached = ragd.connect(settings=settings.model_copy(update={"cache_ttl_s": 0}))
    try:
        col = uncached.collection(name)
        col.search("heat pumps")
        col.search("heat pumps")
        assert (uncached.cache.info.hits, uncached.cache.info.misses) == (0, 0)
    finally:
        uncached.close()


def _active_lexemes(client: ragd.Ragd, col: ragd.Collection,
                    filters: Filters = Filters()) -> dict[object, dict[str, int]]:
    from ragd.store import queries

    where, params = queries.filter_clause(filters)
    with client.store.tenant(col.tenant) as conn:
        lexemes: dict[object, dict[str, int]] = {}
        for chunk, term, tf in conn.execute(sql.SQL(
                "SELECT c.chunk_id, t.lexeme, COALESCE(cardinality(t.positions), 1) FROM chunks c "
                "CROSS JOIN LATERAL unnest(c.lexemes) t WHERE c.collection_id = %(collection_id)s AND c.is_active "
                "AND {}").format(where), {**params, "collection_id": col.collection_id}):
            lexemes.setdefault(chunk, {})[term] = tf
    return lexemes


def _query_terms(client: ragd.Ragd, col: ragd.Collection, text: str) -> list[tuple[str, int]]:
    with client.store.tenant(col.tenant) as conn:
        return [(str(t), int(n)) for t, n in conn.execute(
            "SELECT t.lexeme, COALESCE(cardinality(t.positions), 1) FROM unnest(to_tsvector('english', %s)) t",
            (text,))]


def _lexical(client: ragd.Ragd, col: ragd.Collection, query: str, limit: int, filters: Filters,
             filtered_first: int) -> list[tuple[object, float]]:
    from ragd.retrieve.legs import lexical_leg

    with client.store.tenant(col.tenant) as conn:
        return [(c.chunk_id, c.score) for c in lexical_leg(conn, collection_id=col.collection_id, query=query,
                                                           limit=limit, filters=filters, filtered_first=filtered_first)]


def _assert_reference(got: list[tuple[object, float]], expected: list[tuple[object, float]], limit: int) -> None:
    """Same scores as the reference to 1e-6, and the same chunks except among ties at the cut-off."""
    assert [s for _, s in got] == pytest.approx([s for _, s in expected[:limit]], abs=1e-6)
    cut = expected[limit - 1][1] if len(expected) >= limit else -1.0
    assert {c for c, s in got if s > cut + 1e-6} == {c for c, s in expected[:limit] if s > cut + 1e-6}


@pytest.mark.parametrize("query", ["record alpha bravo item17", "record zulu yankee", "alphabravo charliedelta record",
                                   "record record tango item900 sierra", "echo golf hotel india juliet kilo",
                                   # repeated terms: each occurrence counts
                                   "alpha alpha alpha bravo record", "zulu zulu zulu zulu yankee record record",
                                   "echo echo golf golf golf hotel item5 item5 record"])
def test_bm25_over_blocks_equals_a_reference_with_every_filter_path(client: ragd.Ragd, big: ragd.Collection,
                                                                    query: str) -> None:
    """The block scan, with a filter applied before scoring (its ordinals read first) or after it (on the best
    chunks as they are mapped back), equals a reference BM25 computed from the filtered chunks' own lexemes."""
    every = _active_lexemes(client, big)
    terms = _query_terms(client, big, query)
    for limit in (5, 50):
        for filters in (Filters(), Filters(tags_any=("rare",)), Filters(metadata=(("group", 2),))):
            passing = set(_active_lexemes(client, big, filters))
            expected = [(c, s) for c, s in _reference_bm25(every, terms) if c in passing]
            assert expected, query
            first = _lexical(client, big, query, limit, filters, filtered_first=10**9)
            last = _lexical(client, big, query, limit, filters, filtered_first=0)
            _assert_reference(first, expected, limit)
            assert last == first, (limit, filters)


def test_filters_use_indexes_under_row_level_security(client: ragd.Ragd, big: ragd.Collection) -> None:
    """Tag and metadata filters are text equalities on document_filter_values, so the planner may use its
    btree for a tenant session (array and jsonb operators are not LEAKPROOF and could not be)."""
    from ragd.store import queries

    for filters in (Filters(tags_any=("rare",)), Filters(metadata=(("rare", True),))):
        _, params = queries.filter_clause(filters)
        stmt = queries.count_filtered_sql(filters)
        with client.store.tenant(big.tenant) as conn:
            conn.execute("SET LOCAL enable_seqscan = off")  # small table: ask whether an index *can* serve it
            plan = "\n".join(r[0] for r in conn.execute(
                b"EXPLAIN " + stmt.as_bytes(conn), {**params, "collection_id": big.collection_id, "cap": 100}))
        # the value equality is an index condition on document_filter_values (its lookup index or its primary key,
        # as the planner's costs choose), never a filter applied row by row after a scan
        lines = [line.strip() for line in plan.splitlines()]
        assert not any(line.startswith("Seq Scan on document_filter_values") for line in lines), plan
        assert any(line.startswith("Index Cond:") and "value =" in line for line in lines), plan
        assert not any(line.startswith("Filter:") and "value =" in line for line in lines), plan
        assert len(big.search("record", k=20, filters=filters, fusion="lexical")) == 12


def _reference_bm25(lexemes: dict[object, dict[str, int]], query: list[tuple[str, int]], *, k1: float = 1.2,
                    b: float = 0.75, count_once: bool = False) -> list[tuple[object, float]]:
    """Lucene's BM25 (idf = ln(1 + (N - df + 0.5) / (df + 0.5))), every occurrence of a query term adding its term
    score, computed from scratch in Python over each chunk's (term -> tf); best first."""
    n = len(lexemes)
    lengths = {c: sum(tfs.values()) for c, tfs in lexemes.items()}
    avg = sum(lengths.values()) / n
    df: dict[str, int] = {}
    for tfs in lexemes.values():
        for term in tfs:
            df[term] = df.get(term, 0) + 1
    scores: dict[object, float] = {}
    for term, qtf in query:
        if term not in df:
            continue
        idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
        for chunk, tfs in lexemes.items():
            tf = tfs.get(term, 0)
            if tf:
                part = idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * lengths[chunk] / avg))
                scores[chunk] = scores.get(chunk, 0.0) + part * (1 if count_once else qtf)
    return sorted(scores.items(), key=lambda kv: -kv[1])


def test_the_best_sums_are_the_take_largest_rounded_with_every_tie() -> None:
    """best_sums finds the best of a dense array of BM25 sums through its groups' maxima; against sorting them
    all: zeros (ordinals holding no term), exact ties, sums within a rounding step of each other (equal once
    rounded), groups of every width, and takes from 1 to past the positive count."""
    rng = np.random.default_rng(20261128)
    for case in range(300):
        size = int(rng.integers(1, 5000))
        sums = np.round(rng.gamma(2.0, 3.0, size), int(rng.integers(1, 4)))  # few decimals: many exact ties
        sums[rng.random(size) < rng.random()] = 0.0
        nudged = rng.random(size) < 0.2
        sums[nudged] += rng.choice([3e-10, -3e-10, 7e-10], int(nudged.sum()))  # within a rounding step
        sums = np.where(sums > 0, sums, 0.0)
        positive = int(np.count_nonzero(sums > 0))
        rounded = np.round(sums, 9)
        for take in sorted({1, 2, 7, 60, int(rng.integers(1, size + 2)), positive, positive + 1}):
            if take < 1:
                continue
            if take >= positive:
                expected = np.flatnonzero(sums > 0)
            else:
                threshold = np.sort(rounded[sums > 0])[-take]
                expected = np.flatnonzero((sums > 0) & (rounded >= threshold))
            got = best_sums(sums, take, positive)
            assert np.array_equal(got, expected), (case, size, take)


def test_bm25_scores_equal_a_reference_bm25_on_long_queries(client: ragd.Ragd) -> None:
    """Long natural-language queries that repeat their words (passages of SciFact abstracts outside the corpus)
    over 300 SciFact abstracts: ragd's BM25 top 10 has the scores of a reference BM25 computed from scratch that
    counts each occurrence of a query term (as Lucene does). The pruned paths equal this full scan on repeated
    terms too (test_bm25_pruned_paths_equal_the_full_scan)."""
    lines = (DATA / "beir" / "scifact" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines[:312]]
    col = client.collection("bm25ref" + uuid.uuid4().hex[:8])
    report = col.ingest(documents=[{"id": r["_id"], "title": r["title"], "text": r["text"]} for r in records[:300]])
    assert report.count("ingested") == 300
    with client.store.tenant(col.tenant) as conn:
        lexemes: dict[object, dict[str, int]] = {}
        for chunk, term, tf in conn.execute(
                "SELECT c.chunk_id, t.lexeme, COALESCE(cardinality(t.positions), 1) FROM chunks c "
                "CROSS JOIN LATERAL unnest(c.lexemes) t WHERE c.collection_id = %s AND c.is_active",
                (col.collection_id,)):
            lexemes.setdefault(chunk, {})[term] = tf
        queries = []
        for r in records[300:]:
            text = " ".join(r["text"].split()[:80])
            tokens = conn.execute("SELECT t.lexeme, COALESCE(cardinality(t.positions), 1) "
                                  "FROM unnest(to_tsvector('english', %s)) t", (text,)).fetchall()
            queries.append((text, [(str(t), int(n)) for t, n in tokens]))
    differs = 0
    for text, tokens in queries:
        assert max(n for _, n in tokens) > 1, text  # the query repeats a word
        hits = col.search(text, k=10, fusion="lexical")
        expected = _reference_bm25(lexemes, tokens)[:10]
        assert [h.lexical_score for h in hits] == pytest.approx([s for _, s in expected], abs=1e-6), text
        assert {h.chunk_id for h in hits} == {c for c, _ in expected}, text
        differs += [c for c, _ in _reference_bm25(lexemes, tokens, count_once=True)[:10]] != [c for c, _ in expected]
    assert differs >= 3  # counting each word once ranks these queries differently: the check can fail


def test_the_largest_k_searches_within_pgvectors_ef_search_bound(client: ragd.Ragd, name: str) -> None:
    """k up to MAX_K (1000): the HNSW scan's ef_search grows with the leg's overfetch, and pgvector refuses more
    than 1000 (a k of 999 was a 500 over REST)."""
    from ragd.retrieve.search import MAX_K

    col = client.collection(name)
    col.ingest(documents=[{"id": f"d{n}", "text": f"note {n} about zero and one"} for n in range(5)])
    for fusion in ("vector", "weighted"):
        assert len(col.search("zero", k=MAX_K, fusion=fusion)) == 5
        assert len(col.search("zero", k=MAX_K - 1, fusion=fusion, semantic_weight=0.0)) == 5
