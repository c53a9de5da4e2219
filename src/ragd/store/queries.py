"""Every SQL statement ragd runs. Templates are constant strings; names go through sql.Identifier and
values through parameters (or sql.Literal for the constants a partial index must see)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from psycopg import sql

from ..types import Filters

# -- sessions and migrations ---------------------------------------------------------------------

# Run on a pooled connection before it serves again: whatever SQL in the last session left behind is undone.
RESET_SESSION = ("RESET ALL", "RESET ROLE", "DISCARD TEMP", "UNLISTEN *", "SELECT pg_advisory_unlock_all()")
READ_SECRET = "SELECT secret FROM ragd_secret"
# Creating tenant roles is serialised across processes by a row of ragd_locks, which no tenant can read or lock
# (an advisory lock's key can be taken by any role: a tenant holding it stalled every new process's tenants).
# Role names are keyed by each database's own secret, so two databases of a cluster never create the same role.
TENANT_ROLE_LOCK = "SELECT 1 FROM ragd_locks WHERE name = 'tenant_roles' FOR UPDATE"
ROLE_EXISTS = "SELECT 1 FROM pg_roles WHERE rolname = %(role)s"
TENANT_MAPPED = "SELECT 1 FROM tenant_roles WHERE tenant_id = %(tenant_id)s AND role_name = %(role)s"
MAP_TENANT_ROLE = """
INSERT INTO tenant_roles (role_name, tenant_id) VALUES (%(role)s, %(tenant_id)s) ON CONFLICT DO NOTHING"""
CURRENT_TENANT = "SELECT ragd_tenant()"
# A tenant login's check: its attributes, and whether settings are stored for it (by ALTER ROLE ... SET).
# Read by the login being checked: its role is the session user (a stored `role` setting makes current_user another
# role at login), with what is stored for it, for every database and for this one.
SET_LOCAL_LOCK_TIMEOUT = "SELECT set_config('lock_timeout', %s, true)"
LOGIN_CHECK = """
SELECT r.rolsuper, r.rolbypassrls, r.rolconnlimit,
       (SELECT s.setconfig FROM pg_db_role_setting s WHERE s.setrole = r.oid AND s.setdatabase = 0),
       (SELECT s.setconfig FROM pg_db_role_setting s WHERE s.setrole = r.oid AND s.setdatabase = d.oid)
FROM pg_roles r, pg_database d WHERE r.rolname = session_user AND d.datname = current_database()"""


def repair_tenant_role(role: str, password: str, database: str, connection_limit: int) -> list[sql.Composed]:
    """A tenant role's login as ragd made it: its password, its connection limit, no stored settings (its
    attributes a tenant cannot change, and the login check refuses a role with more than a tenant's). The limits
    ragd stores for it are set afterwards (tenant_role_limits)."""
    name = sql.Identifier(role)
    return [sql.SQL("ALTER ROLE {role} LOGIN PASSWORD {password} CONNECTION LIMIT {limit}").format(
                role=name, password=sql.Literal(password), limit=sql.Literal(connection_limit)),
            sql.SQL("ALTER ROLE {role} RESET ALL").format(role=name),
            sql.SQL("ALTER ROLE {role} IN DATABASE {db} RESET ALL").format(role=name, db=sql.Identifier(database))]


def tenant_role_limits(role: str, temp_file_limit_kb: int) -> sql.Composed:
    """The setting stored for a tenant role that its sessions cannot change (only a superuser, or a role granted SET
    on it, may set temp_file_limit): the temporary files one of its statements may write."""
    return sql.SQL("ALTER ROLE {role} SET temp_file_limit = {kb}").format(role=sql.Identifier(role),
                                                                       kb=sql.Literal(temp_file_limit_kb))


def create_tenant_role(role: str, password: str, connection_limit: int) -> sql.Composed:
    """A login role for one tenant: no privilege of its own beyond ragd_app's, row-level security applies, at most
    `connection_limit` sessions at once."""
    return sql.SQL(
        "CREATE ROLE {role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS NOREPLICATION "
        "CONNECTION LIMIT {limit} PASSWORD {password} IN ROLE ragd_app"
    ).format(role=sql.Identifier(role), password=sql.Literal(password), limit=sql.Literal(connection_limit))


CREATE_SCHEMA_MIGRATIONS = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)"""
APPLIED_MIGRATIONS = "SELECT version FROM schema_migrations ORDER BY version"
RECORD_MIGRATION = "INSERT INTO schema_migrations (version, name) VALUES (%(version)s, %(name)s)"
SCHEMA_VERSION = "SELECT max(version) FROM schema_migrations"
# Migrations are serialised by a lock on their own table, which no tenant role may read or lock.
MIGRATION_LOCK = "LOCK TABLE schema_migrations IN SHARE ROW EXCLUSIVE MODE"

# -- tenants and collections -----------------------------------------------------------------------

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


def _index_literals(collection_id: uuid.UUID, embed_model: str, dims: int,
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
             **_index_literals(collection_id, embed_model, dims, vector_type))


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


# -- documents and versions ------------------------------------------------------------------------

# A batch's documents, versions, chunks, embeddings and items are each written in one statement from arrays (one
# element per row), not a statement per row: the server parses, plans and checks once per batch. The arrays go in
# binary (%()b): a vector array sent as text costs the server ~40x more to read.
UPSERT_DOCUMENTS = """
INSERT INTO documents (doc_id, tenant_id, collection_id, external_id, source_uri, source_type, title, tags, metadata)
SELECT d, %(tenant_id)s, %(collection_id)s, e, u, s, t, ARRAY(SELECT jsonb_array_elements_text(g::jsonb)), m::jsonb
FROM unnest(%(doc_ids)b::uuid[], %(external_ids)b::text[], %(source_uris)b::text[], %(source_types)b::text[],
            %(titles)b::text[], %(tags)b::text[], %(metadata)b::text[]) AS x(d, e, u, s, t, g, m)
ON CONFLICT (doc_id, tenant_id) DO UPDATE SET
    source_uri = EXCLUDED.source_uri, source_type = EXCLUDED.source_type, title = EXCLUDED.title,
    tags = EXCLUDED.tags, metadata = EXCLUDED.metadata, updated_at = now()
WHERE (documents.source_uri, documents.source_type, documents.title, documents.tags, documents.metadata)
      IS DISTINCT FROM (EXCLUDED.source_uri, EXCLUDED.source_type, EXCLUDED.title, EXCLUDED.tags, EXCLUDED.metadata)"""

LOCK_DOCUMENT = "SELECT doc_id FROM documents WHERE doc_id = %(doc_id)s FOR UPDATE"

