-- Original files kept per version (issue 33): content-addressed by their SHA-256, once per tenant however many
-- versions or documents came from them (a JSONL file's records, a version stored again). The bytes are in the
-- row (the embedded default) or, with RAGD_ORIGINALS naming a directory, in a file named by the hash; the row
-- is there either way, so a tenant's originals are listed and checked by the database's own row security.
CREATE TABLE originals (
    tenant_id  text NOT NULL REFERENCES tenants ON DELETE CASCADE,
    sha256     text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    size       bigint NOT NULL CHECK (size >= 0),
    content    bytea,  -- NULL when the bytes are kept outside the database
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, sha256)
);
-- PDFs, images and Office files are compressed already: no attempt to compress them again
ALTER TABLE originals ALTER COLUMN content SET STORAGE EXTERNAL;
REVOKE ALL ON originals FROM PUBLIC;
ALTER TABLE originals ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON originals USING (tenant_id = (SELECT ragd_tenant()))
    WITH CHECK (tenant_id = (SELECT ragd_tenant()));
GRANT SELECT, INSERT ON originals TO ragd_app;

-- Which original a version was read from: its hash, the file's name and its media type. Versions stored before
-- this migration have none until their file is ingested again (`ragd reindex` skips them: nothing to read again).
ALTER TABLE document_versions ADD COLUMN source_sha256 text CHECK (source_sha256 ~ '^[0-9a-f]{64}$'),
                              ADD COLUMN source_name text,
                              ADD COLUMN media_type text;
CREATE INDEX document_versions_source ON document_versions (tenant_id, source_sha256)
    WHERE source_sha256 IS NOT NULL;
-- a version stored before this migration gets its original when the same content is ingested again from a file
GRANT UPDATE (source_sha256, source_name, media_type) ON document_versions TO ragd_app;

-- The originals of `shas` no version of the session's tenant comes from any more (its documents deleted): their
-- rows are deleted, their hashes returned (so bytes kept outside the database are removed too).
CREATE FUNCTION ragd_forget_originals(shas text[]) RETURNS SETOF text
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
    DELETE FROM originals o
    WHERE o.tenant_id = ragd_session_tenant() AND o.sha256 = ANY(shas)
      AND NOT EXISTS (SELECT 1 FROM document_versions v
                      WHERE v.tenant_id = o.tenant_id AND v.source_sha256 = o.sha256)
    RETURNING o.sha256
$$;
REVOKE ALL ON FUNCTION ragd_forget_originals(text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ragd_forget_originals(text[]) TO ragd_app;

-- `ragd eval --save`: each evaluation's figures per plan, kept to be compared over time (the web page's charts).
CREATE TABLE evaluations (
    eval_id    uuid NOT NULL,
    tenant_id  text NOT NULL REFERENCES tenants ON DELETE CASCADE,
    collection text NOT NULL,
    dataset    text NOT NULL,
    kind       text NOT NULL CHECK (kind IN ('retrieval', 'answers')),
    config     jsonb NOT NULL DEFAULT '{}'::jsonb,
    metrics    jsonb NOT NULL CHECK (jsonb_typeof(metrics) = 'object'),  -- {plan: {metric: value}}
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, eval_id)
);
CREATE INDEX evaluations_recent ON evaluations (tenant_id, created_at DESC);
REVOKE ALL ON evaluations FROM PUBLIC;
ALTER TABLE evaluations ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON evaluations USING (tenant_id = (SELECT ragd_tenant()))
    WITH CHECK (tenant_id = (SELECT ragd_tenant()));
GRANT SELECT, INSERT ON evaluations TO ragd_app;
