-- BM25 postings in blocks (issue 34), as Lucene lays them out: many chunks per row, not one row per (term, chunk).
--
-- One row per posting cost two btree entries and a heap tuple for each of a chunk's ~60 terms: at 300k chunks the
-- postings were two thirds of the store (5.9 GB) and their statement half of ingest's server time. Now:
--   * each chunk has a dense ordinal per collection (chunks.lex_ord, from lexical_stats.next_ord) and its BM25 length
--     (chunks.lex_len, counted from its lexemes when it is written: the same count the postings carried);
--   * an ingest batch writes one lexical_blocks row per term it holds: the ordinals, term frequencies and lengths of
--     its chunks holding the term, packed (big-endian int4 / int2 / int4, ordinals ascending), with the largest tf
--     and smallest length for a block-max bound;
--   * retiring a version leaves its postings in place: its chunks are no longer active, or were re-activated under
--     new ordinals, so search drops them when it maps ordinals back to active chunks. Document frequencies and the
--     collection's length statistics stay exact in the transaction that activates or retires a version, from the
--     chunks' own lexemes;
--   * compaction (ragd compact, and after an ingest run once enough blocks were written) rewrites a term's partial
--     blocks and those holding retired postings into full blocks of live postings, as segment merges do; full blocks
--     of live postings stay as they are.
-- Tenant isolation is unchanged: row security on tenant_id, tenant-scoped keys, no UPDATE or DELETE grant (blocks
-- are replaced through a SECURITY DEFINER function that touches the session's tenant only).

ALTER TABLE chunks ADD COLUMN lex_len integer, ADD COLUMN lex_ord integer;
ALTER TABLE lexical_stats ADD COLUMN next_ord integer NOT NULL DEFAULT 0 CHECK (next_ord >= 0),
                          -- blocks written by ingest since the last compaction (ingest compacts past a bound)
                          ADD COLUMN blocks_written bigint NOT NULL DEFAULT 0;

-- every stored chunk gets its length and its ordinal, per collection, in document order
UPDATE chunks c SET lex_ord = o.ord,
                    lex_len = (SELECT COALESCE(sum(COALESCE(cardinality(u.positions), 1)), 0)::integer
                               FROM unnest(c.lexemes) u)
FROM (SELECT chunk_id, (row_number() OVER (PARTITION BY collection_id
                                           ORDER BY doc_id, doc_version_id, chunk_index) - 1)::integer AS ord
      FROM chunks) o
WHERE c.chunk_id = o.chunk_id;
ALTER TABLE chunks ALTER COLUMN lex_ord SET NOT NULL, ALTER COLUMN lex_len SET NOT NULL,
                   ADD CONSTRAINT chunks_lex_len CHECK (lex_len >= 0);
UPDATE lexical_stats s SET next_ord = COALESCE((SELECT max(c.lex_ord) + 1 FROM chunks c
                                                 WHERE c.collection_id = s.collection_id), 0);
CREATE UNIQUE INDEX chunks_lex_ord ON chunks (collection_id, lex_ord, tenant_id);
GRANT UPDATE (lex_ord, lex_len) ON chunks TO ragd_app;
GRANT UPDATE (next_ord, blocks_written) ON lexical_stats TO ragd_app;

CREATE TABLE lexical_blocks (
    collection_id uuid NOT NULL,
    term          text NOT NULL,
    first_ord     integer NOT NULL,
    tenant_id     text NOT NULL,
    last_ord      integer NOT NULL,
    n             integer NOT NULL CHECK (n > 0),
    max_tf        integer NOT NULL CHECK (max_tf > 0),
    min_len       integer NOT NULL CHECK (min_len > 0),
    ords          bytea NOT NULL CHECK (length(ords) = 4 * n),
    tfs           bytea NOT NULL CHECK (length(tfs) = 2 * n),
    lens          bytea NOT NULL CHECK (length(lens) = 4 * n),
    PRIMARY KEY (collection_id, term, first_ord, tenant_id)
);
-- A block is read whole by every search for its term: kept in its heap row uncompressed (an ingest batch's block of
-- up to 512 postings is ~5 kB), never compressed and never moved to TOAST below a page.
ALTER TABLE lexical_blocks SET (toast_tuple_target = 8160);
ALTER TABLE lexical_blocks ALTER COLUMN ords SET STORAGE EXTERNAL, ALTER COLUMN tfs SET STORAGE EXTERNAL,
                           ALTER COLUMN lens SET STORAGE EXTERNAL;
REVOKE ALL ON lexical_blocks FROM PUBLIC;
ALTER TABLE lexical_blocks ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON lexical_blocks USING (tenant_id = (SELECT ragd_tenant()))
    WITH CHECK (tenant_id = (SELECT ragd_tenant()));
GRANT SELECT, INSERT ON lexical_blocks TO ragd_app;

-- Today's postings, by term, in blocks of 128 ordinals.
INSERT INTO lexical_blocks (collection_id, term, first_ord, tenant_id, last_ord, n, max_tf, min_len, ords, tfs, lens)
SELECT collection_id, term, min(ord), tenant_id, max(ord), count(*), max(tf), min(len),
       string_agg(int4send(ord), ''::bytea ORDER BY ord), string_agg(int2send(tf::smallint), ''::bytea ORDER BY ord),
       string_agg(int4send(len), ''::bytea ORDER BY ord)
FROM (SELECT p.collection_id, p.term, p.tenant_id, c.lex_ord AS ord, p.tf, p.doc_len AS len,
             (row_number() OVER (PARTITION BY p.collection_id, p.term ORDER BY c.lex_ord) - 1) / 128 AS block
      FROM lexical_postings p JOIN chunks c ON c.chunk_id = p.chunk_id) x
GROUP BY collection_id, term, tenant_id, block;

DROP FUNCTION ragd_delete_postings(uuid[], uuid);
DROP TABLE lexical_postings;

-- A compaction's result: the session tenant's blocks `(terms[i], firsts[i])` (the rows it read) give way to the
-- rows given (unnest of the new_* arrays), and the terms no active chunk holds any more go.
CREATE FUNCTION ragd_replace_blocks(collection uuid, terms text[], firsts integer[], new_terms text[],
                                    new_firsts integer[], new_lasts integer[], new_ns integer[], new_max_tfs integer[],
                                    new_min_lens integer[], new_ords bytea[], new_tfs bytea[], new_lens bytea[])
RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
    DELETE FROM lexical_blocks b USING unnest(terms, firsts) AS x(term, first_ord)
    WHERE b.tenant_id = ragd_session_tenant() AND b.collection_id = collection AND b.term = x.term
      AND b.first_ord = x.first_ord;
    INSERT INTO lexical_blocks (collection_id, term, first_ord, tenant_id, last_ord, n, max_tf, min_len, ords, tfs,
                                lens)
    SELECT collection, t, f, ragd_session_tenant(), l, n, m, ml, o, tf, ln
    FROM unnest(new_terms, new_firsts, new_lasts, new_ns, new_max_tfs, new_min_lens, new_ords, new_tfs, new_lens)
         AS x(t, f, l, n, m, ml, o, tf, ln)
    WHERE ragd_session_tenant() IS NOT NULL;
    DELETE FROM lexical_terms WHERE df <= 0 AND collection_id = collection AND term = ANY(terms)
      AND tenant_id = ragd_session_tenant();
$$;
REVOKE ALL ON FUNCTION ragd_replace_blocks(uuid, text[], integer[], text[], integer[], integer[], integer[],
                                           integer[], integer[], bytea[], bytea[], bytea[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ragd_replace_blocks(uuid, text[], integer[], text[], integer[], integer[], integer[],
                                              integer[], integer[], bytea[], bytea[], bytea[]) TO ragd_app;
