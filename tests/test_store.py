"""Migrations from an empty database; schema constraints; RLS on every tenant-scoped table."""

from __future__ import annotations

import os
import re
import time
import uuid

import psycopg
import pytest

import ragd
from ragd import ids
from ragd.config import Settings
from ragd.engine import Ragd
from ragd.store import Store, embedded, queries
from ragd.store.schema import migrations

from .test_ingest import lexical_stats_consistent

TENANT_TABLES = {
    "tenants", "api_keys", "collections", "documents", "document_versions", "chunks", "chunk_embeddings",
    "lexical_blocks", "lexical_terms", "lexical_stats", "ingestion_runs", "ingestion_items", "query_executions",
    "document_filter_values", "document_minhash", "embedding_cache", "idempotency_keys",
    "ingestion_files", "originals", "evaluations",
}


_INDEXES = ("SELECT tablename, indexdef FROM pg_indexes "
            "WHERE tablename IN ('lexical_blocks', 'document_minhash') ORDER BY 1, 2")
# the postings' blocks keyed by term (migration 21) and the signatures' band keys in a GIN index (migration 24), in
# a new or a migrated store
POSTING_AND_BAND_INDEXES = [
    ("document_minhash", "CREATE INDEX document_minhash_bands ON public.document_minhash USING gin (bands) WITH "
     "(fastupdate=off)"),
    ("document_minhash", "CREATE UNIQUE INDEX document_minhash_pkey ON public.document_minhash USING btree "
     "(doc_version_id, tenant_id)"),
    ("lexical_blocks", "CREATE UNIQUE INDEX lexical_blocks_pkey ON public.lexical_blocks USING btree "
     "(collection_id, term, first_ord, tenant_id)")]


def test_migrations_apply_from_empty_and_are_idempotent(fresh_database: str, settings: Settings) -> None:
    store = Store(fresh_database, settings=settings, migrate=False)
    try:
        assert store.migrate() == [v for v, _, _ in migrations()]
        assert store.schema_version() == max(v for v, _, _ in migrations())
        assert store.migrate() == []  # second run: nothing to do
        with psycopg.connect(fresh_database) as conn:
            assert conn.execute(_INDEXES).fetchall() == POSTING_AND_BAND_INDEXES
            rls = dict(conn.execute(
                "SELECT relname, relrowsecurity FROM pg_class "
                "WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace"
            ).fetchall())
            quals = {r[0]: (r[1], r[2]) for r in conn.execute(
                "SELECT tablename, qual, with_check FROM pg_policies WHERE policyname = 'tenant_isolation'")}
            policies = set(quals)
            ext = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        assert {t for t in TENANT_TABLES if rls.get(t)} == TENANT_TABLES
        assert policies == TENANT_TABLES
        # the tenant of the logged-in role is read once per statement (an InitPlan), not once per row
        initplan = re.compile(r"tenant_id = \(\s*SELECT ragd_tenant\(\)")
        assert all(initplan.search(q) and initplan.search(c) for q, c in quals.values()), quals
        assert ext is not None
    finally:
        store.close()


# Migration 28 undone: the collections' pinned HNSW breadth
UNDO_28 = """
ALTER TABLE collections DROP COLUMN hnsw_ef_construction;
DELETE FROM schema_migrations WHERE version = 28;
"""
# Migration 27 undone: the compactions' count of rewrites (its block replacement is migration 25's again)
UNDO_27 = UNDO_28 + """
ALTER TABLE lexical_stats DROP COLUMN rewrites;
DELETE FROM schema_migrations WHERE version = 27;
"""
# Migration 25 undone: the terms' counts and the block replacement that sets them
UNDO_25 = UNDO_27 + """
DROP FUNCTION ragd_replace_blocks(uuid, text[], integer[], text[], integer[], integer[], integer[], integer[],
                                  integer[], bytea[], bytea[], bytea[], text[], integer[], integer[]);
ALTER TABLE lexical_terms DROP COLUMN posted, DROP COLUMN partial;
DELETE FROM schema_migrations WHERE version = 25;
"""
# Migration 20's layout of the BM25 postings, one row per (term, chunk) with migration 14's two btrees, rebuilt from a
# store of today: the rows are what migration 20's activation statement wrote (the active chunks' lexemes, tf and
# length per posting), its delete function as migration 15 wrote it, and every object migration 21 adds is dropped
# again.
BACK_TO_20 = UNDO_25 + """
CREATE TABLE lexical_postings (
    chunk_id uuid NOT NULL, term text NOT NULL, tenant_id text NOT NULL, collection_id uuid NOT NULL,
    tf integer NOT NULL CHECK (tf > 0), doc_len integer NOT NULL CHECK (doc_len > 0),
    PRIMARY KEY (chunk_id, term, tenant_id) INCLUDE (tf, doc_len));
CREATE INDEX lexical_postings_term ON lexical_postings (collection_id, term) INCLUDE (chunk_id, tf, doc_len, tenant_id);
ALTER TABLE lexical_postings ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON lexical_postings USING (tenant_id = (SELECT ragd_tenant()))
    WITH CHECK (tenant_id = (SELECT ragd_tenant()));
GRANT SELECT, INSERT ON lexical_postings TO ragd_app;
INSERT INTO lexical_postings (chunk_id, term, tenant_id, collection_id, tf, doc_len)
SELECT c.chunk_id, t.lexeme, c.tenant_id, c.collection_id, COALESCE(cardinality(t.positions), 1), l.len
FROM chunks c
CROSS JOIN LATERAL (SELECT sum(COALESCE(cardinality(u.positions), 1))::int AS len FROM unnest(c.lexemes) u) l
CROSS JOIN LATERAL unnest(c.lexemes) t
WHERE c.is_active AND l.len > 0;
{delete_postings}
GRANT EXECUTE ON FUNCTION ragd_delete_postings(uuid[], uuid) TO ragd_app;
DROP TABLE lexical_blocks;
ALTER TABLE chunks DROP COLUMN lex_len, DROP COLUMN lex_ord;
ALTER TABLE lexical_stats DROP COLUMN next_ord, DROP COLUMN blocks_written;
DELETE FROM schema_migrations WHERE version = 21;
"""


