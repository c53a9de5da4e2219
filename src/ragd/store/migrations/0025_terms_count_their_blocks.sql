-- Each term counts what its BM25 blocks hold (issue 34), so a compaction finds the terms it has to rewrite from the
-- terms alone, instead of grouping every block of the collection on each pass (at a million chunks 0.6 s a page of
-- terms, 11 s of a 20k-document ingest step):
--   * posted: the postings in the term's blocks, live or not (ingest adds a block's count; a retired version's
--     postings stay in their blocks until compaction drops them, so posted - df is the term's dead postings);
--   * partial: its blocks of fewer than 128 postings (ingest writes one per term per batch).
-- A term needs compacting when posted > df (dead postings, or no live ones) or partial > 1; compaction sets both
-- from the blocks it leaves. Neither column is indexed: updating them keeps the terms' updates HOT.
ALTER TABLE lexical_terms ADD COLUMN posted integer NOT NULL DEFAULT 0, ADD COLUMN partial integer NOT NULL DEFAULT 0;
-- (updated by ingest in the tenant's session, like df: column privileges only, migration 15)
GRANT UPDATE (posted, partial) ON lexical_terms TO ragd_app;

UPDATE lexical_terms t SET posted = x.posted, partial = x.partial
FROM (SELECT collection_id, term, tenant_id, sum(n)::integer AS posted,
             (count(*) FILTER (WHERE n < 128))::integer AS partial
      FROM lexical_blocks GROUP BY collection_id, term, tenant_id) x
WHERE t.collection_id = x.collection_id AND t.term = x.term AND t.tenant_id = x.tenant_id;

-- blocks whose term has no row (none are expected: a term's row goes only with its last block) get one with no
-- live postings, so the next compaction finds them and drops them
INSERT INTO lexical_terms (collection_id, term, tenant_id, df, posted, partial)
SELECT b.collection_id, b.term, b.tenant_id, 0, sum(b.n)::integer, (count(*) FILTER (WHERE b.n < 128))::integer
FROM lexical_blocks b
WHERE NOT EXISTS (SELECT FROM lexical_terms t WHERE t.collection_id = b.collection_id AND t.term = b.term
                  AND t.tenant_id = b.tenant_id)
GROUP BY b.collection_id, b.term, b.tenant_id;

-- A compaction's result, as in migration 21, and the counts of every term it looked at (`checked`: those it rewrote
-- and those it found needed nothing), which it knows from the blocks it read and wrote.
DROP FUNCTION ragd_replace_blocks(uuid, text[], integer[], text[], integer[], integer[], integer[], integer[],
                                  integer[], bytea[], bytea[], bytea[]);
CREATE FUNCTION ragd_replace_blocks(collection uuid, terms text[], firsts integer[], new_terms text[],
                                    new_firsts integer[], new_lasts integer[], new_ns integer[],
                                    new_max_tfs integer[], new_min_lens integer[], new_ords bytea[],
                                    new_tfs bytea[], new_lens bytea[], checked text[], checked_posted integer[],
                                    checked_partial integer[])
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
    UPDATE lexical_terms t SET posted = x.posted, partial = x.partial
    FROM unnest(checked, checked_posted, checked_partial) AS x(term, posted, partial)
    WHERE t.tenant_id = ragd_session_tenant() AND t.collection_id = collection AND t.term = x.term;
    DELETE FROM lexical_terms WHERE df <= 0 AND posted = 0 AND collection_id = collection AND term = ANY(checked)
      AND tenant_id = ragd_session_tenant();
$$;
REVOKE ALL ON FUNCTION ragd_replace_blocks(uuid, text[], integer[], text[], integer[], integer[], integer[],
                                           integer[], integer[], bytea[], bytea[], bytea[], text[], integer[],
                                           integer[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ragd_replace_blocks(uuid, text[], integer[], text[], integer[], integer[], integer[],
                                              integer[], integer[], bytea[], bytea[], bytea[], text[], integer[],
                                              integer[]) TO ragd_app;
