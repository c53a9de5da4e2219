-- One btree per BM25 posting and per LSH band key, not two.
--
-- A posting went into a (chunk_id, term) primary key and a (collection_id, term) index, a band key into a
-- (doc_version_id, band_key) primary key and a (collection_id, band_key) index: each row was written three times
-- (heap and two btrees), and ingest spent most of its server time there (SciFact, 501,252 postings and 165,856
-- band keys: two btrees 7.0 s and 1.9 s, one 4.3 s and 1.35 s). Every reader knows the collection and the term
-- (or band key), so one key starting with them serves all:
--   * BM25 search scans a term's postings by (collection_id, term), as before, index-only;
--   * a chunk's posting for a term (MaxScore's probes, filtered search) is the exact key (collection_id, term,
--     chunk_id);
--   * retiring a version finds its postings through its chunks' lexemes, from which they were written;
--   * deleting a document finds its band keys from its versions' signatures, from which they were computed.
-- Both keys still end in tenant_id, so no tenant can insert a row that collides with another tenant's.
ALTER TABLE lexical_postings DROP CONSTRAINT lexical_postings_pkey;
DROP INDEX lexical_postings_term;
ALTER TABLE lexical_postings ADD PRIMARY KEY (collection_id, term, chunk_id, tenant_id) INCLUDE (tf, doc_len);

ALTER TABLE document_minhash_bands DROP CONSTRAINT document_minhash_bands_pkey;
DROP INDEX document_minhash_bands_lookup;
ALTER TABLE document_minhash_bands ADD PRIMARY KEY (collection_id, band_key, doc_version_id, tenant_id);