def back_to_20() -> str:
    fifteen = next(text for version, _, text in migrations() if version == 15)
    found = re.search(r"CREATE FUNCTION ragd_delete_postings\(.*?\n\$\$;", fifteen, re.S)
    assert found is not None
    return BACK_TO_20.replace("{delete_postings}", found.group(0))
# BM25 as migration 20's ragd ran it over every posting (its full scan): (external id, score), best first, ties
# by (doc_id, chunk_index)
OLD_BM25 = """
WITH q AS (SELECT t.lexeme AS term, COALESCE(cardinality(t.positions), 1) AS qtf
           FROM unnest(to_tsvector('english', %(query)s)) t),
     s AS (SELECT n_chunks, total_len::float8 / n_chunks AS avg FROM lexical_stats WHERE collection_id = %(c)s),
     w AS (SELECT lt.term, q.qtf * ln(1 + (s.n_chunks - lt.df + 0.5) / (lt.df + 0.5)) AS idf
           FROM lexical_terms lt JOIN q ON q.term = lt.term, s WHERE lt.collection_id = %(c)s AND lt.df > 0)
SELECT d.external_id,
       round(sum(w.idf * p.tf * 2.2 / (p.tf + 1.2 * (1 - 0.75 + 0.75 * p.doc_len / s.avg)))::numeric, 9)::float8
FROM w JOIN lexical_postings p ON p.collection_id = %(c)s AND p.term = w.term CROSS JOIN s
JOIN chunks c ON c.chunk_id = p.chunk_id JOIN documents d ON d.doc_id = c.doc_id
GROUP BY d.external_id, c.doc_id, c.chunk_index ORDER BY 2 DESC, c.doc_id, c.chunk_index LIMIT 5"""


def test_a_store_written_before_migration_21_moves_its_postings_into_blocks_and_answers_the_same(
        fresh_database: str, settings: Settings) -> None:
    """A store in migration 20's layout (one row per posting, with replaced and deleted documents' versions
    stored) migrates to blocks: every posting kept, in blocks of at most 128 in ordinal order, each chunk with its
    ordinal; searches answer as the old full scan did; and it still ingests, retires, deletes, compacts and counts
    exactly afterwards, with a new store's indexes."""
    store = Store(fresh_database, settings=settings)
    rag = Ragd(store, settings, None)
    try:
        col = rag.collection("upgraded")
        col.ingest(documents=[{"id": f"d{i}", "text": f"Report {i} on volcano ash, rainfall and crop yields. "
                               f"Section {i} covers sample {i * 7}."} for i in range(300)])
        col.ingest(documents=[{"id": "d3", "text": "Report 3 was withdrawn: volcano ash data under review."}])
        col.delete("d8")
        with store.admin() as conn:
            conn.execute(back_to_20())
            postings = conn.execute("SELECT count(*) FROM lexical_postings").fetchone()[0]
            asked = ["volcano ash", "rainfall crop yields", "sample 21", "withdrawn review", "report report 17"]
            old = {q: conn.execute(OLD_BM25, {"query": q, "c": col.collection_id}).fetchall() for q in asked}
        assert postings > 300 * 8 and all(old.values())
        assert store.migrate() == [21, 25, 27, 28]
        with store.admin() as conn:
            assert conn.execute("SELECT sum(n), max(n) FROM lexical_blocks").fetchone() == (postings, 128)
            assert conn.execute("SELECT to_regclass('lexical_postings')").fetchone() == (None,)
            assert conn.execute(_INDEXES).fetchall() == POSTING_AND_BAND_INDEXES
            assert conn.execute("SELECT count(*) - count(DISTINCT (collection_id, lex_ord)), max(lex_ord) + 1 "
                                "FROM chunks").fetchone() == \
                conn.execute("SELECT 0, next_ord FROM lexical_stats WHERE collection_id = %s",
                             (col.collection_id,)).fetchone()
        for q in asked:
            got = [(h.external_id, h.lexical_score) for h in col.search(q, k=5, fusion="lexical")]
            assert [i for i, _ in got] == [i for i, _ in old[q]], q
            assert [s for _, s in got] == pytest.approx([s for _, s in old[q]], abs=1e-9), q
        lexical_stats_consistent(rag, col)
        col.ingest(documents=[{"id": "d5", "text": "Report 5 replaced: rainfall only."},
                              {"id": "new", "text": "A new report on volcano ash."}])
        col.delete("d3")
        assert {h.external_id for h in col.search("withdrawn review", k=5, fusion="lexical")} == set()
        assert col.compact()["postings_dropped"] > 0
        lexical_stats_consistent(rag, col)
        assert col.search("new report volcano", k=1, fusion="lexical")[0].external_id == "new"
    finally:
        rag.close()