# Planning a batch of documents takes three queries, whatever its size.
BATCH_DOCUMENT_STATE = """
SELECT d.doc_id, d.tags, d.metadata, d.title, v.doc_version_id, v.content_hash,
       (SELECT count(*) FROM document_versions x WHERE x.doc_id = d.doc_id) AS versions, v.source_sha256
FROM documents d
LEFT JOIN document_versions v ON v.doc_id = d.doc_id AND v.is_active
WHERE d.doc_id = ANY(%(doc_ids)s)"""

BATCH_ACTIVE_WITH_HASH = """
SELECT v.content_hash, d.doc_id, d.external_id FROM document_versions v JOIN documents d USING (doc_id)
WHERE v.is_active AND v.content_hash = ANY(%(hashes)s) AND d.collection_id = %(collection_id)s
ORDER BY d.external_id"""

BATCH_KNOWN_VERSIONS = """
SELECT doc_id, content_hash FROM document_versions WHERE doc_id = ANY(%(doc_ids)s)"""

INSERT_VERSIONS = """
INSERT INTO document_versions (doc_version_id, tenant_id, doc_id, version_label, content_hash, artifact_uri,
                               chunk_count, effective_at, source_sha256, source_name, media_type)
SELECT v, %(tenant_id)s, d, l, h, a, n, COALESCE(e::timestamptz, now()), s, sn, mt
FROM unnest(%(versions)b::uuid[], %(doc_ids)b::uuid[], %(labels)b::text[], %(hashes)b::text[], %(artifacts)b::text[],
            %(counts)b::int[], %(effective)b::text[], %(sources)b::text[], %(source_names)b::text[],
            %(media_types)b::text[]) AS x(v, d, l, h, a, n, e, s, sn, mt)"""

# Versions stored without their original (before originals were kept) get it when the same content is ingested
# again from a file.
ATTACH_SOURCES = """
UPDATE document_versions v SET source_sha256 = x.s, source_name = x.n, media_type = x.m
FROM unnest(%(versions)s::uuid[], %(sources)s::text[], %(names)s::text[], %(types)s::text[]) AS x(v, s, n, m)
WHERE v.doc_version_id = x.v AND v.source_sha256 IS NULL"""

INSERT_MINHASH = """
INSERT INTO document_minhash (doc_version_id, tenant_id, collection_id, doc_id, signature, bands)
SELECT v, %(tenant_id)s, %(collection_id)s, d, s, b::bigint[]
FROM unnest(%(versions)b::uuid[], %(doc_ids)b::uuid[], %(signatures)b::bytea[], %(bands)b::text[]) AS x(v, d, s, b)
ON CONFLICT DO NOTHING"""

# Stored signatures sharing at least one LSH band with a batch's documents (`docs[i]` the document of band key
# `keys[i]`), each once with the batch's documents it shares a band with; through the definer function, whose GIN
# lookup runs once per document of the batch (the array operator cannot use the index under row-level security)
# and returns the signature its heap visit read. Whether a candidate's version is active, and its document's
# external id, are read afterwards (ACTIVE_CANDIDATES) for the few similar enough to matter: at 1M drawn chunks a
# document shares a band with ~9 stored ones, 1 in 6 of them at similarity 0.5 or more.
NEAR_DUPLICATE_CANDIDATES = """
SELECT doc_version_id, doc_id, signature, docs
FROM ragd_band_candidates(%(collection_id)s, %(docs)s::integer[], %(keys)s::bigint[])
ORDER BY doc_version_id"""

ACTIVE_CANDIDATES = """
SELECT v.doc_version_id, d.external_id
FROM document_versions v JOIN documents d ON d.doc_id = v.doc_id
WHERE v.doc_version_id = ANY(%(versions)s::uuid[]) AND v.is_active"""

# A new version's chunks and embeddings are written active: they are written in the transaction that activates
# the version (and retires the old one), so no other session sees them before that commits, and activation does
# not rewrite every row (and re-insert it into every index, the HNSW graph included) a second time.
INSERT_CHUNKS = """
WITH base AS (  -- the chunks' BM25 ordinals, taken from the collection's counter (held to the end of the transaction)
    UPDATE lexical_stats SET next_ord = next_ord + cardinality(%(chunk_ids)b::uuid[])
    WHERE collection_id = %(collection_id)s RETURNING next_ord - cardinality(%(chunk_ids)b::uuid[]) AS first)
INSERT INTO chunks (chunk_id, tenant_id, collection_id, doc_id, doc_version_id, chunk_index, heading_path,
                    chunk_type, content, content_hash, token_count, tags, metadata, effective_at, lexemes, is_active,
                    lex_ord, lex_len)
SELECT c, %(tenant_id)s, %(collection_id)s, d, v, i, hp::jsonb, ty, ct, ch, tc,
       ARRAY(SELECT jsonb_array_elements_text(g::jsonb)), m::jsonb, COALESCE(e::timestamptz, now()),
       lx.tsv, true, (SELECT first FROM base) + (n - 1)::integer, ln.len
FROM unnest(%(chunk_ids)b::uuid[], %(doc_ids)b::uuid[], %(versions)b::uuid[], %(indexes)b::int8[],
            %(heading_paths)b::text[], %(types)b::text[], %(contents)b::text[], %(hashes)b::text[], %(tokens)b::int[],
            %(tags)b::text[], %(metadata)b::text[], %(effective)b::text[], %(search_texts)b::text[],
            %(lexemes)b::text[])
     WITH ORDINALITY AS x(c, d, v, i, hp, ty, ct, ch, tc, g, m, e, st, lt, n)
-- a chunk's lexemes as LEXEMES gave them before the transaction, else made here (OFFSET 0: once, not per use)
CROSS JOIN LATERAL (SELECT COALESCE(lt::tsvector, to_tsvector('english', st)) AS tsv OFFSET 0) lx
-- the BM25 length: every occurrence of every lexeme
CROSS JOIN LATERAL (SELECT COALESCE(sum(COALESCE(cardinality(u.positions), 1)), 0)::integer AS len
                    FROM unnest(lx.tsv) u) ln"""

# The lexemes of chunks' search texts, in order (as text: tsvector's output reads back as the same value), made
# outside the transaction that stores them, on another connection, while the batch before is written.
LEXEMES = """
SELECT to_tsvector('english', s)::text FROM unnest(%(texts)b::text[]) WITH ORDINALITY AS x(s, n) ORDER BY n"""

INSERT_EMBEDDINGS = """
INSERT INTO chunk_embeddings (chunk_id, tenant_id, collection_id, embed_model, embedding, is_active)
SELECT c, %(tenant_id)s, %(collection_id)s, %(embed_model)s, v, true
FROM unnest(%(chunk_ids)b::uuid[], %(embeddings)b::vector[]) AS x(c, v)"""

# Tags and metadata changed while the content did not: update the live chunks in place.
UPDATE_CHUNK_TAGS = "UPDATE chunks SET tags = %(tags)s WHERE doc_version_id = %(doc_version_id)s"

