-- ragd schema v1: tenants, collections, documents, versions, chunks, embeddings,
-- BM25 lexical index, embedding cache, ingestion runs, query records; RLS on every tenant-scoped table.

CREATE EXTENSION IF NOT EXISTS vector;

-- The role tenant-scoped work runs as. It is neither a superuser nor a table owner,
-- so row-level security always applies to it.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'ragd_app') THEN
        CREATE ROLE ragd_app NOLOGIN NOSUPERUSER NOBYPASSRLS;
    END IF;
END
$$;
GRANT ragd_app TO CURRENT_USER;

CREATE TABLE tenants (
    tenant_id   text PRIMARY KEY CHECK (tenant_id ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$'),
    name        text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
    key_id      uuid PRIMARY KEY,
    tenant_id   text NOT NULL REFERENCES tenants ON DELETE CASCADE,
    key_hash    text NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);

CREATE TABLE collections (
    collection_id uuid PRIMARY KEY,
    tenant_id     text NOT NULL REFERENCES tenants ON DELETE CASCADE,
    name          text NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$'),
    embed_model   text NOT NULL CHECK (embed_model <> ''),
    embed_dims    integer NOT NULL CHECK (embed_dims BETWEEN 1 AND 16000),
    chunk_policy  jsonb NOT NULL DEFAULT '{}'::jsonb,
    generation    bigint NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, name)
);

CREATE TABLE documents (
    doc_id        uuid PRIMARY KEY,
    tenant_id     text NOT NULL REFERENCES tenants ON DELETE CASCADE,
    collection_id uuid NOT NULL REFERENCES collections ON DELETE CASCADE,
    external_id   text NOT NULL CHECK (external_id <> ''),
    source_uri    text NOT NULL,
    source_type   text NOT NULL,
    title         text,
    tags          text[] NOT NULL DEFAULT '{}',
    metadata      jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(metadata) = 'object'),
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (collection_id, external_id)
);
CREATE INDEX documents_metadata ON documents USING gin (metadata jsonb_path_ops);

CREATE TABLE document_versions (
    doc_version_id uuid PRIMARY KEY,
    tenant_id      text NOT NULL REFERENCES tenants ON DELETE CASCADE,
    doc_id         uuid NOT NULL REFERENCES documents ON DELETE CASCADE,
    version_label  text NOT NULL,
    content_hash   text NOT NULL CHECK (content_hash ~ '^[0-9a-f]{64}$'),
    effective_at   timestamptz NOT NULL DEFAULT now(),
    is_active      boolean NOT NULL DEFAULT false,
    artifact_uri   text,
    chunk_count    integer NOT NULL DEFAULT 0 CHECK (chunk_count >= 0),
    created_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (doc_id, content_hash),
    UNIQUE (doc_id, version_label)
);
-- One active version per document.
CREATE UNIQUE INDEX document_versions_one_active ON document_versions (doc_id) WHERE is_active;
CREATE INDEX document_versions_content_hash ON document_versions (content_hash) WHERE is_active;

CREATE TABLE chunks (
    chunk_id       uuid PRIMARY KEY,
    tenant_id      text NOT NULL REFERENCES tenants ON DELETE CASCADE,
    collection_id  uuid NOT NULL REFERENCES collections ON DELETE CASCADE,
    doc_id         uuid NOT NULL REFERENCES documents ON DELETE CASCADE,
    doc_version_id uuid NOT NULL REFERENCES document_versions ON DELETE CASCADE,
    chunk_index    integer NOT NULL CHECK (chunk_index >= 0),
    heading_path   jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(heading_path) = 'array'),
    chunk_type     text NOT NULL CHECK (chunk_type IN ('paragraph', 'table', 'list', 'code', 'heading')),
    content        text NOT NULL CHECK (content <> ''),
    content_hash   text NOT NULL,
    token_count    integer NOT NULL CHECK (token_count >= 0),
    tags           text[] NOT NULL DEFAULT '{}',
    metadata       jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(metadata) = 'object'),
    -- mirrors the version's is_active so reads filter without a join
    is_active      boolean NOT NULL DEFAULT false,
    effective_at   timestamptz NOT NULL DEFAULT now(),
    -- English stems and stop words of heading path + content, source of the BM25 postings
    lexemes        tsvector NOT NULL,
    UNIQUE (doc_version_id, chunk_index)
);
CREATE INDEX chunks_active ON chunks (collection_id, doc_id, chunk_index) WHERE is_active;
CREATE INDEX chunks_tags ON chunks USING gin (tags) WHERE is_active;

