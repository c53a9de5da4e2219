-- Near-duplicate detection (SPEC section 4): a MinHash signature per document version, over word 5-gram
-- shingles of the whole document, and its LSH band keys. A new document finds its candidates through the
-- band btree (an integer equality, so the index serves tenant sessions under row-level security too); the
-- similarity is then estimated from the two signatures.

CREATE TABLE document_minhash (
    doc_version_id uuid PRIMARY KEY REFERENCES document_versions ON DELETE CASCADE,
    tenant_id      text NOT NULL,
    collection_id  uuid NOT NULL REFERENCES collections ON DELETE CASCADE,
    doc_id         uuid NOT NULL REFERENCES documents ON DELETE CASCADE,
    signature      bytea NOT NULL
);

CREATE TABLE document_minhash_bands (
    doc_version_id uuid NOT NULL REFERENCES document_minhash ON DELETE CASCADE,
    tenant_id      text NOT NULL,
    collection_id  uuid NOT NULL REFERENCES collections ON DELETE CASCADE,
    band_key       bigint NOT NULL,
    PRIMARY KEY (doc_version_id, band_key)
);
CREATE INDEX document_minhash_bands_lookup ON document_minhash_bands (collection_id, band_key) INCLUDE (doc_version_id);

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['document_minhash', 'document_minhash_bands'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format(
            'CREATE POLICY tenant_isolation ON %I USING (tenant_id = current_setting(''ragd.tenant_id'', true)) '
            'WITH CHECK (tenant_id = current_setting(''ragd.tenant_id'', true))', t);
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO ragd_app', t);
    END LOOP;
END
$$;
