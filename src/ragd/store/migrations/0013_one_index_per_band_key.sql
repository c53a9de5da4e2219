-- One btree per LSH band key, not two.
--
-- A band key went into a (doc_version_id, band_key) primary key and a (collection_id, band_key) index: each row was
-- written three times (heap and two btrees). Every reader knows the tenant, the collection and the band key, so one
-- key starting with them serves all: the near-duplicate lookup (band keys of a batch), as before, and deleting a
-- document, which finds its band keys from its versions' signatures, from which they were computed (SciFact,
-- 165,856 band keys replayed in 57 batches: 1.4-2.0 s -> 1.1-1.6 s).
-- tenant_id leads the key: row-level security adds `tenant_id = <the session's tenant>` to every scan, and as the
-- key's first column it bounds the scan with the others (behind an unbounded column it would be costed as a skip
-- scan). With tenant_id in the key no tenant can insert a row that collides with another tenant's.
--
-- The BM25 postings keep their two btrees: one key (tenant, collection, term, chunk) saved a third of their ingest
-- time, but a term's postings then lie in chunk id order, not in the order they were written, and lexical search
-- (an index-only scan checking each posting's visibility) was a quarter slower at 40k chunks.
ALTER TABLE document_minhash_bands DROP CONSTRAINT document_minhash_bands_pkey;
DROP INDEX document_minhash_bands_lookup;
ALTER TABLE document_minhash_bands ADD PRIMARY KEY (tenant_id, collection_id, band_key, doc_version_id);
