"""Chunks and postings as retrieval reads them: the candidate columns, filters as SQL, the vector legs (HNSW
and exact), BM25's term statistics and blocks, and their compaction."""

from __future__ import annotations

import json
import uuid
from typing import Any

from psycopg import sql

from ...types import Filters
from .collections import index_literals

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
    ).format(join=join, **index_literals(collection_id, embed_model, dims, vector_type))


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
# legs.ef_search_at's growth in the same float8 operations (grow 0: `ef` at any size), never past pgvector's bound
# of 1000; with `iterative`, pgvector's iterative scan too (a filtered search).
SET_HNSW_SCAN = """
SELECT set_config('hnsw.ef_search', least(1000, greatest(%(limit)s::integer, CASE
           WHEN %(grow)s::integer <= 0 OR s.n <= %(grow)s::integer THEN %(ef)s::integer
           ELSE least(1000, greatest(%(ef)s::integer,
                                     ceil(%(ef)s::integer * sqrt(s.n::float8 / %(grow)s::integer))::integer))
       END))::text, true),
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