# Migration 24's compaction: the terms to rewrite found by grouping every block of the collection, and the block
# replacement without the terms' counts (migration 21's function)
BACK_TO_24 = UNDO_25 + """
{replace_blocks}
GRANT EXECUTE ON FUNCTION ragd_replace_blocks(uuid, text[], integer[], text[], integer[], integer[], integer[],
                                              integer[], integer[], bytea[], bytea[], bytea[]) TO ragd_app;
"""
OLD_TERMS_TO_COMPACT = """
SELECT b.term FROM lexical_blocks b
LEFT JOIN lexical_terms t ON t.collection_id = b.collection_id AND t.term = b.term
WHERE b.collection_id = %(c)s
GROUP BY b.term, t.df
HAVING COALESCE(t.df, 0) <= 0 OR sum(b.n) > t.df OR count(*) FILTER (WHERE b.n < 128) > 1
ORDER BY b.term"""


def test_a_store_written_before_migration_25_counts_each_terms_blocks_and_compacts_the_same_terms(
        fresh_database: str, settings: Settings) -> None:
    """A store in migration 24's layout (several batches' partial blocks, a replaced and a deleted document's
    postings in them) migrates to terms that count their blocks: the terms a compaction must rewrite, found from
    those counts, are the ones migration 24 found by grouping every block; searches answer the same; and ingest,
    retirement and compaction keep the counts exact afterwards."""
    from .test_ingest import lexical_stats_consistent

    store = Store(fresh_database, settings=settings)
    rag = Ragd(store, settings, None)
    try:
        col = rag.collection("terms-upgraded")
        for part in range(3):  # three runs: three partial blocks of the terms every run holds
            col.ingest(documents=[{"id": f"d{i}", "text": f"Gauge {i} logged river levels, rainfall and silt. "
                                   f"Crew {i % 7} sampled site {i * 13}."} for i in range(part * 40, part * 40 + 40)])
        col.ingest(documents=[{"id": "d3", "text": "Gauge 3 was moved upstream; its river levels restart."}])
        col.delete("d8")
        asked = ["river levels", "rainfall silt", "site 39", "gauge moved upstream"]
        before = {q: [(h.external_id, h.lexical_score) for h in col.search(q, k=5, fusion="lexical")] for q in asked}
        twenty_one = next(text for version, _, text in migrations() if version == 21)
        found = re.search(r"CREATE FUNCTION ragd_replace_blocks\(.*?\n\$\$;", twenty_one, re.S)
        assert found is not None
        with store.admin() as conn:
            conn.execute(BACK_TO_24.replace("{replace_blocks}", found.group(0)))
            old = [r[0] for r in conn.execute(OLD_TERMS_TO_COMPACT, {"c": col.collection_id})]
        assert {"river", "level", "gaug", "rainfal"} <= set(old)  # partial blocks of three runs, a retired posting
        assert store.migrate() == [25, 27, 28]
        with store.admin() as conn:
            now = [r[0] for r in conn.execute(queries.TERMS_TO_COMPACT, {
                "collection_id": col.collection_id, "after": "", "limit": 10**6})]
        assert now == old
        lexical_stats_consistent(rag, col)  # (the counts included)
        assert {q: [(h.external_id, h.lexical_score) for h in col.search(q, k=5, fusion="lexical")]
                for q in asked} == before
        done = col.compact()
        assert done["terms"] == len(old) and done["postings_dropped"] > 0
        with store.admin() as conn:
            assert conn.execute(queries.TERMS_TO_COMPACT, {"collection_id": col.collection_id, "after": "",
                                                          "limit": 10}).fetchall() == []
        lexical_stats_consistent(rag, col)
        col.ingest(documents=[{"id": "d5", "text": "Gauge 5 replaced: silt only."},
                              {"id": "new", "text": "A new gauge on the river."}])
        col.delete("d3")
        lexical_stats_consistent(rag, col)
        assert col.compact()["postings_dropped"] > 0
        lexical_stats_consistent(rag, col)
        assert [h.external_id for h in col.search("new gauge river", k=1, fusion="lexical")] == ["new"]
    finally:
        rag.close()


def test_a_store_written_before_migration_27_counts_its_rewrites_and_answers_the_same_through_kept_postings(
        fresh_database: str, settings: Settings) -> None:
    """A store in migration 26's layout (blocks from several runs, a replaced and a deleted document) migrates to
    collections that count their compactions' rewrites: every block kept, the count 0, searches through postings
    kept in the process answer as before the migration; a compaction that rewrites counts 1 (one that has nothing
    to rewrite counts nothing), and searches after it still answer as a client reading every block does."""
    keeping = settings.model_copy(update={"lexical_cache_min_postings": 1, "cache_ttl_s": 0})
    store = Store(fresh_database, settings=keeping)
    rag = Ragd(store, keeping, None)
    try:
        col = rag.collection("rewrites-upgraded")
        for part in range(3):
            col.ingest(documents=[{"id": f"d{i}", "text": f"Buoy {i} logged tide heights, swell and salinity. "
                                   f"Team {i % 5} checked mooring {i * 11}."}
                                  for i in range(part * 30, part * 30 + 30)])
        col.ingest(documents=[{"id": "d4", "text": "Buoy 4 drifted; its tide heights restart."}])
        col.delete("d9")
        asked = ["tide heights", "swell salinity", "mooring 33", "buoy drifted restart"]

        def answers() -> dict[str, list[tuple[str, float]]]:
            return {q: [(h.external_id, h.lexical_score) for h in col.search(q, k=8, fusion="lexical")]
                    for q in asked}

        before = answers()
        assert rag.postings.info.terms > 0  # their postings are kept
        blocks = "SELECT count(*), sum(n) FROM lexical_blocks WHERE collection_id = %s"
        twenty_five = next(text for version, _, text in migrations() if version == 25)
        found = re.search(r"CREATE FUNCTION ragd_replace_blocks\(.*?\n\$\$;", twenty_five, re.S)
        assert found is not None
        with store.admin() as conn:
            stored = conn.execute(blocks, (col.collection_id,)).fetchone()
            conn.execute(UNDO_27 + found.group(0).replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1))
        assert store.migrate() == [27, 28]
        rewrites = "SELECT rewrites FROM lexical_stats WHERE collection_id = %s"
        with store.admin() as conn:
            assert conn.execute(blocks, (col.collection_id,)).fetchone() == stored
            assert conn.execute(rewrites, (col.collection_id,)).fetchone() == (0,)
        assert answers() == before
        assert col.compact()["rows_after"] > 0
        assert col.compact()["terms"] == 0  # nothing left to rewrite
        with store.admin() as conn:
            assert conn.execute(rewrites, (col.collection_id,)).fetchone() == (1,)
        col.ingest(documents=[{"id": "new", "text": "A new buoy on the swell line."}])
        plain = Ragd(Store(fresh_database, settings=settings), settings, None)
        try:
            again = plain.collection("rewrites-upgraded")
            for q in [*asked, "new buoy swell"]:
                assert [(h.external_id, h.lexical_score) for h in col.search(q, k=8, fusion="lexical")] == \
                    [(h.external_id, h.lexical_score) for h in again.search(q, k=8, fusion="lexical")], q
        finally:
            plain.close()
    finally:
        rag.close()


