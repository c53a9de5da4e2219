"""Documents and versions: a batch written from arrays in one statement per table (documents, versions,
chunks, embeddings, MinHash signatures, filter values), versions activated and retired, the embedding cache, and
what the library reads back (lists, a document, a chunk, its sources)."""

from __future__ import annotations

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


# Every document's active version with where it came from and its labels (`ragd reindex`).
REINDEX_SOURCES = """
SELECT d.external_id, d.source_uri, d.tags, d.metadata, v.source_sha256, v.source_name
FROM documents d JOIN document_versions v ON v.doc_id = d.doc_id AND v.is_active
WHERE d.collection_id = %(collection_id)s ORDER BY d.external_id"""
