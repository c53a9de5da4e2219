-- Ingest writes about a hundred BM25 postings and 32 LSH band keys per document; each row's foreign key check
-- (a lookup and a row lock on the parent, per row) cost more than the row itself. Neither table needs one:
-- postings exist only for active chunks and are deleted with the version that retires them (RETIRE_VERSIONS,
-- in the same transaction), and band keys are deleted with their document (Collection.delete); the near-duplicate
-- lookup joins the bands to their signature and active version, so a band key cannot outlive its meaning.
-- Isolation is unchanged: row-level security still limits every row to its tenant, and both primary keys end in
-- tenant_id, so no tenant can insert a row that collides with another tenant's.
ALTER TABLE lexical_postings DROP CONSTRAINT lexical_postings_chunk_id_tenant_id_fkey;
ALTER TABLE document_minhash_bands DROP CONSTRAINT document_minhash_bands_doc_version_id_tenant_id_fkey,
    DROP CONSTRAINT document_minhash_bands_collection_id_tenant_id_fkey;