def test_a_store_written_before_migration_28_keeps_its_graphs_breadth_and_answers_the_same(
        fresh_database: str, settings: Settings) -> None:
    """A store in migration 27's layout (a collection whose graph pgvector built at its default breadth) migrates to
    collections that pin their HNSW breadth: the collection reads 64, its index and rows are untouched, searches
    answer as before, and a lost index is rebuilt at 64 even by a client configured wider for new collections."""
    old = settings.model_copy(update={"hnsw_ef_construction": 64})  # pgvector's default, as every graph before 28
    store = Store(fresh_database, settings=old)
    rag = Ragd(store, old, None)
    wide = settings.model_copy(update={"hnsw_ef_construction": 200})
    later = Ragd(Store(fresh_database, settings=wide), wide, None)
    try:
        col = rag.collection("breadth-upgraded")
        col.ingest(documents=[{"id": f"d{i}", "text": f"Kiln {i} fired glaze batch {i % 7} at cone {i % 11}."}
                              for i in range(120)])
        asked = ["glaze batch 3", "kiln 17 cone", "cone 5 glaze"]

        def answers(c: ragd.Collection) -> dict[str, list[tuple[str, float]]]:
            return {q: [(h.external_id, h.score) for h in c.search(q, k=8)] for q in asked}

        before = answers(col)
        index = "SELECT c.reloptions, pg_relation_size(c.oid) FROM pg_class c WHERE c.relname = %s"
        name = queries.hnsw_index_name(col.collection_id)
        with store.admin() as conn:
            built = conn.execute(index, (name,)).fetchone()
            conn.execute(UNDO_28)
        assert store.migrate() == [28]
        with store.admin() as conn:
            assert conn.execute(index, (name,)).fetchone() == built
            assert conn.execute("SELECT hnsw_ef_construction FROM collections").fetchall() == [(64,)]
        upgraded = later.collection("breadth-upgraded")
        assert upgraded.ef_construction == 64 and answers(upgraded) == before
        with store.maintenance() as conn:
            conn.execute(queries.drop_hnsw_index(col.collection_id))
        upgraded.ingest(documents=[{"id": "late", "text": "Kiln 999 cooled."}])
        with store.admin() as conn:
            assert sorted(conn.execute(index, (name,)).fetchone()[0]) == ["ef_construction=64", "m=16"]
        assert later.collection("breadth-new").ef_construction == 200
    finally:
        later.close()
        rag.close()


# Migration 23's LSH band keys, 32 rows per signature in document_minhash_bands (keyed tenant first, migration 14;
# its delete function as migration 15 wrote it), rebuilt from a store of today; migration 24's objects (and 26's
# lookup function, which replaced 24's) dropped.
BACK_TO_23 = """
DROP INDEX document_minhash_bands;
DROP FUNCTION ragd_band_candidates(uuid, integer[], bigint[]);
CREATE TABLE document_minhash_bands (
    doc_version_id uuid NOT NULL, tenant_id text NOT NULL, collection_id uuid NOT NULL, band_key bigint NOT NULL,
    PRIMARY KEY (tenant_id, collection_id, band_key, doc_version_id));
ALTER TABLE document_minhash_bands ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON document_minhash_bands USING (tenant_id = (SELECT ragd_tenant()))
    WITH CHECK (tenant_id = (SELECT ragd_tenant()));
GRANT SELECT, INSERT ON document_minhash_bands TO ragd_app;
INSERT INTO document_minhash_bands (doc_version_id, tenant_id, collection_id, band_key)
SELECT doc_version_id, tenant_id, collection_id, unnest(bands) FROM document_minhash;
{delete_bands}
GRANT EXECUTE ON FUNCTION ragd_delete_bands(uuid, uuid[], bigint[]) TO ragd_app;
ALTER TABLE document_minhash DROP COLUMN bands;
DELETE FROM schema_migrations WHERE version IN (24, 26);
"""