# Rewrite the filter values of documents whose tags or metadata may have changed.
# (Tenant sessions delete through SECURITY DEFINER functions: tenant roles hold no DELETE privilege, which would let
# them lock a table against every tenant; see migration 0015.)
CLEAR_FILTER_VALUES = "SELECT ragd_delete_filter_values(%(doc_ids)s::uuid[])"
WRITE_FILTER_VALUES = """
INSERT INTO document_filter_values (doc_id, tenant_id, collection_id, field, value)
SELECT d.doc_id, d.tenant_id, d.collection_id, 'tags', t FROM documents d, unnest(d.tags) t
WHERE d.doc_id = ANY(%(doc_ids)s)
UNION
SELECT d.doc_id, d.tenant_id, d.collection_id, 'metadata.' || m.key, m.value::text
FROM documents d, jsonb_each(d.metadata) m WHERE d.doc_id = ANY(%(doc_ids)s)"""

# Retiring and activating versions keeps chunks, embeddings and the BM25 statistics in step.
# Each list runs in order, in the caller's transaction, for an array of version ids. A retired version's postings stay
# in their blocks (lexical_blocks): search maps ordinals to active chunks only, and compaction drops them later.
RETIRE_VERSIONS = [
    """UPDATE lexical_terms t SET df = t.df - x.n
       FROM (SELECT c.collection_id, u.lexeme COLLATE "C" AS term, count(*) AS n
             FROM chunks c CROSS JOIN LATERAL unnest(c.lexemes) u
             WHERE c.doc_version_id = ANY(%(versions)s) AND c.is_active AND c.lex_len > 0
             GROUP BY 1, 2 ORDER BY 2) x
       WHERE t.collection_id = x.collection_id AND t.term = x.term""",
    """UPDATE lexical_stats s SET n_chunks = s.n_chunks - x.n, total_len = s.total_len - x.len
       FROM (SELECT collection_id, count(*) AS n, sum(lex_len) AS len FROM chunks
             WHERE doc_version_id = ANY(%(versions)s) AND is_active AND lex_len > 0 GROUP BY collection_id) x
       WHERE s.collection_id = x.collection_id""",
    """UPDATE chunk_embeddings e SET is_active = false FROM chunks c
       WHERE c.chunk_id = e.chunk_id AND c.doc_version_id = ANY(%(versions)s) AND e.is_active""",
    "UPDATE chunks SET is_active = false WHERE doc_version_id = ANY(%(versions)s) AND is_active",
    "UPDATE document_versions SET is_active = false WHERE doc_version_id = ANY(%(versions)s) AND is_active",
]

ACTIVATE_VERSIONS = [
    "UPDATE document_versions SET is_active = true WHERE doc_version_id = ANY(%(versions)s)",
    # (a new version's rows are written active, with their ordinals; these reactivate an earlier version's, under
    # new ordinals: blocks may still hold the old ones, which map to no active chunk)
    """WITH todo AS (SELECT chunk_id, (row_number() OVER (ORDER BY doc_version_id, chunk_index) - 1)::integer AS i
                    FROM chunks WHERE doc_version_id = ANY(%(versions)s) AND NOT is_active),
            base AS (UPDATE lexical_stats SET next_ord = next_ord + (SELECT count(*) FROM todo)
                     WHERE collection_id = %(collection_id)s AND EXISTS (SELECT FROM todo)
                     RETURNING next_ord - (SELECT count(*) FROM todo)::integer AS first)
       UPDATE chunks c SET is_active = true, lex_ord = base.first + todo.i
       FROM todo, base WHERE c.chunk_id = todo.chunk_id""",
    """UPDATE chunk_embeddings e SET is_active = true FROM chunks c
       WHERE c.chunk_id = e.chunk_id AND c.doc_version_id = ANY(%(versions)s) AND NOT e.is_active""",
    # one block per term for the versions' chunks, then the document frequencies from the blocks just written and
    # the length statistics from the chunks (one statement: the new rows are not read back through their index).
    # Terms are grouped and ordered byte-wise (COLLATE "C"): the same order for every writer, without the cost of a
    # locale's comparisons (a third of this statement under C.UTF-8)
    """WITH posted AS (
         INSERT INTO lexical_blocks (collection_id, term, first_ord, tenant_id, last_ord, n, max_tf, min_len, ords,
                                     tfs, lens)
         SELECT collection_id, term, min(ord), tenant_id, max(ord), count(*), max(tf), min(len),
                string_agg(int4send(ord), ''::bytea ORDER BY ord),
                string_agg(int2send(tf::smallint), ''::bytea ORDER BY ord),
                string_agg(int4send(len), ''::bytea ORDER BY ord)
         FROM (SELECT c.collection_id, c.tenant_id, t.lexeme COLLATE "C" AS term, c.lex_ord AS ord,
                      COALESCE(cardinality(t.positions), 1) AS tf, c.lex_len AS len
               FROM chunks c CROSS JOIN LATERAL unnest(c.lexemes) t
               WHERE c.doc_version_id = ANY(%(versions)s) AND c.lex_len > 0) p
         GROUP BY collection_id, term, tenant_id ORDER BY term
         RETURNING collection_id, term, tenant_id, n
       ), counted AS (
         -- (each term counts what its blocks hold: a block of fewer than blocks.BLOCK = 128 postings is partial)
         INSERT INTO lexical_terms (collection_id, term, tenant_id, df, posted, partial)
         SELECT collection_id, term, tenant_id, n, n, (n < 128)::integer FROM posted ORDER BY term COLLATE "C"
         ON CONFLICT (collection_id, term, tenant_id) DO UPDATE SET df = lexical_terms.df + EXCLUDED.df,
             posted = lexical_terms.posted + EXCLUDED.posted, partial = lexical_terms.partial + EXCLUDED.partial
       )
       UPDATE lexical_stats s SET n_chunks = s.n_chunks + x.n, total_len = s.total_len + x.len,
                                 blocks_written = s.blocks_written + (SELECT count(*) FROM posted)
       FROM (SELECT collection_id, count(*) AS n, sum(lex_len) AS len FROM chunks
             WHERE doc_version_id = ANY(%(versions)s) AND lex_len > 0 GROUP BY collection_id) x
       WHERE s.collection_id = x.collection_id""",
]

