-- Filter values as (field, value) text pairs. Under row-level security PostgreSQL uses an index only for
-- LEAKPROOF operators; array overlap/containment and jsonb containment are not, text equality is. So tag
-- and metadata filters look values up here, through a btree, instead of scanning every chunk.
-- field 'tags' holds one row per tag; field 'metadata.<key>' holds the top-level value as jsonb text.

CREATE TABLE document_filter_values (
    doc_id        uuid NOT NULL REFERENCES documents ON DELETE CASCADE,
    tenant_id     text NOT NULL,
    collection_id uuid NOT NULL REFERENCES collections ON DELETE CASCADE,
    field         text NOT NULL,
    value         text NOT NULL,
    PRIMARY KEY (doc_id, field, value)
);
CREATE INDEX document_filter_values_lookup ON document_filter_values (collection_id, field, value) INCLUDE (doc_id);

ALTER TABLE document_filter_values ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON document_filter_values
    USING (tenant_id = current_setting('ragd.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('ragd.tenant_id', true));
GRANT SELECT, INSERT, UPDATE, DELETE ON document_filter_values TO ragd_app;

INSERT INTO document_filter_values (doc_id, tenant_id, collection_id, field, value)
SELECT d.doc_id, d.tenant_id, d.collection_id, 'tags', t FROM documents d, unnest(d.tags) t
UNION
SELECT d.doc_id, d.tenant_id, d.collection_id, 'metadata.' || m.key, m.value::text
FROM documents d, jsonb_each(d.metadata) m;

-- The GIN indexes could not serve tenant sessions (see above).
DROP INDEX IF EXISTS chunks_tags;
DROP INDEX IF EXISTS documents_metadata;
CREATE INDEX chunks_doc_active ON chunks (doc_id) WHERE is_active;
