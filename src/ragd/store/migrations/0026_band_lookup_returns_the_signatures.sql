-- The band lookup returns each candidate's signature with the batch's documents sharing a band with it (issue 34):
-- the GIN lookup's heap visit already holds the row, and migration 24's function returned only its version, so
-- ingest joined back to document_minhash through its primary key for the signature (a second index descent and
-- heap visit a candidate: at 1.5M drawn chunks a document shares a band with ~12 stored ones). Same rules as
-- migration 24's: the session tenant's rows of the given collection only, each document's keys looked up in the GIN
-- index alone, a plan that does not depend on statistics.
DROP FUNCTION ragd_band_matches(uuid, integer[], bigint[]);
CREATE FUNCTION ragd_band_candidates(collection uuid, docs integer[], keys bigint[])
RETURNS TABLE (doc_version_id uuid, doc_id uuid, signature bytea, docs integer[])
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp SET enable_seqscan = off AS $$
    WITH q AS MATERIALIZED (SELECT x.d, array_agg(x.k) AS keys FROM unnest(docs, keys) AS x(d, k) GROUP BY x.d)
    SELECT m.doc_version_id, m.doc_id, m.signature, array_agg(q.d ORDER BY q.d)
    FROM q CROSS JOIN LATERAL (
        SELECT s.doc_version_id, s.doc_id, s.signature, s.tenant_id, s.collection_id FROM document_minhash s
        WHERE s.bands && q.keys OFFSET 0) m
    WHERE m.tenant_id = ragd_session_tenant() AND m.collection_id = collection
    GROUP BY m.doc_version_id, m.doc_id, m.signature
$$;
REVOKE ALL ON FUNCTION ragd_band_candidates(uuid, integer[], bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ragd_band_candidates(uuid, integer[], bigint[]) TO ragd_app;