# A collection's documents, found by a piece of the title or external id (case-insensitive), a tag and a source
# type (each optional), with the active version's label, chunks, original's size and media type, and how many
# versions each has.
LIST_DOCUMENTS = """
SELECT d.doc_id, d.external_id, d.title, d.source_type, d.tags, v.version_label, v.chunk_count, d.updated_at,
       v.media_type, v.source_name, o.size,
       (SELECT count(*) FROM document_versions a WHERE a.doc_id = d.doc_id) AS versions
FROM documents d LEFT JOIN document_versions v ON v.doc_id = d.doc_id AND v.is_active
LEFT JOIN originals o ON o.tenant_id = v.tenant_id AND o.sha256 = v.source_sha256
WHERE d.collection_id = %(collection_id)s
  AND (%(find)s::text IS NULL OR strpos(lower(coalesce(d.title, '') || ' ' || d.external_id), lower(%(find)s)) > 0)
  AND (%(tag)s::text IS NULL OR %(tag)s = ANY(d.tags))
  AND (%(source_type)s::text IS NULL OR d.source_type = %(source_type)s)
ORDER BY d.external_id LIMIT %(limit)s OFFSET %(offset)s"""
COUNT_DOCUMENTS = """
SELECT count(*) FROM documents d
WHERE d.collection_id = %(collection_id)s
  AND (%(find)s::text IS NULL OR strpos(lower(coalesce(d.title, '') || ' ' || d.external_id), lower(%(find)s)) > 0)
  AND (%(tag)s::text IS NULL OR %(tag)s = ANY(d.tags))
  AND (%(source_type)s::text IS NULL OR d.source_type = %(source_type)s)"""
# The version of a document (by external id or doc id) named by id or label, else the active one.
DOCUMENT_SOURCE = """
SELECT v.doc_version_id, v.version_label, v.source_sha256, v.source_name, v.media_type, d.doc_id, d.external_id,
       v.artifact_uri
FROM documents d JOIN document_versions v ON v.doc_id = d.doc_id
WHERE d.collection_id = %(collection_id)s AND (d.external_id = %(ref)s OR d.doc_id::text = %(ref)s)
  AND (CASE WHEN %(version)s::text IS NULL THEN v.is_active
            ELSE v.doc_version_id::text = %(version)s OR v.version_label = %(version)s END)"""
# One chunk with where it comes from (its document, version and original).
GET_CHUNK = """
SELECT c.chunk_id, c.doc_id, c.doc_version_id, c.chunk_index, c.heading_path, c.chunk_type, c.content, c.metadata,
       c.is_active, d.external_id, d.title, d.source_type, v.version_label, v.media_type, v.source_name,
       v.source_sha256 IS NOT NULL AS has_original
FROM chunks c JOIN documents d ON d.doc_id = c.doc_id JOIN document_versions v ON v.doc_version_id = c.doc_version_id
WHERE c.chunk_id = %(chunk_id)s AND c.collection_id = %(collection_id)s"""
# A version's chunks in order (a document's page).
VERSION_CHUNKS = """
SELECT chunk_id, chunk_index, heading_path, chunk_type, content, metadata FROM chunks
WHERE doc_version_id = %(version)s ORDER BY chunk_index LIMIT %(limit)s"""
VERSION_SOURCES = "SELECT source_sha256 FROM document_versions WHERE doc_id = %(doc_id)s AND source_sha256 IS NOT NULL"

GET_DOCUMENT = """
SELECT d.doc_id, d.external_id, d.source_uri, d.source_type, d.title, d.tags, d.metadata, d.created_at,
       d.updated_at
FROM documents d WHERE d.collection_id = %(collection_id)s AND (d.external_id = %(ref)s OR d.doc_id::text = %(ref)s)"""

DOCUMENT_VERSIONS = """
SELECT doc_version_id, version_label, content_hash, is_active, chunk_count, artifact_uri, effective_at, created_at,
       source_sha256, source_name, media_type
FROM document_versions WHERE doc_id = %(doc_id)s ORDER BY created_at, version_label"""

ACTIVE_VERSIONS_OF = "SELECT doc_version_id FROM document_versions WHERE doc_id = %(doc_id)s AND is_active"
ACTIVE_VERSIONS_OF_MANY = """
SELECT doc_version_id FROM document_versions WHERE doc_id = ANY(%(doc_ids)s) AND is_active ORDER BY doc_version_id"""
# Every active chunk of a collection in document order (conformance snapshots).
ACTIVE_CHUNKS = """
SELECT d.external_id, c.chunk_index, c.chunk_id::text, c.content, c.token_count
FROM chunks c JOIN documents d USING (doc_id)
WHERE c.collection_id = %(collection_id)s AND c.is_active ORDER BY d.external_id, c.chunk_index"""
DELETE_DOCUMENT = "SELECT ragd_delete_document(%(doc_id)s)"
# -- embedding cache ---------------------------------------------------------------------------------

CACHE_LOOKUP = """
SELECT content_hash, embedding FROM embedding_cache
WHERE embed_model = %(embed_model)s AND content_hash = ANY(%(hashes)s)"""

CACHE_INSERT = """
INSERT INTO embedding_cache (tenant_id, embed_model, content_hash, embedding)
SELECT %(tenant_id)s, %(embed_model)s, h, v FROM unnest(%(hashes)b::text[], %(embeddings)b::vector[]) AS x(h, v)
ON CONFLICT DO NOTHING"""

# -- query executions (reproducibility records) --------------------------------------------------------

INSERT_EXECUTION = """
INSERT INTO query_executions (query_id, tenant_id, collection_id, request_id, question_hash, question, plan, models,
                              prompt_version, generator, chunk_ids, retrieved, context_ids, answer, citations,
                              abstained, timings, result_hash)
VALUES (%(query_id)s, %(tenant_id)s, %(collection_id)s, %(request_id)s, %(question_hash)s, %(question)s, %(plan)s,
        %(models)s, %(prompt_version)s, %(generator)s, %(chunk_ids)s, %(retrieved)s, %(context_ids)s, %(answer)s,
        %(citations)s, %(abstained)s, %(timings)s, %(result_hash)s)"""

GET_EXECUTION = """
SELECT q.query_id, c.name AS collection, q.created_at, q.request_id, q.question_hash, q.question, q.plan, q.models,
       q.prompt_version, q.generator, q.chunk_ids, q.retrieved, q.context_ids, q.answer, q.citations, q.abstained,
       q.timings, q.result_hash
FROM query_executions q JOIN collections c USING (collection_id) WHERE q.query_id::text LIKE %(prefix)s
ORDER BY q.created_at DESC LIMIT 2"""

# -- runs --------------------------------------------------------------------------------------------

INSERT_RUN = """
INSERT INTO ingestion_runs (run_id, tenant_id, collection_id, status, stage, config)
VALUES (%(run_id)s, %(tenant_id)s, %(collection_id)s, 'running', 'extract', %(config)s)"""

RUNNING_RUNS = """
SELECT run_id, tenant_id, config->>'host', config->>'pid' FROM ingestion_runs
WHERE collection_id = %(collection_id)s AND status = 'running' ORDER BY started_at"""
ALL_RUNNING_RUNS = """
SELECT run_id, tenant_id, config->>'host', config->>'pid' FROM ingestion_runs WHERE status = 'running'
ORDER BY started_at, run_id"""

