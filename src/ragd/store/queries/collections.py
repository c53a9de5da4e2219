"""Tenants and collections: a collection's row and generation, its HNSW index (built once per collection
across processes, under a claimed lock), the buffer cache's prewarm and the memory an index build may take."""

from __future__ import annotations

import uuid

from psycopg import sql

ENSURE_TENANT = """
INSERT INTO tenants (tenant_id, name) VALUES (%(tenant_id)s, %(tenant_id)s)
ON CONFLICT (tenant_id) DO NOTHING"""

CREATE_COLLECTION = """
INSERT INTO collections (collection_id, tenant_id, name, embed_model, embed_dims, chunk_policy, vector_type,
                         hnsw_ef_construction)
VALUES (%(collection_id)s, %(tenant_id)s, %(name)s, %(embed_model)s, %(embed_dims)s, %(chunk_policy)s,
        %(vector_type)s, %(hnsw_ef_construction)s)
ON CONFLICT (tenant_id, name) DO NOTHING"""

INIT_LEXICAL_STATS = """
INSERT INTO lexical_stats (collection_id, tenant_id) VALUES (%(collection_id)s, %(tenant_id)s)
ON CONFLICT (collection_id, tenant_id) DO NOTHING"""

GET_COLLECTION = """
SELECT collection_id, tenant_id, name, embed_model, embed_dims, chunk_policy, generation, created_at, vector_type,
       hnsw_ef_construction
FROM collections WHERE name = %(name)s"""

LIST_COLLECTIONS = """
SELECT c.name, c.embed_model, c.embed_dims, c.vector_type, c.hnsw_ef_construction, c.created_at,
       (SELECT count(*) FROM documents d WHERE d.collection_id = c.collection_id) AS documents,
       (SELECT count(*) FROM chunks k WHERE k.collection_id = c.collection_id AND k.is_active) AS chunks,
       (SELECT coalesce(sum(k.token_count), 0) FROM chunks k
        WHERE k.collection_id = c.collection_id AND k.is_active) AS tokens,
       (SELECT coalesce(sum(o.size), 0) FROM originals o WHERE o.tenant_id = c.tenant_id AND o.sha256 IN (
            SELECT v.source_sha256 FROM document_versions v JOIN documents d ON d.doc_id = v.doc_id
            WHERE d.collection_id = c.collection_id)) AS original_bytes
FROM collections c ORDER BY c.name"""

COLLECTION_GENERATION = "SELECT generation FROM collections WHERE collection_id = %(collection_id)s"

BUMP_GENERATION = "UPDATE collections SET generation = generation + 1 WHERE collection_id = %(collection_id)s"


def hnsw_index_name(collection_id: uuid.UUID) -> str:
    return f"chunk_embeddings_hnsw_{collection_id.hex[:16]}"


VECTOR_TYPES = {"vector": "vector_cosine_ops", "halfvec": "halfvec_cosine_ops"}


def index_literals(collection_id: uuid.UUID, embed_model: str, dims: int,
                    vector_type: str = "vector") -> dict[str, sql.Composable]:
    """The partial HNSW index's predicate and cast as literals: a query must repeat them to match the index."""
    if vector_type not in VECTOR_TYPES:
        raise ValueError(f"unknown vector type {vector_type!r}")
    return {"dims": sql.Literal(int(dims)), "cid": sql.Literal(str(collection_id)), "model": sql.Literal(embed_model),
            "type": sql.SQL(vector_type), "ops": sql.SQL(VECTOR_TYPES[vector_type])}


def create_hnsw_index(collection_id: uuid.UUID, embed_model: str, dims: int, vector_type: str = "vector",
                      ef_construction: int = 64) -> sql.Composed:
    """A partial HNSW cosine index over one collection's active embeddings, at its dimensions and precision
    (`halfvec`: the vectors cast to half precision) and its graph's breadth (ef_construction: pgvector keeps it
    with the index, and every later insert links its vector at it). Built concurrently (outside a transaction):
    other tenants keep writing to chunk_embeddings while it builds."""
    return sql.SQL(
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON chunk_embeddings "
        "USING hnsw ((embedding::{type}({dims})) {ops}) WITH (m = 16, ef_construction = {efc}) "
        "WHERE collection_id = {cid} AND embed_model = {model} AND is_active"
    ).format(name=sql.Identifier(hnsw_index_name(collection_id)), efc=sql.Literal(int(ef_construction)),
             **index_literals(collection_id, embed_model, dims, vector_type))


