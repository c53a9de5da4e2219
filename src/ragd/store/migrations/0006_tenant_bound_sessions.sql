-- Tenant isolation that SQL inside a tenant's session cannot switch off (issue 9).
--
-- 1. A session is bound to its tenant by its login. Each tenant gets a PostgreSQL role of its own
--    (ragd_t_<keyed hash of the tenant id>, created by ragd, member of ragd_app), and the policies compare
--    tenant_id with the tenant mapped to current_user. A tenant session logs in as that role: set_config,
--    RESET, SET ROLE (only to ragd_app, which maps to no tenant) and SET SESSION AUTHORIZATION (superuser
--    only) cannot make it another tenant. The old ragd.tenant_id setting means nothing any more.
-- 2. Every key is tenant-scoped: unique keys end with tenant_id (or lead with a collection id, which only its
--    tenant can reference) and foreign keys carry tenant_id, so a row can only point at rows of its own
--    tenant, and a row planted under an id another tenant will use later blocks nothing.
-- 3. The embedding cache is per tenant: no tenant can read, plant or probe another's entries.
-- 4. Collections, tenants and API keys are written by ragd's privileged session only.

-- A secret known to ragd's privileged session alone: tenant role names and their login passwords are keyed
-- hashes of it, so a tenant can neither guess which other tenants exist from pg_roles nor log in as them.
CREATE TABLE ragd_secret (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    secret    text NOT NULL
);
INSERT INTO ragd_secret (secret) VALUES (replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''));
REVOKE ALL ON ragd_secret FROM PUBLIC;

CREATE TABLE tenant_roles (
    role_name text PRIMARY KEY,
    tenant_id text NOT NULL UNIQUE REFERENCES tenants ON DELETE CASCADE
);
ALTER TABLE tenant_roles ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_role ON tenant_roles USING (role_name = current_user::text);
GRANT SELECT ON tenant_roles TO ragd_app;

-- The tenant of the current role. Schema-qualified with a fixed search_path: a temporary table named
-- tenant_roles, created inside a tenant session, cannot stand in for the real one.
DO $$
BEGIN
    EXECUTE format(
        'CREATE FUNCTION %1$I.ragd_tenant() RETURNS text LANGUAGE sql STABLE PARALLEL SAFE '
        'SET search_path = pg_catalog, %1$I, pg_temp '
        'AS ''SELECT tenant_id FROM %1$I.tenant_roles WHERE role_name = current_user::text''',
        current_schema());
END
$$;
REVOKE ALL ON FUNCTION ragd_tenant() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ragd_tenant() TO ragd_app;

-- ragd_app is a group now: nobody logs in as it.
ALTER ROLE ragd_app NOLOGIN;

-- Tenant-scoped keys. Unique keys keep their leading columns (the indexes serve the same lookups) and gain
-- tenant_id at the end; foreign keys reference (id, tenant_id).
-- First every foreign key between ragd's tables (those to tenants stay): they are added back tenant-scoped.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT conrelid::regclass AS tab, conname FROM pg_constraint
             WHERE contype = 'f' AND connamespace = current_schema()::regnamespace
               AND confrelid <> 'tenants'::regclass ORDER BY conrelid::regclass::text, conname LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', r.tab, r.conname);
    END LOOP;
END
$$;

ALTER TABLE collections ADD CONSTRAINT collections_tenant_key UNIQUE (collection_id, tenant_id);

ALTER TABLE documents DROP CONSTRAINT documents_pkey,
    ADD PRIMARY KEY (doc_id, tenant_id),
    ADD FOREIGN KEY (collection_id, tenant_id) REFERENCES collections (collection_id, tenant_id) ON DELETE CASCADE;

ALTER TABLE document_versions DROP CONSTRAINT document_versions_pkey,
    DROP CONSTRAINT document_versions_doc_id_content_hash_key,
    DROP CONSTRAINT document_versions_doc_id_version_label_key,
    ADD PRIMARY KEY (doc_version_id, tenant_id),
    ADD UNIQUE (doc_id, content_hash, tenant_id),
    ADD UNIQUE (doc_id, version_label, tenant_id),
    ADD FOREIGN KEY (doc_id, tenant_id) REFERENCES documents (doc_id, tenant_id) ON DELETE CASCADE;
DROP INDEX document_versions_one_active;
CREATE UNIQUE INDEX document_versions_one_active ON document_versions (doc_id, tenant_id) WHERE is_active;

ALTER TABLE chunks DROP CONSTRAINT chunks_doc_version_id_chunk_index_key,
    DROP CONSTRAINT chunks_pkey,
    ADD PRIMARY KEY (chunk_id, tenant_id),
    ADD UNIQUE (doc_version_id, chunk_index, tenant_id),
    ADD FOREIGN KEY (collection_id, tenant_id) REFERENCES collections (collection_id, tenant_id) ON DELETE CASCADE,
    ADD FOREIGN KEY (doc_id, tenant_id) REFERENCES documents (doc_id, tenant_id) ON DELETE CASCADE,
    ADD FOREIGN KEY (doc_version_id, tenant_id) REFERENCES document_versions (doc_version_id, tenant_id)
        ON DELETE CASCADE;