INTERRUPT_RUN = """
UPDATE ingestion_runs SET status = 'failed', error = %(error)s, finished_at = now()
WHERE run_id = %(run_id)s AND tenant_id = %(tenant_id)s AND status = 'running'"""

UPDATE_RUN = """
UPDATE ingestion_runs SET stats = %(stats)s, stage = %(stage)s WHERE run_id = %(run_id)s"""

FINISH_RUN = """
UPDATE ingestion_runs SET status = %(status)s, stage = %(stage)s, stats = %(stats)s, error = %(error)s,
       finished_at = now()
WHERE run_id = %(run_id)s"""

INSERT_ITEMS = """
INSERT INTO ingestion_items (run_id, item_index, tenant_id, source_uri, external_id, status, error_code, reason,
                             doc_id, doc_version_id, chunk_count, extract_seconds, store_seconds)
SELECT %(run_id)s, i, %(tenant_id)s, u, e, s, c, r, d, v, n, xs, ss
FROM unnest(%(indexes)b::int8[], %(source_uris)b::text[], %(external_ids)b::text[], %(statuses)b::text[],
            %(codes)b::text[], %(reasons)b::text[], %(doc_ids)b::uuid[], %(versions)b::uuid[], %(chunks)b::int[],
            %(extract_seconds)b::float8[], %(store_seconds)b::float8[])
     AS x(i, u, e, s, c, r, d, v, n, xs, ss)"""

LIST_RUNS = """
SELECT r.run_id, c.name AS collection, r.status, r.stage, r.started_at, r.finished_at, r.stats, r.error
FROM ingestion_runs r JOIN collections c USING (collection_id) WHERE r.collection_id = %(collection_id)s
ORDER BY r.started_at DESC, r.run_id LIMIT %(limit)s"""

GET_RUN = """
SELECT r.run_id, c.name AS collection, r.status, r.stage, r.started_at, r.finished_at, r.config, r.stats, r.error
FROM ingestion_runs r JOIN collections c USING (collection_id) WHERE r.run_id::text LIKE %(prefix)s
ORDER BY r.started_at DESC LIMIT 2"""

RUN_ITEMS = """
SELECT item_index, source_uri, external_id, status, error_code, reason, doc_id, chunk_count, extract_seconds,
       store_seconds
FROM ingestion_items WHERE run_id = %(run_id)s ORDER BY item_index"""

# -- retrieval ---------------------------------------------------------------------------------------

# A Candidate's columns after chunk_id (see legs.candidate), from chunks c and the joins below.
_CANDIDATE_SELECT = ("c.doc_id, c.doc_version_id, c.chunk_index, c.content, d.title, d.external_id, "
                     "v.version_label, c.heading_path, c.chunk_type, c.tags, d.metadata || c.metadata")
_CANDIDATE_JOINS = ("JOIN documents d ON d.doc_id = c.doc_id "
                    "JOIN document_versions v ON v.doc_version_id = c.doc_version_id")
CANDIDATE_COLUMNS = (f"SELECT c.chunk_id, {_CANDIDATE_SELECT} FROM chunks c {_CANDIDATE_JOINS} "
                     "WHERE c.chunk_id = ANY(%(ids)s) AND c.is_active")
# A document's active table chunks in order, as Candidates (its statements, read as facts)
DOCUMENT_TABLES = (f"SELECT c.chunk_id, {_CANDIDATE_SELECT} FROM chunks c {_CANDIDATE_JOINS} "
                   "WHERE c.doc_id = %(doc_id)s AND c.collection_id = %(collection_id)s AND c.is_active "
                   "AND c.chunk_type = 'table' ORDER BY c.chunk_index")


def filter_clause(filters: Filters, alias: str = "c") -> tuple[sql.Composable, dict[str, Any]]:
    """WHERE conditions on the chunks table for a Filters value (always true when empty).

    Only LEAKPROOF operators (uuid, text and timestamp comparisons) touch table columns, so every condition
    can use an index under row-level security; tags and metadata go through document_filter_values. The
    statement must bind %(collection_id)s."""
    col = sql.Identifier(alias)
    parts: list[sql.Composable] = [sql.SQL("TRUE")]
    params: dict[str, Any] = {}
    lookup = ("{}.doc_id IN (SELECT f.doc_id FROM document_filter_values f "
              "WHERE f.collection_id = %(collection_id)s AND f.field = {} AND ")
    if filters.tags_any:
        parts.append(sql.SQL(lookup + "f.value = ANY(%(f_tags_any)s::text[]))").format(col, sql.Literal("tags")))
        params["f_tags_any"] = list(filters.tags_any)
    if filters.tags_all:
        parts.append(sql.SQL(lookup + "f.value = ANY(%(f_tags_all)s::text[]) "
                             "GROUP BY f.doc_id HAVING count(*) = %(f_tags_all_n)s)").format(col, sql.Literal("tags")))
        params["f_tags_all"] = list(filters.tags_all)
        params["f_tags_all_n"] = len(set(filters.tags_all))
    for i, (key, value) in enumerate(filters.metadata):
        parts.append(sql.SQL(lookup + "f.value = ({}::jsonb)::text)").format(
            col, sql.Placeholder(f"f_mk{i}"), sql.Placeholder(f"f_mv{i}")))
        params[f"f_mk{i}"] = f"metadata.{key}"
        params[f"f_mv{i}"] = json.dumps(value, sort_keys=True)
    if filters.doc_ids:
        parts.append(sql.SQL("{}.doc_id = ANY(%(f_doc_ids)s::uuid[])").format(col))
        params["f_doc_ids"] = list(filters.doc_ids)
    if filters.external_ids:
        parts.append(sql.SQL(
            "{}.doc_id IN (SELECT doc_id FROM documents WHERE collection_id = %(collection_id)s "
            "AND external_id = ANY(%(f_ext_ids)s::text[]))"
        ).format(col))
        params["f_ext_ids"] = list(filters.external_ids)
    if filters.effective_from:
        parts.append(sql.SQL("{}.effective_at >= %(f_eff_from)s::timestamptz").format(col))
        params["f_eff_from"] = filters.effective_from
    if filters.effective_to:
        parts.append(sql.SQL("{}.effective_at < %(f_eff_to)s::timestamptz").format(col))
        params["f_eff_to"] = filters.effective_to
    return sql.SQL(" AND ").join(parts), params