def hnsw_graph_bytes(rows: int, dims: int, vector_type: str) -> int:
    """About what pgvector's HNSW build holds in memory for `rows` vectors at m = 16: each element's vector plus
    ~720 bytes of element and neighbour lists (measured: a 32 MB build holds 22.6k halfvec(384) elements, 1,483
    bytes each, or 14.9k vector(384), 2,252 bytes), a tenth more for slack."""
    return int(rows * (720 + dims * (2 if vector_type == "halfvec" else 4)) * 1.1)


def drop_hnsw_index(collection_id: uuid.UUID) -> sql.Composed:
    name = sql.Identifier(hnsw_index_name(collection_id))
    return sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {name}").format(name=name)


# The rows a collection's HNSW index holds (sizes its build's memory).
INDEXED_ROWS = ("SELECT count(*) FROM chunk_embeddings WHERE collection_id = %(collection_id)s "
                "AND embed_model = %(embed_model)s AND is_active")

# Ingest's read-ahead (ragd.ingest.prefetch): the pages of the schema's relations of these names, and reading them.
RELATION_PAGES = """
SELECT r, (pg_relation_size(to_regclass(r)) / current_setting('block_size')::int)::int
FROM unnest(%(names)s::text[]) AS r WHERE to_regclass(r) IS NOT NULL ORDER BY r"""

# The valid indexes of these tables (of the schema): name, access method, pages.
TABLE_INDEXES = """
SELECT c.relname, am.amname, (pg_relation_size(c.oid) / current_setting('block_size')::int)::int
FROM unnest(%(tables)s::text[]) AS x(name)
JOIN pg_class t ON t.oid = to_regclass(x.name)
JOIN pg_index i ON i.indrelid = t.oid AND i.indisvalid
JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_am am ON am.oid = c.relam
ORDER BY c.relname"""

CREATE_PREWARM = "CREATE EXTENSION IF NOT EXISTS pg_prewarm"

# The extension's functions are everyone's by default: a tenant's SQL could load whole tables into the shared
# buffers (pushing out what other tenants' searches use) or have the server dump and restart its prewarm worker.
# Only the session user (their owner) keeps them.
REVOKE_PREWARM = """
DO $$
DECLARE f regprocedure;
BEGIN
    FOR f IN SELECT d.objid::regprocedure FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
             WHERE e.extname = 'pg_prewarm' AND d.classid = 'pg_proc'::regclass AND d.deptype = 'e' LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
    END LOOP;
END $$"""

PREWARM_SCHEMA = """
SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_prewarm'"""


def prewarm(schema: str) -> sql.Composed:
    """Each relation of these names read by the extension (in `schema`), one after the other in the given order:
    the pages read."""
    return sql.SQL("SELECT r, {schema}.pg_prewarm(to_regclass(r), 'read') "
                   "FROM unnest(%(names)s::text[]) WITH ORDINALITY AS x(r, n) "
                   "WHERE to_regclass(r) IS NOT NULL ORDER BY n").format(schema=sql.Identifier(schema))


# One index build's memory and parallelism, in the maintenance session only; RESET afterwards.
MAINTENANCE_MEMORY = "SELECT pg_size_bytes(current_setting('maintenance_work_mem'))"
SET_MAINTENANCE_MEMORY = "SELECT set_config('maintenance_work_mem', %(kb)s, false)"
SERIAL_MAINTENANCE = "SET max_parallel_maintenance_workers = 0"
RESET_MAINTENANCE = "RESET maintenance_work_mem; RESET max_parallel_maintenance_workers"
# Whether the collection's HNSW index exists and is valid (a build that was killed leaves an invalid one).
HNSW_INDEX_VALID = "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%(name)s)"
# One index build per collection at a time, across processes: the builder's backend claims the row of ragd_locks
# named after the index (a claim by a backend that no longer runs has lapsed). No tenant can read or change those
# rows; an advisory lock's key any role could take.
ADD_LOCK = "INSERT INTO ragd_locks (name) VALUES (%(name)s) ON CONFLICT DO NOTHING"
CLAIM_LOCK = """
UPDATE ragd_locks l SET holder_pid = me.pid, holder_start = me.backend_start
FROM (SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()) me
WHERE l.name = %(name)s AND (l.holder_pid IS NULL OR NOT EXISTS (
    SELECT 1 FROM pg_stat_activity a WHERE a.pid = l.holder_pid AND a.backend_start = l.holder_start))
RETURNING 1"""
RELEASE_LOCK = """
UPDATE ragd_locks SET holder_pid = NULL, holder_start = NULL WHERE name = %(name)s AND holder_pid = pg_backend_pid()"""