def test_a_store_written_before_migration_24_moves_its_band_keys_into_the_signatures(
        fresh_database: str, settings: Settings) -> None:
    """A store with migration 23's band rows (replaced and deleted documents' versions among them) migrates to one
    array per signature: every version keeps exactly its 32 keys, the band table and its delete function go, the
    GIN index is a new store's, and a near-duplicate of a document stored before the migration is found after."""
    from ragd.ingest import dedupe

    store = Store(fresh_database, settings=settings)
    rag = Ragd(store, settings, None)
    texts = {f"d{i}": f"Field note {i}: the river {i * 3} rose at the northern gauge after rain on day {i}; "
                      f"crews moved sandbags {i % 5} times and logged sample {i * 11} for the survey."
             for i in range(60)}
    try:
        col = rag.collection("bands-upgraded")
        col.ingest(documents=[{"id": k, "text": v} for k, v in texts.items()])
        col.ingest(documents=[{"id": "d3", "text": "Field note 3 was withdrawn after review of the gauge."}])
        col.delete("d8")
        fifteen = next(text for version, _, text in migrations() if version == 15)
        found = re.search(r"CREATE FUNCTION ragd_delete_bands\(.*?\n\$\$;", fifteen, re.S)
        assert found is not None
        with store.admin() as conn:
            signatures = {v: sorted(dedupe.band_keys(dedupe.from_bytes(sig))) for v, sig in conn.execute(
                "SELECT doc_version_id, signature FROM document_minhash")}
            conn.execute(BACK_TO_23.replace("{delete_bands}", found.group(0)))
            rows = conn.execute("SELECT count(*), count(DISTINCT doc_version_id) "
                                "FROM document_minhash_bands").fetchone()
        assert rows == (32 * len(signatures), len(signatures)) and len(signatures) == 60 - 1 + 1  # d8 gone, d3 twice
        assert store.migrate() == [24, 26]
        with store.admin() as conn:
            moved = {v: sorted(b) for v, b in conn.execute("SELECT doc_version_id, bands FROM document_minhash")}
            assert moved == signatures
            assert conn.execute("SELECT to_regclass('document_minhash_bands')::text").fetchone() == (
                "document_minhash_bands",)  # the name is the GIN index's now
            assert conn.execute("SELECT to_regprocedure('ragd_delete_bands(uuid, uuid[], bigint[])')").fetchone() == (
                None,)
            assert conn.execute(_INDEXES).fetchall() == POSTING_AND_BAND_INDEXES
        again = col.ingest(documents=[{"id": "copy-of-d12", "text": texts["d12"].upper() + "!"}])
        assert again.items[0].status == "duplicate" and "near-duplicate of d12" in (again.items[0].reason or "")
        col.delete("d12")
        with store.admin() as conn:
            assert conn.execute("SELECT count(*) FROM document_minhash").fetchone() == (len(signatures) - 1,)
    finally:
        rag.close()