def vector_index_sql(collection_id: uuid.UUID, embed_model: str, dims: int, filters: Filters,
                     vector_type: str = "vector") -> sql.Composed:
    """Top-k through the collection's partial HNSW index (its predicate and cast repeated literally); the score is
    the full-precision cosine of the stored vector whatever precision the index walks at."""
    where, _ = filter_clause(filters)
    join = sql.SQL("") if filters.empty else sql.SQL(
        "JOIN chunks c ON c.chunk_id = e.chunk_id AND c.is_active AND {where} ").format(where=where)
    return sql.SQL(
        "SELECT e.chunk_id, 1 - (e.embedding::vector({dims}) <=> %(qvec)s::vector({dims})) AS score "
        "FROM chunk_embeddings e {join}"
        "WHERE e.collection_id = {cid} AND e.embed_model = {model} AND e.is_active "
        "ORDER BY e.embedding::{type}({dims}) <=> %(qvec)s::{type}({dims}) LIMIT %(limit)s"
    ).format(join=join, **_index_literals(collection_id, embed_model, dims, vector_type))


def vector_exact_sql(filters: Filters) -> sql.Composed:
    """Exact cosine scan of the filtered active rows (no index), ordered with the canonical tie-break."""
    where, _ = filter_clause(filters)
    return sql.SQL(
        "SELECT e.chunk_id, 1 - (e.embedding <=> %(qvec)s) AS score "
        "FROM chunk_embeddings e JOIN chunks c ON c.chunk_id = e.chunk_id "
        "WHERE e.collection_id = %(collection_id)s AND e.embed_model = %(embed_model)s AND e.is_active "
        "AND c.is_active AND {where} "
        "ORDER BY e.embedding <=> %(qvec)s, c.doc_id, c.chunk_index LIMIT %(limit)s"
    ).format(where=where)


def count_filtered_sql(filters: Filters) -> sql.Composed:
    where, _ = filter_clause(filters)
    return sql.SQL(
        "SELECT count(*) FROM (SELECT 1 FROM chunks c WHERE c.collection_id = %(collection_id)s AND c.is_active "
        "AND {where} LIMIT %(cap)s) x"
    ).format(where=where)


# The collection's chunk count and the document frequency of each of the given terms (absent: not held).
TERM_DFS = """
SELECT s.n_chunks, COALESCE(json_object_agg(lt.term, lt.df) FILTER (WHERE lt.term IS NOT NULL), '{}')
FROM lexical_stats s
LEFT JOIN lexical_terms lt ON lt.collection_id = s.collection_id AND lt.term = ANY(%(terms)s) AND lt.df > 0
WHERE s.collection_id = %(collection_id)s
GROUP BY s.n_chunks"""

# The query's terms with how often the query says each (qtf: a term repeated counts as often as it is said, as in
# Lucene, where each occurrence is a clause of its own), their document frequency and postings, the collection's
# statistics, and what says which postings kept from an earlier read still hold (retrieve/postings.py): the next
# ordinal, the count of compactions' rewrites and when the collection was made.
LEXICAL_TERM_STATS = """
WITH q AS (SELECT t.lexeme AS term, COALESCE(cardinality(t.positions), 1) AS qtf
           FROM unnest(to_tsvector('english', %(query)s)) t)
SELECT q.term, lt.df, s.n_chunks, s.total_len, q.qtf, lt.posted, s.next_ord, s.rewrites, c.created_at
FROM q CROSS JOIN LATERAL (  -- one key lookup per query term, whatever the statistics say (LIMIT keeps it a
                             -- lookup: a collection just written, not yet analysed, was hash-joined whole, 25 ms
                             -- at 41k terms)
    SELECT lt.df, lt.posted FROM lexical_terms lt
    WHERE lt.collection_id = %(collection_id)s AND lt.term = q.term AND lt.df > 0 LIMIT 1) lt
CROSS JOIN lexical_stats s JOIN collections c ON c.collection_id = s.collection_id
WHERE s.collection_id = %(collection_id)s
ORDER BY lt.df, q.term"""

# The BM25 blocks' primary key (every collection's): its pages and the blocks it indexes (counted: the statistics'
# estimates lag behind a compaction, or were never taken), and copies a REINDEX CONCURRENTLY left invalid when it
# was stopped (each is written on every insert until dropped).
_BLOCKS_INDEX_COPIES = """ARRAY(SELECT x.relname::text FROM pg_index i JOIN pg_class x ON x.oid = i.indexrelid
             WHERE i.indrelid = 'lexical_blocks'::regclass AND NOT i.indisvalid
               AND x.relname LIKE 'lexical\\_blocks\\_pkey\\_ccnew%%' ORDER BY 1)"""
BLOCKS_INDEX_FILL = f"""
SELECT pg_relation_size('lexical_blocks_pkey'::regclass) / current_setting('block_size')::bigint,
       (SELECT count(*) FROM lexical_blocks),
       {_BLOCKS_INDEX_COPIES}"""
BLOCKS_INDEX_COPIES = f"SELECT {_BLOCKS_INDEX_COPIES}"  # (without the count, after a rebuild gave up)
REINDEX_BLOCKS = "REINDEX INDEX CONCURRENTLY lexical_blocks_pkey"
# How long the rebuild waits for a lock or an older transaction before it gives up (and its copy is dropped)
SET_REBUILD_WAIT = "SELECT set_config('lock_timeout', %(wait)s, false)"
RESET_REBUILD_WAIT = "RESET lock_timeout"


# Each term's postings, its blocks' packed arrays joined in ordinal order by the server: one row per term (read in
# binary, as bytes; thousands of rows of a few hundred bytes each cost more to receive and join than the data).
LEXICAL_BLOCKS = """
SELECT term, string_agg(ords, ''::bytea ORDER BY first_ord), string_agg(tfs, ''::bytea ORDER BY first_ord),
       string_agg(lens, ''::bytea ORDER BY first_ord)
FROM lexical_blocks WHERE collection_id = %(collection_id)s AND term = ANY(%(terms)s::text[])
GROUP BY term"""
# The blocks of terms whose postings a process keeps, written since it last read them: those starting at or past
# the next ordinal of that read (every block written since starts there, unless a compaction rewrote some, which
# the rewrites count tells).
LEXICAL_BLOCKS_SINCE = """
SELECT b.term, string_agg(b.ords, ''::bytea ORDER BY b.first_ord), string_agg(b.tfs, ''::bytea ORDER BY b.first_ord),
       string_agg(b.lens, ''::bytea ORDER BY b.first_ord)
FROM unnest(%(terms)s::text[], %(since)s::integer[]) AS q(term, since)
JOIN lexical_blocks b ON b.collection_id = %(collection_id)s AND b.term = q.term AND b.first_ord >= q.since
GROUP BY b.term"""


