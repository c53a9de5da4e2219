-- Each collection counts the compactions that rewrote its BM25 blocks (issue 34), so a process may keep the postings
-- of frequent terms it has read (retrieve/postings.py) and know when they still hold. Between two reads of a
-- collection with the same count, its blocks only grew, and only at ordinals at or past the first read's next_ord:
-- ingest writes a batch's blocks in the transaction that takes its ordinals from next_ord; a retired chunk's
-- postings stay in place; only ragd_replace_blocks rewrites blocks below next_ord, and it now counts each rewrite in
-- the same transaction. (Any later migration that rewrites blocks must count it here too.)
ALTER TABLE lexical_stats ADD COLUMN rewrites bigint NOT NULL DEFAULT 0;

CREATE OR REPLACE FUNCTION ragd_replace_blocks(collection uuid, terms text[], firsts integer[], new_terms text[],
                                               new_firsts integer[], new_lasts integer[], new_ns integer[],
                                               new_max_tfs integer[], new_min_lens integer[], new_ords bytea[],
                                               new_tfs bytea[], new_lens bytea[], checked text[],
                                               checked_posted integer[], checked_partial integer[])
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
    UPDATE lexical_stats SET rewrites = rewrites + 1
    WHERE collection_id = collection AND tenant_id = ragd_session_tenant()
      AND (cardinality(terms) > 0 OR cardinality(new_terms) > 0);
$$;
