-- A version's 32 LSH band keys move into its signature's row (issue 34): one bigint[] with a GIN index instead of
-- 32 rows of document_minhash_bands with their btree. Writing the bands was a fifth of the server's time for a
-- batch (SciFact: 1.5 of 7.5 s, 166k rows); the array with its GIN index costs a third of that, and a lookup of a
-- batch's documents reads no more. The GIN operator (&&) is not LEAKPROOF, so under row-level security a tenant
-- session could not use the index: candidates are found through ragd_band_matches, a SECURITY DEFINER function
-- that reads the session tenant's rows of the given collection only. The bands go with their signature's row
-- (deleted with its version, document or collection by the foreign keys' cascades).
ALTER TABLE document_minhash ADD COLUMN bands bigint[];
UPDATE document_minhash m SET bands = b.keys
FROM (SELECT tenant_id, doc_version_id, array_agg(band_key ORDER BY band_key) AS keys
      FROM document_minhash_bands GROUP BY tenant_id, doc_version_id) b
WHERE m.tenant_id = b.tenant_id AND m.doc_version_id = b.doc_version_id;
DROP TABLE document_minhash_bands;
DROP FUNCTION ragd_delete_bands(uuid, uuid[], bigint[]);
-- (fastupdate off: a pending list would be scanned whole by every lookup of a batch's documents)
CREATE INDEX document_minhash_bands ON document_minhash USING gin (bands) WITH (fastupdate = off);

-- For each document d of a batch (docs[i] its number, keys[i] one of its band keys), the session tenant's
-- signatures in the collection sharing at least one band with it, and their band keys. The plan must not depend
-- on statistics (a table just bulk-loaded has none): each document's keys are looked up in the GIN index alone
-- (OFFSET 0 keeps the tenant and collection tests out of that subquery, so no other index can serve it, and
-- sequential scans are off), the tenant and collection checked on what it finds. Planned freely, it once tested
-- every stored signature against each document's keys (SciFact with the check on: 32 s of lookups).
CREATE FUNCTION ragd_band_matches(collection uuid, docs integer[], keys bigint[])
RETURNS TABLE (doc integer, doc_version_id uuid, bands bigint[])
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp SET enable_seqscan = off AS $$
    WITH q AS MATERIALIZED (SELECT x.d, array_agg(x.k) AS keys FROM unnest(docs, keys) AS x(d, k) GROUP BY x.d)
    SELECT q.d, m.doc_version_id, m.bands
    FROM q CROSS JOIN LATERAL (
        SELECT s.doc_version_id, s.bands, s.tenant_id, s.collection_id FROM document_minhash s
        WHERE s.bands && q.keys OFFSET 0) m
    WHERE m.tenant_id = ragd_session_tenant() AND m.collection_id = collection
$$;
REVOKE ALL ON FUNCTION ragd_band_matches(uuid, integer[], bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ragd_band_matches(uuid, integer[], bigint[]) TO ragd_app;