def chunks_by_ord_sql(filters: Filters) -> sql.Composed:
    """The active chunks behind BM25 ordinals that pass the filters, ready to use (ordinal, then CANDIDATE_COLUMNS'
    columns). An ordinal of a retired chunk, or of a chunk re-activated under another ordinal, finds no row."""
    where, _ = filter_clause(filters)
    return sql.SQL(
        f"SELECT c.lex_ord, c.chunk_id, {_CANDIDATE_SELECT} FROM chunks c {_CANDIDATE_JOINS} "
        "WHERE c.collection_id = %(collection_id)s AND c.lex_ord = ANY(%(ords)s::integer[]) AND c.is_active AND {}"
    ).format(where)


def filtered_ords_sql(filters: Filters) -> sql.Composed:
    """The BM25 ordinals of the active chunks passing a (selective) filter."""
    where, _ = filter_clause(filters)
    return sql.SQL(
        "SELECT c.lex_ord FROM chunks c WHERE c.collection_id = %(collection_id)s AND c.is_active AND {}"
    ).format(where)


# Compaction, a page of terms per transaction: the collection's statistics row locked first (one compaction at a
# time, and no activation in between), the ordinals below next_ord with the active ones among them, the terms whose
# blocks hold postings of chunks no longer active (more postings than the term's document frequency) or more than
# one partial block, and their blocks.
COMPACT_LOCK = """SELECT next_ord, n_chunks FROM lexical_stats WHERE collection_id = %(collection_id)s
FOR UPDATE"""
ACTIVE_ORDS = "SELECT lex_ord FROM chunks WHERE collection_id = %(collection_id)s AND is_active"
# The terms whose blocks hold postings of chunks no longer active (posted > df) or more than one partial block, from
# the terms' own counts (migration 25): no block is read to find them.
TERMS_TO_COMPACT = """
SELECT term, posted, df FROM lexical_terms
WHERE collection_id = %(collection_id)s AND term > %(after)s AND (posted > df OR partial > 1)
ORDER BY term LIMIT %(limit)s"""
# The blocks a compaction reads: every block of the terms holding dead postings (`whole`), the partial ones of the
# others
BLOCKS_OF_TERMS = """
SELECT term, first_ord, ords, tfs, lens FROM lexical_blocks
WHERE collection_id = %(collection_id)s AND term = ANY(%(terms)s::text[])
  AND (n < %(block)s OR term = ANY(%(whole)s::text[]))
ORDER BY term, first_ord"""
# The collection's active chunks (with words) as its statistics hold them: sizes the HNSW search's ef_search.
# The transaction's HNSW breadth in one round trip: at least the scan's limit, and past `grow` active chunks
# legs.ef_search_at's growth in the same float8 operations (grow 0: `ef` at any size); with `iterative`, pgvector's
# iterative scan too (a filtered search).
SET_HNSW_SCAN = """
SELECT set_config('hnsw.ef_search', greatest(%(limit)s::integer, CASE
           WHEN %(grow)s::integer <= 0 OR s.n <= %(grow)s::integer THEN %(ef)s::integer
           ELSE least(1000, greatest(%(ef)s::integer,
                                     ceil(%(ef)s::integer * sqrt(s.n::float8 / %(grow)s::integer))::integer))
       END)::text, true),
       CASE WHEN %(iterative)s THEN set_config('hnsw.iterative_scan', 'relaxed_order', true) END
FROM (SELECT COALESCE((SELECT n_chunks FROM lexical_stats WHERE collection_id = %(collection_id)s), 0) AS n) s"""
COMPACTED = "UPDATE lexical_stats SET blocks_written = 0 WHERE collection_id = %(collection_id)s"
BLOCKS_WRITTEN = "SELECT blocks_written FROM lexical_stats WHERE collection_id = %(collection_id)s"
REPLACE_BLOCKS = """
SELECT ragd_replace_blocks(%(collection_id)s, %(terms)s::text[], %(firsts)s::integer[], %(new_terms)s::text[],
                           %(new_firsts)s::integer[], %(new_lasts)s::integer[], %(new_ns)s::integer[],
                           %(new_max_tfs)s::integer[], %(new_min_lens)s::integer[], %(new_ords)s::bytea[],
                           %(new_tfs)s::bytea[], %(new_lens)s::bytea[], %(checked)s::text[],
                           %(posted)s::integer[], %(partial)s::integer[])"""

# -- idempotency keys ----------------------------------------------------------------------------------

# The key's record, claimed for this request: a new key, or one older than a day, takes this request's hash.
CLAIM_IDEMPOTENCY_KEY = """
INSERT INTO idempotency_keys (tenant_id, key, request_hash) VALUES (%(tenant_id)s, %(key)s, %(request_hash)s)
ON CONFLICT (tenant_id, key) DO UPDATE SET request_hash = EXCLUDED.request_hash, status_code = NULL,
    response = NULL, created_at = now()
    WHERE idempotency_keys.created_at < now() - interval '24 hours'"""
GET_IDEMPOTENCY_KEY = """
SELECT request_hash, status_code, response FROM idempotency_keys WHERE key = %(key)s"""
FINISH_IDEMPOTENCY_KEY = """
UPDATE idempotency_keys SET status_code = %(status_code)s, response = %(response)s
WHERE key = %(key)s AND request_hash = %(request_hash)s"""

# -- queued runs (ragd.jobs) -------------------------------------------------------------------------

