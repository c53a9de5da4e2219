-- The BM25 postings get their two btrees back; the LSH band keys keep one, with tenant_id leading.
--
-- Migration 13 gave each one btree: postings (collection_id, term, chunk_id, tenant_id), band keys (collection_id,
-- band_key, doc_version_id, tenant_id). Stores migrated by it are brought here; a new store passes through it.
-- (IF NOT EXISTS: a store migrated by a development build whose 13 already kept the postings' two btrees.)
--
-- Postings: one key saved a third of their ingest time, but a term's postings then lie in chunk id order, not in
-- the order they were written, and lexical search (an index-only scan checking each posting's visibility) was a
-- quarter slower at 40k chunks. Retiring a version, MaxScore's probes and filtered search reach a chunk's postings
-- by (chunk_id, term); BM25 search scans a term's postings by (collection_id, term), as before migration 13.
--
-- Band keys: every reader knows the tenant, the collection and the band key, so one key starting with them serves
-- all: the near-duplicate lookup (band keys of a batch), and deleting a document, which finds its band keys from
-- its versions' signatures, from which they were computed (SciFact, 165,856 band keys replayed in 57 batches:
-- 1.4-2.0 s with two btrees, 1.1-1.6 s with one). tenant_id leads the key: row-level security adds
-- `tenant_id = <the session's tenant>` to every scan, and as the key's first column it bounds the scan with the
-- others (behind an unbounded column it would be costed as a skip scan). With tenant_id in the key no tenant can
-- insert a row that collides with another tenant's.
ALTER TABLE lexical_postings DROP CONSTRAINT lexical_postings_pkey;
ALTER TABLE lexical_postings ADD PRIMARY KEY (chunk_id, term, tenant_id) INCLUDE (tf, doc_len);
CREATE INDEX IF NOT EXISTS lexical_postings_term ON lexical_postings (collection_id, term) INCLUDE (chunk_id, tf, doc_len, tenant_id);

ALTER TABLE document_minhash_bands DROP CONSTRAINT document_minhash_bands_pkey;
ALTER TABLE document_minhash_bands ADD PRIMARY KEY (tenant_id, collection_id, band_key, doc_version_id);