ALTER TABLE chunk_embeddings DROP CONSTRAINT chunk_embeddings_pkey,
    ADD PRIMARY KEY (chunk_id, embed_model, tenant_id),
    ADD FOREIGN KEY (chunk_id, tenant_id) REFERENCES chunks (chunk_id, tenant_id) ON DELETE CASCADE,
    ADD FOREIGN KEY (collection_id, tenant_id) REFERENCES collections (collection_id, tenant_id) ON DELETE CASCADE;

ALTER TABLE lexical_postings DROP CONSTRAINT lexical_postings_pkey,
    ADD PRIMARY KEY (chunk_id, term, tenant_id) INCLUDE (tf, doc_len),
    ADD FOREIGN KEY (chunk_id, tenant_id) REFERENCES chunks (chunk_id, tenant_id) ON DELETE CASCADE;

ALTER TABLE lexical_terms
    ADD FOREIGN KEY (collection_id, tenant_id) REFERENCES collections (collection_id, tenant_id) ON DELETE CASCADE;
ALTER TABLE lexical_stats
    ADD FOREIGN KEY (collection_id, tenant_id) REFERENCES collections (collection_id, tenant_id) ON DELETE CASCADE;

ALTER TABLE ingestion_runs DROP CONSTRAINT ingestion_runs_pkey,
    ADD PRIMARY KEY (run_id, tenant_id),
    ADD FOREIGN KEY (collection_id, tenant_id) REFERENCES collections (collection_id, tenant_id) ON DELETE CASCADE;
ALTER TABLE ingestion_items DROP CONSTRAINT ingestion_items_pkey,
    ADD PRIMARY KEY (run_id, item_index, tenant_id),
    ADD FOREIGN KEY (run_id, tenant_id) REFERENCES ingestion_runs (run_id, tenant_id) ON DELETE CASCADE;

ALTER TABLE query_executions DROP CONSTRAINT query_executions_pkey,
    ADD PRIMARY KEY (query_id, tenant_id),
    ADD FOREIGN KEY (collection_id, tenant_id) REFERENCES collections (collection_id, tenant_id) ON DELETE CASCADE;

ALTER TABLE document_filter_values DROP CONSTRAINT document_filter_values_pkey,
    ADD PRIMARY KEY (doc_id, field, value, tenant_id),
    ADD FOREIGN KEY (doc_id, tenant_id) REFERENCES documents (doc_id, tenant_id) ON DELETE CASCADE,
    ADD FOREIGN KEY (collection_id, tenant_id) REFERENCES collections (collection_id, tenant_id) ON DELETE CASCADE;

ALTER TABLE document_minhash DROP CONSTRAINT document_minhash_pkey,
    ADD PRIMARY KEY (doc_version_id, tenant_id),
    ADD FOREIGN KEY (doc_version_id, tenant_id) REFERENCES document_versions (doc_version_id, tenant_id)
        ON DELETE CASCADE,
    ADD FOREIGN KEY (doc_id, tenant_id) REFERENCES documents (doc_id, tenant_id) ON DELETE CASCADE,
    ADD FOREIGN KEY (collection_id, tenant_id) REFERENCES collections (collection_id, tenant_id) ON DELETE CASCADE;
ALTER TABLE document_minhash_bands DROP CONSTRAINT document_minhash_bands_pkey,
    ADD PRIMARY KEY (doc_version_id, band_key, tenant_id),
    ADD FOREIGN KEY (doc_version_id, tenant_id) REFERENCES document_minhash (doc_version_id, tenant_id)
        ON DELETE CASCADE,
    ADD FOREIGN KEY (collection_id, tenant_id) REFERENCES collections (collection_id, tenant_id) ON DELETE CASCADE;

-- The embedding cache, per tenant. The old shared entries cannot be attributed to a tenant and are dropped
-- (a cache: the texts are embedded again on their next ingest).
DROP TABLE embedding_cache;
CREATE TABLE embedding_cache (
    tenant_id    text NOT NULL DEFAULT ragd_tenant() REFERENCES tenants ON DELETE CASCADE,
    embed_model  text NOT NULL,
    content_hash text NOT NULL,
    embedding    vector NOT NULL,
    PRIMARY KEY (embed_model, content_hash, tenant_id)
);
ALTER TABLE embedding_cache ENABLE ROW LEVEL SECURITY;
GRANT SELECT, INSERT ON embedding_cache TO ragd_app;

-- Every tenant policy now compares with the tenant of the logged-in role (an InitPlan: once per statement).
DO $$
DECLARE
    t text;
BEGIN
    EXECUTE 'CREATE POLICY tenant_isolation ON embedding_cache USING (true)';
    FOR t IN SELECT tablename FROM pg_policies
             WHERE schemaname = current_schema() AND policyname = 'tenant_isolation' ORDER BY tablename LOOP
        EXECUTE format(
            'ALTER POLICY tenant_isolation ON %I USING (tenant_id = (SELECT ragd_tenant())) '
            'WITH CHECK (tenant_id = (SELECT ragd_tenant()))', t);
    END LOOP;
END
$$;

-- Only ragd's privileged session creates tenants, collections and keys (with ids it derives itself).
REVOKE INSERT, UPDATE, DELETE ON tenants, api_keys, collections FROM ragd_app;
GRANT UPDATE (generation) ON collections TO ragd_app;