# one enqueue of a tenant at a time, so two cannot both pass its bound: the row of ragd_locks named after the tenant's
# queue, locked to the end of the transaction (made on first use). No tenant can read or lock those rows; an
# advisory lock's key any role could take, and a tenant holding it stalled every upload waiting on it.
QUEUE_LOCK = """
INSERT INTO ragd_locks (name) VALUES ('queue:' || %(tenant_id)s)
ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name"""
OPEN_FILES = """
SELECT count(*) FROM ingestion_files WHERE tenant_id = %(tenant_id)s AND status IN ('queued', 'running')"""
RECENT_FILE_RATE = """
SELECT count(*) / 60.0 FROM ingestion_files
WHERE tenant_id = %(tenant_id)s AND status = 'done' AND finished_at > now() - interval '1 minute'"""
INSERT_QUEUED_RUN = """
INSERT INTO ingestion_runs (run_id, tenant_id, collection_id, status, stage, config)
VALUES (%(run_id)s, %(tenant_id)s, %(collection_id)s, 'queued', 'queued', %(config)s)"""
INSERT_QUEUED_FILE = """
INSERT INTO ingestion_files (run_id, ordinal, tenant_id, name, source_uri, size, content)
VALUES (%(run_id)s, %(ordinal)s, %(tenant_id)s, %(name)s, %(source_uri)s, length(%(content)s), %(content)s)"""
SET_FILE_JOBS = """
UPDATE ingestion_files f SET job_id = x.j FROM unnest(%(ordinals)s::int[], %(job_ids)s::bigint[]) AS x(o, j)
WHERE f.run_id = %(run_id)s AND f.ordinal = x.o"""
LOCK_RUN = "SELECT status FROM ingestion_runs WHERE run_id = %(run_id)s FOR UPDATE"
START_FILE = """
WITH f AS (
    UPDATE ingestion_files SET status = 'running', attempts = attempts + 1, started_at = coalesce(started_at, now()),
                               worker = %(worker)s
    WHERE run_id = %(run_id)s AND ordinal = %(ordinal)s AND status IN ('queued', 'running') RETURNING *
), r AS (
    UPDATE ingestion_runs SET status = 'running', stage = 'store'
    WHERE run_id = %(run_id)s AND status = 'queued' AND EXISTS (SELECT 1 FROM f) RETURNING run_id
)
SELECT f.tenant_id, c.name, f.name, f.source_uri, f.content, ir.config, f.attempts
FROM f JOIN ingestion_runs ir ON ir.run_id = f.run_id JOIN collections c ON c.collection_id = ir.collection_id"""
PART_ITEMS_DONE = """
SELECT item_index FROM ingestion_items
WHERE run_id = %(run_id)s AND item_index >= %(low)s AND item_index < %(high)s ORDER BY item_index"""
FINISH_FILE = """
UPDATE ingestion_files SET status = 'done', content = NULL, finished_at = now()
WHERE run_id = %(run_id)s AND ordinal = %(ordinal)s AND status IN ('queued', 'running') AND attempts = %(attempt)s"""
# whether an attempt of a file's job is still the file's latest (a tenant session, through the definer function;
# the worker's own session, locking the row itself), held to the end of the transaction
HOLD_FILE = "SELECT ragd_hold_file(%(run_id)s, %(ordinal)s, %(attempt)s)"
OWN_FILE = """
SELECT attempts = %(attempt)s AND status = 'running' FROM ingestion_files
WHERE run_id = %(run_id)s AND ordinal = %(ordinal)s FOR UPDATE"""
CANCEL_FILES = """
UPDATE ingestion_files SET status = 'cancelled', content = NULL, finished_at = now()
WHERE run_id = %(run_id)s AND status = 'queued' RETURNING job_id"""
CANCEL_RUN = "UPDATE ingestion_runs SET status = 'cancelled', error = %(error)s WHERE run_id = %(run_id)s"
# a queued run's stats from its items; closed (succeeded, or failed when every item failed; a cancelled run stays
# cancelled) once none of its files is queued or running
CLOSE_QUEUED_RUN = """
WITH f AS (
    SELECT count(*) FILTER (WHERE status IN ('queued', 'running')) AS open FROM ingestion_files
    WHERE run_id = %(run_id)s
), s AS (
    SELECT coalesce(sum(n), 0) AS items, coalesce(sum(n) FILTER (WHERE status = 'failed'), 0) AS failed,
           coalesce(sum(chunks) FILTER (WHERE status IN ('ingested', 'updated')), 0) AS chunks,
           coalesce(jsonb_object_agg(status, n ORDER BY status), '{}'::jsonb) AS counts
    FROM (SELECT status, count(*) AS n, sum(chunk_count) AS chunks FROM ingestion_items
          WHERE run_id = %(run_id)s GROUP BY status) c
)
UPDATE ingestion_runs r SET
    stats = r.stats || jsonb_build_object('items', s.items, 'counts', s.counts, 'chunks', s.chunks,
                                          'seconds', round(extract(epoch FROM now() - r.started_at)::numeric, 3)),
    status = CASE WHEN f.open > 0 OR r.status NOT IN ('queued', 'running') THEN r.status
                  WHEN s.items > 0 AND s.failed = s.items THEN 'failed' ELSE 'succeeded' END,
    stage = CASE WHEN f.open = 0 THEN 'done' ELSE r.stage END,
    error = CASE WHEN f.open = 0 AND r.status IN ('queued', 'running') AND s.items > 0 AND s.failed = s.items
                 THEN 'every item failed' ELSE r.error END,
    finished_at = CASE WHEN f.open = 0 THEN coalesce(r.finished_at, now()) ELSE r.finished_at END
FROM f, s WHERE r.run_id = %(run_id)s"""
# A queued run's files, each with its state (its items are numbered from ordinal x 1,000,000).
RUN_FILE_LIST = """
SELECT ordinal, name, size, status, attempts, started_at, finished_at FROM ingestion_files
WHERE run_id = %(run_id)s ORDER BY ordinal LIMIT 10000"""
RUN_FILES = """
SELECT status, count(*) FROM ingestion_files WHERE run_id = %(run_id)s GROUP BY status ORDER BY status"""

# -- read replicas -----------------------------------------------------------------------------------

REPLICA_STATE = """
SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn(),
       extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8"""

INSERT_EVALUATION = """
INSERT INTO evaluations (eval_id, tenant_id, collection, dataset, kind, config, metrics)
VALUES (%(eval_id)s, %(tenant_id)s, %(collection)s, %(dataset)s, %(kind)s, %(config)s, %(metrics)s)"""
LIST_EVALUATIONS = """
SELECT eval_id, collection, dataset, kind, config, metrics, created_at FROM evaluations
WHERE %(collection)s::text IS NULL OR collection = %(collection)s
ORDER BY created_at DESC, eval_id LIMIT %(limit)s"""
# Every document's active version with where it came from and its labels (`ragd reindex`).
REINDEX_SOURCES = """
SELECT d.external_id, d.source_uri, d.tags, d.metadata, v.source_sha256, v.source_name
FROM documents d JOIN document_versions v ON v.doc_id = d.doc_id AND v.is_active
WHERE d.collection_id = %(collection_id)s ORDER BY d.external_id"""

# -- original files (store/originals.py) ---------------------------------------------------------------

ORIGINAL_INSERT = """
INSERT INTO originals (tenant_id, sha256, size, content) VALUES (%(tenant_id)s, %(sha256)s, %(size)s, %(content)s)
ON CONFLICT DO NOTHING"""
ORIGINAL_KEPT = "SELECT 1 FROM originals WHERE tenant_id = %(tenant_id)s AND sha256 = %(sha256)s"
ORIGINAL_SELECT = "SELECT size, content FROM originals WHERE tenant_id = %(tenant_id)s AND sha256 = %(sha256)s"
ORIGINAL_FORGET = "SELECT ragd_forget_originals(%(shas)s)"

# A search's second session sees the first's snapshot (reading_pair): both REPEATABLE READ, set before any query.
REPEATABLE_READ = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"
EXPORT_SNAPSHOT = "SELECT pg_export_snapshot()"


def imported_snapshot(snapshot: str) -> sql.Composed:
    """The statements that make a transaction see an exported snapshot (one message: no parameters)."""
    return sql.SQL("{}; SET TRANSACTION SNAPSHOT {}").format(sql.SQL(REPEATABLE_READ), sql.Literal(snapshot))