def test_the_embedded_server_sizes_its_buffers_to_the_machine(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Shared buffers are a quarter of memory, 512 MB to 8 GB (an HNSW graph that does not fit is read from the OS
    page by page on every insert), and the planner is told half of memory is cache; checkpoints come every 15
    minutes or a 16th of the disk's size of WAL (2 to 16 GB); a server started here runs with this machine's."""
    disk = 256 << 30
    assert [embedded.settings(g << 30, disk)["shared_buffers"] for g in (1, 2, 8, 24, 64)] == [
        "512MB", "512MB", "2GB", "6GB", "8GB"]
    assert embedded.settings(24 << 30, disk)["effective_cache_size"] == "12GB"
    assert embedded.settings((24 << 30) - (300 << 20), disk)["shared_buffers"] == "6016MB"  # in steps of 128 MB
    assert [embedded.settings(24 << 30, g << 30)["max_wal_size"] for g in (20, 100, 252, 1000)] == [
        "2GB", "6GB", "15GB", "16GB"]  # a 16th of the disk, 2 to 16 GB
    wanted = embedded.settings(embedded.memory(), embedded.disk(tmp_path))
    url = embedded.start(tmp_path / "pgdata")
    try:
        with psycopg.connect(url) as conn:
            assert conn.execute("SHOW shared_buffers").fetchone() == (wanted["shared_buffers"],)
            assert conn.execute("SHOW effective_cache_size").fetchone() == (wanted["effective_cache_size"],)
            assert conn.execute("SHOW max_wal_size").fetchone() == (wanted["max_wal_size"],)
            assert conn.execute("SHOW checkpoint_timeout").fetchone() == ("15min",)
            conn.execute("CREATE TABLE warm AS SELECT g AS n, repeat('x', 200) AS pad FROM generate_series(1, 20000) g")
            conn.execute("CREATE INDEX warm_n ON warm (n)")
            conn.execute("CREATE EXTENSION pg_buffercache")
            conn.commit()
            assert conn.execute("SELECT count(*) FROM warm WHERE pad <> ''").fetchone() == (20000,)
        embedded.stop(tmp_path / "pgdata")  # (the blocks held are listed at shutdown)
        url = embedded.start(tmp_path / "pgdata")
        with psycopg.connect(url, autocommit=True) as conn:
            size = conn.execute("SELECT pg_relation_size('warm') / current_setting('block_size')::int").fetchone()[0]
            held = 0
            for _ in range(100):  # read back in the background once the server is up
                held = conn.execute("SELECT count(*) FROM pg_buffercache WHERE relfilenode = pg_relation_filenode("
                                    "'warm') AND reldatabase = (SELECT oid FROM pg_database "
                                    "WHERE datname = current_database())").fetchone()[0]
                if held >= size:
                    break
                time.sleep(0.1)
            assert held >= size > 100, (held, size)  # the whole table, none of it read by a query since
    finally:
        embedded.stop(tmp_path / "pgdata")


def test_one_active_version_per_document_is_enforced(client, name) -> None:  # type: ignore[no-untyped-def]
    col = client.collection(name)
    col.ingest(documents=[{"id": "a", "text": "first text"}])
    col.ingest(documents=[{"id": "a", "text": "second text"}])
    with client.store.tenant(col.tenant) as conn:
        doc_id = conn.execute("SELECT doc_id FROM documents WHERE external_id = 'a' AND collection_id = %s",
                              (col.collection_id,)).fetchone()[0]
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute("UPDATE document_versions SET is_active = true WHERE doc_id = %s", (doc_id,))


def test_collection_pins_model_and_dims(client, name) -> None:  # type: ignore[no-untyped-def]
    """The collection's model and dims are fixed at creation; its HNSW index (partial, at those dims) is built
    when its first ingest ends, from every row at once, and searches before that scan exactly."""
    col = client.collection(name)
    assert (col.embed_model, col.dims) == ("hash-v1-384", 384)
    query = ("SELECT i.indexdef, x.indisvalid FROM pg_indexes i JOIN pg_index x ON x.indexrelid = "
             "format('%%I', i.indexname)::regclass WHERE i.indexname LIKE 'chunk_embeddings_hnsw_%%' "
             "AND i.indexdef LIKE %s")
    with client.store.admin() as conn:
        assert conn.execute(query, (f"%{col.collection_id}%",)).fetchone() is None
    col.ingest(documents=[{"id": "a", "text": "Badges open the doors after seven."}])
    with client.store.admin() as conn:
        index = conn.execute(query, (f"%{col.collection_id}%",)).fetchone()
    assert index is not None and "hnsw" in index[0] and "(embedding)::halfvec(384)" in index[0], index
    assert "halfvec_cosine_ops" in index[0]  # the default vector_type
    assert index[1] is True


def test_every_key_between_tenant_tables_is_tenant_scoped(client) -> None:  # type: ignore[no-untyped-def]
    """A unique key another tenant could fill first, or a foreign key that could point into another tenant's
    rows, would let one tenant block or probe another: each must carry tenant_id (collection ids are only ever
    written by ragd's privileged session, derived from the tenant)."""
    with client.store.admin() as conn:
        unique = conn.execute(
            "SELECT c.relname, array_agg(a.attname ORDER BY a.attname) FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indrelid JOIN pg_attribute a ON a.attrelid = c.oid "
            "AND a.attnum = ANY(i.indkey) WHERE i.indisunique AND c.relname = ANY(%s) "
            "GROUP BY c.relname, i.indexrelid", (sorted(TENANT_TABLES),)).fetchall()
        foreign = conn.execute(
            "SELECT conrelid::regclass::text, confrelid::regclass::text, array_agg(a.attname ORDER BY a.attname) "
            "FROM pg_constraint k JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = ANY(k.conkey) "
            "WHERE k.contype = 'f' AND conrelid::regclass::text = ANY(%s) GROUP BY k.oid",
            (sorted(TENANT_TABLES),)).fetchall()
    exempt = {("tenants", "tenant_id"), ("collections", "collection_id"), ("api_keys", "key_id"),
              ("api_keys", "key_hash")}
    loose = [(t, cols) for t, cols in unique
             if "tenant_id" not in cols and "collection_id" not in cols and (t, ",".join(cols)) not in exempt]
    assert loose == []
    assert [f for f in foreign if "tenant_id" not in f[2]] == []
    assert len(foreign) >= 25


def _index_state(client, col) -> bool | None:  # type: ignore[no-untyped-def]
    from ragd.store import queries

    with client.store.admin() as conn:
        row = conn.execute(queries.HNSW_INDEX_VALID, {"name": queries.hnsw_index_name(col.collection_id)}).fetchone()
    return None if row is None else bool(row[0])


def test_a_missing_or_invalid_vector_index_is_rebuilt_by_the_next_ingest(client, name, base_url) -> None:  # type: ignore[no-untyped-def]
    """A build killed half-way leaves an invalid index (the planner ignores it): searches still find every row by
    an exact scan, and the next ingest drops it and builds a valid one. While another process holds the
    collection's build lock, ensure_vector_index leaves the build to it."""
    from ragd.store import queries

    col = client.collection(name)
    col.ingest(documents=[{"id": f"d{i}", "text": f"Topic {i}: badge access rules, floor {i}."} for i in range(30)])
    assert _index_state(client, col) is True
    before = [h.chunk_id for h in col.search("badge access floor 7", k=5, fusion="vector")]
    index = queries.hnsw_index_name(col.collection_id)
    with psycopg.connect(base_url, autocommit=True) as conn:  # what a killed CREATE INDEX CONCURRENTLY leaves
        conn.execute("UPDATE pg_index SET indisvalid = false WHERE indexrelid = to_regclass(%s)", (index,))
    assert _index_state(client, col) is False
    assert [h.chunk_id for h in col.search("badge access floor 7", k=5, fusion="vector")] == before
    with psycopg.connect(base_url, autocommit=True) as other, client.store.exclusive(other, index) as mine:
        assert mine
        assert col.ensure_vector_index() is False  # someone else is building it
        assert _index_state(client, col) is False
    with psycopg.connect(base_url, autocommit=True) as other:  # a builder that was killed holds nothing
        with client.store.exclusive(other, index):
            pid = other.execute("SELECT pg_backend_pid()").fetchone()[0]
            with psycopg.connect(base_url, autocommit=True) as killer:
                killer.execute("SELECT pg_terminate_backend(%s)", (pid,))
    report = col.ingest(documents=[{"id": "late", "text": "Visitors sign in at reception."}])
    assert report.count("ingested") == 1
    assert _index_state(client, col) is True
    assert [h.chunk_id for h in col.search("badge access floor 7", k=5, fusion="vector")] == before
    with psycopg.connect(base_url, autocommit=True) as conn:
        conn.execute(f'DROP INDEX "{index}"')
    assert col.ensure_vector_index() is True and _index_state(client, col) is True


def test_a_parallel_vector_index_build_without_room_in_shared_memory_is_built_serially(
        fresh_database: str, settings: Settings) -> None:
    """A server whose maintenance_work_mem is larger than its /dev/shm (Docker gives 64 MB) fails pgvector's
    parallel build, which takes one shared segment that large: the build is dropped and run again serially, so the
    collection gets its index and the ingest no warning; the pooled session's settings are restored."""
    store_settings = settings.model_copy(update={"database_url": fresh_database})
    ragd.connect(settings=store_settings).close()  # migrated
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        database = conn.execute("SELECT current_database()").fetchone()[0]
        conn.execute(f'ALTER DATABASE "{database}" SET maintenance_work_mem = \'1TB\'')  # more than any /dev/shm
        conn.execute("ALTER TABLE chunk_embeddings SET (parallel_workers = 2)")  # parallel however small
        conn.execute("CREATE TABLE probe (e vector(8))")
        conn.execute("INSERT INTO probe SELECT array_fill(i::real, ARRAY[8])::vector FROM generate_series(1, 50) i")
        conn.execute("ALTER TABLE probe SET (parallel_workers = 2)")
    with psycopg.connect(fresh_database, autocommit=True) as conn, \
            pytest.raises(psycopg.errors.DiskFull, match="shared memory"):  # what the server does without ragd
        conn.execute("CREATE INDEX ON probe USING hnsw (e vector_cosine_ops)")
    rag = ragd.connect(settings=store_settings)
    try:
        col = rag.collection("shm")
        report = col.ingest(documents=[{"id": f"d{i}", "text": f"Room {i} opens with badge {i * 7}."}
                                       for i in range(40)])
        assert report.count("ingested") == 40
        assert col.run(str(report.run_id))["stats"].get("warnings", []) == []
        assert _index_state(rag, col) is True
        with rag.store.maintenance() as conn:
            assert conn.execute("SHOW max_parallel_maintenance_workers").fetchone() == ("2",)
            assert conn.execute("SHOW maintenance_work_mem").fetchone() == ("1TB",)
        hits = col.search("badge 91", k=3, fusion="vector")
        assert hits and hits[0].external_id == "d13"
    finally:
        rag.close()


def test_the_embedded_server_sizes_an_index_builds_memory_to_its_graph(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """pgvector's graph for 1M halfvec(384) rows needs ~1.6 GB, far over the 512 MB configured; the build gets it
    (up to an eighth of memory) and runs in parallel only where /dev/shm holds that much."""
    from ragd.store import queries

    graph = queries.hnsw_graph_bytes(1_000_000, 384, "halfvec")
    assert 1.4e9 < graph < 1.8e9 and queries.hnsw_graph_bytes(1_000_000, 384, "vector") > 2.2e9
    configured = 512 << 20
    size, parallel = embedded.index_build_memory(graph, configured)
    assert size == min(graph, max(configured, embedded.memory() // 8)) >= configured
    assert embedded.index_build_memory(10 << 20, configured)[0] == configured  # never below the setting
    shm = os.statvfs("/dev/shm")
    assert parallel == (shm.f_bavail * shm.f_frsize >= size + (64 << 20))
    assert embedded.index_build_memory(configured, configured, "/proc")[1] is False  # a filesystem with no room
    assert embedded.index_build_memory(configured, configured, str(tmp_path / "missing"))[1] is False


def test_a_store_at_migration_17_keeps_its_rows_through_the_queue_and_the_tenant_keys(
        fresh_database: str, settings: Settings) -> None:
    """Migrations 18 (the job queue, runs' new statuses, bigint item numbers) and 19 (tenant_id in every key) on a
    store with rows: every row kept, the old collection written and searched by this ragd afterwards."""
    with psycopg.connect(fresh_database) as conn:
        conn.execute(queries.CREATE_SCHEMA_MIGRATIONS)
        for version, name, text in migrations():
            if version <= 17:
                conn.execute(text.encode("utf-8"))
                conn.execute(queries.RECORD_MIGRATION, {"version": version, "name": name})
        cid = ids.collection_id("t17", "old")
        conn.execute("INSERT INTO tenants (tenant_id, name) VALUES ('t17', 't17')")
        conn.execute("INSERT INTO collections (collection_id, tenant_id, name, embed_model, embed_dims) "
                     "VALUES (%s, 't17', 'old', 'hash-v1-384', 384)", (cid,))
        conn.execute("INSERT INTO lexical_stats (collection_id, tenant_id) VALUES (%s, 't17')", (cid,))
        conn.execute("INSERT INTO lexical_terms (collection_id, term, tenant_id, df) "
                     "VALUES (%s, 'unused', 't17', 0)", (cid,))
        run = uuid.uuid4()
        conn.execute("INSERT INTO ingestion_runs (run_id, tenant_id, collection_id, status) "
                     "VALUES (%s, 't17', %s, 'succeeded')", (run, cid))
        conn.execute("INSERT INTO ingestion_items (run_id, item_index, tenant_id, source_uri, status) "
                     "VALUES (%s, 5, 't17', 'file:///old.md', 'failed')", (run,))
    store = Store(fresh_database, settings=settings, migrate=False)
    rag = Ragd(store, settings, None)
    try:
        assert store.migrate() == [v for v, _, _ in migrations() if v > 17]
        with store.admin() as conn:
            assert conn.execute("SELECT (SELECT count(*) FROM collections), (SELECT count(*) FROM lexical_terms), "
                                "(SELECT count(*) FROM ingestion_items WHERE item_index = 5)").fetchone() == (1, 1, 1)
        col = rag.collection("old", tenant="t17")
        assert col.collection_id == cid
        col.ingest(documents=[{"id": "a", "text": "Glacier melt raises the river in June."}])
        assert [h.external_id for h in col.search("glacier river", k=3, fusion="lexical")] == ["a"]
        with store.admin() as conn:  # the old statistics row is the one this ragd keeps
            assert conn.execute("SELECT n_chunks FROM lexical_stats WHERE collection_id = %s", (cid,)).fetchone() \
                == (1,)
            with pytest.raises(psycopg.errors.UniqueViolation), conn.transaction():  # the key holds the tenant now
                conn.execute("INSERT INTO documents (doc_id, tenant_id, collection_id, external_id, source_uri, "
                             "source_type) SELECT gen_random_uuid(), tenant_id, collection_id, external_id, "
                             "source_uri, source_type FROM documents WHERE collection_id = %s", (cid,))
    finally:
        rag.close()


def test_compaction_rebuilds_the_blocks_index_once_compactions_have_left_it_sparse(
        fresh_database: str, settings: Settings) -> None:
    """Compaction deletes most of the blocks ingest writes (a partial block per term per run), and a btree never
    merges the pages it leaves nearly empty. `compact` then rebuilds the blocks' index (concurrently): after it the
    index is a fraction of its size, the same blocks are there, searches answer the same, and the next compaction
    leaves the dense index alone. A rebuild blocked by an older transaction gives up after its wait; the invalid
    copy it leaves is dropped by the next."""
    import random

    from ragd.store.blocks import compact as compact_blocks

    store = Store(fresh_database, settings=settings.model_copy(update={"compact_after_blocks": 0}))
    rag = Ragd(store, store.settings, None)
    rng = random.Random(11)
    vocabulary = [f"w{i}" for i in range(1000)]
    try:
        col = rag.collection("sparse-blocks")
        for run in range(24):  # a partial block of nearly every term per run
            col.ingest(documents=[{"id": f"r{run}-{i}", "text": " ".join(rng.choice(vocabulary) for _ in range(60))}
                                  for i in range(40)])
        queries_ = [" ".join(rng.choice(vocabulary) for _ in range(3)) for _ in range(20)]
        before = [[(h.external_id, round(h.score, 9)) for h in col.search(q, k=10, fusion="lexical")] for q in queries_]

        def index() -> tuple[int, int]:
            with store.maintenance() as conn:
                row = conn.execute(queries.BLOCKS_INDEX_FILL).fetchone()
            assert row is not None
            return int(row[1]), int(row[0])

        blocks, pages = index()
        assert blocks > 20_000 and blocks >= 16 * pages, (blocks, pages)  # dense while ingest only adds blocks
        # the runs' partial blocks merged into one block a term (compaction alone, as ingest runs it): the index's
        # pages emptied, not freed
        merged = compact_blocks(lambda: store.tenant(col.tenant), col.collection_id)
        assert merged.terms == len(vocabulary) and merged.rows_after < blocks / 20
        left, pages = index()  # (the merged blocks' entries take a few pages more)
        assert left == blocks - merged.rows_before + merged.rows_after and left < 16 * pages, (left, pages)
        # a rebuild waits for transactions older than it: past its wait it gives up, and the copy it was building
        # (an invalid index, written on every insert) cannot be dropped while that transaction lasts either
        with psycopg.connect(fresh_database) as older:
            older.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            older.execute("SELECT count(*) FROM lexical_blocks")
            assert store.rebuild_sparse_blocks_index(wait="1s") is False
        with store.maintenance() as conn:
            assert conn.execute(queries.BLOCKS_INDEX_FILL).fetchone() == (pages, left, ["lexical_blocks_pkey_ccnew"])
            assert conn.execute("SELECT NOT indisvalid FROM pg_index WHERE indexrelid = "
                                "'lexical_blocks_pkey_ccnew'::regclass").fetchone() == (True,)
        # the next compaction drops it and rebuilds
        done = col.compact()
        assert done["terms"] == 0 and done["index_rebuilt"]
        rebuilt_blocks, rebuilt_pages = index()
        assert rebuilt_blocks == left
        assert rebuilt_pages * 4 <= pages and rebuilt_blocks >= 16 * rebuilt_pages, (rebuilt_blocks, rebuilt_pages)
        with store.maintenance() as conn:
            assert conn.execute("SELECT to_regclass('lexical_blocks_pkey_ccnew')").fetchone() == (None,)
            valid = conn.execute("SELECT indisvalid, indisprimary FROM pg_index "
                                 "WHERE indexrelid = 'lexical_blocks_pkey'::regclass").fetchone()
        assert valid == (True, True)
        assert [[(h.external_id, round(h.score, 9)) for h in col.search(q, k=10, fusion="lexical")]
                for q in queries_] == before
        lexical_stats_consistent(rag, col)
        assert col.compact()["index_rebuilt"] is False  # dense now
    finally:
        rag.close()