-- Embeddings live apart from chunks so a collection can be re-embedded with another model.
-- Each collection gets a partial HNSW index over its active rows, at its own dimensions
-- (created with the collection: see queries.create_hnsw_index).
CREATE TABLE chunk_embeddings (
    chunk_id      uuid NOT NULL REFERENCES chunks ON DELETE CASCADE,
    tenant_id     text NOT NULL REFERENCES tenants ON DELETE CASCADE,
    collection_id uuid NOT NULL REFERENCES collections ON DELETE CASCADE,
    embed_model   text NOT NULL,
    is_active     boolean NOT NULL DEFAULT false,
    embedding     vector NOT NULL,
    PRIMARY KEY (chunk_id, embed_model)
);
CREATE INDEX chunk_embeddings_collection ON chunk_embeddings (collection_id, embed_model) WHERE is_active;

-- The same text is never embedded twice by the same model.
CREATE TABLE embedding_cache (
    embed_model  text NOT NULL,
    content_hash text NOT NULL,
    embedding    vector NOT NULL,
    PRIMARY KEY (embed_model, content_hash)
);

-- BM25: postings hold exactly the active chunks' terms (English stemming and stop words
-- through to_tsvector('english')); per-term document frequencies and per-collection
-- length statistics are kept exact in the same transaction that activates or retires a version.
CREATE TABLE lexical_postings (
    chunk_id      uuid NOT NULL REFERENCES chunks ON DELETE CASCADE,
    term          text NOT NULL,
    tenant_id     text NOT NULL,
    collection_id uuid NOT NULL,
    tf            integer NOT NULL CHECK (tf > 0),
    doc_len       integer NOT NULL CHECK (doc_len > 0),
    PRIMARY KEY (chunk_id, term)
);
CREATE INDEX lexical_postings_term ON lexical_postings (collection_id, term) INCLUDE (chunk_id, tf, doc_len);

CREATE TABLE lexical_terms (
    collection_id uuid NOT NULL REFERENCES collections ON DELETE CASCADE,
    term          text NOT NULL,
    tenant_id     text NOT NULL,
    df            integer NOT NULL CHECK (df >= 0),
    PRIMARY KEY (collection_id, term)
);

CREATE TABLE lexical_stats (
    collection_id uuid PRIMARY KEY REFERENCES collections ON DELETE CASCADE,
    tenant_id     text NOT NULL,
    n_chunks      bigint NOT NULL DEFAULT 0 CHECK (n_chunks >= 0),
    total_len     bigint NOT NULL DEFAULT 0 CHECK (total_len >= 0)
);

CREATE TABLE ingestion_runs (
    run_id        uuid PRIMARY KEY,
    tenant_id     text NOT NULL REFERENCES tenants ON DELETE CASCADE,
    collection_id uuid NOT NULL REFERENCES collections ON DELETE CASCADE,
    status        text NOT NULL CHECK (status IN ('running', 'succeeded', 'failed')),
    stage         text,
    started_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz,
    config        jsonb NOT NULL DEFAULT '{}'::jsonb,
    stats         jsonb NOT NULL DEFAULT '{}'::jsonb,
    error         text
);
CREATE INDEX ingestion_runs_started ON ingestion_runs (tenant_id, started_at DESC);

CREATE TABLE ingestion_items (
    run_id         uuid NOT NULL REFERENCES ingestion_runs ON DELETE CASCADE,
    item_index     integer NOT NULL,
    tenant_id      text NOT NULL,
    source_uri     text NOT NULL,
    external_id    text,
    status         text NOT NULL CHECK (status IN ('ingested', 'updated', 'unchanged', 'duplicate', 'failed')),
    error_code     text,
    reason         text,
    doc_id         uuid,
    doc_version_id uuid,
    chunk_count    integer NOT NULL DEFAULT 0,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, item_index)
);

CREATE TABLE query_executions (
    query_id       uuid PRIMARY KEY,
    tenant_id      text NOT NULL REFERENCES tenants ON DELETE CASCADE,
    collection_id  uuid NOT NULL REFERENCES collections ON DELETE CASCADE,
    created_at     timestamptz NOT NULL DEFAULT now(),
    question_hash  text NOT NULL,
    plan           jsonb NOT NULL,
    models         jsonb NOT NULL,
    prompt_version text,
    chunk_ids      uuid[] NOT NULL DEFAULT '{}',
    result_hash    text
);

-- Row-level security: a session acting for a tenant sets ragd.tenant_id and sees only its rows.
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY[
        'tenants', 'api_keys', 'collections', 'documents', 'document_versions', 'chunks',
        'chunk_embeddings', 'lexical_postings', 'lexical_terms', 'lexical_stats',
        'ingestion_runs', 'ingestion_items', 'query_executions'
    ] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format(
            'CREATE POLICY tenant_isolation ON %I USING (tenant_id = current_setting(''ragd.tenant_id'', true)) '
            'WITH CHECK (tenant_id = current_setting(''ragd.tenant_id'', true))', t);
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO ragd_app', t);
    END LOOP;
END
$$;
GRANT SELECT, INSERT ON embedding_cache TO ragd_app;
GRANT USAGE ON SCHEMA public TO ragd_app;
