-- The reproducibility record of each answered query (seed 003): what was asked, with which models, prompt and
-- plan, what was retrieved and put in the context, what was answered, and the result hash. Tenant-private (RLS),
-- so the question text is kept for replay; logs carry only its hash.
ALTER TABLE query_executions
    ADD COLUMN request_id   text,
    ADD COLUMN question     text,
    ADD COLUMN generator    text,
    ADD COLUMN retrieved    jsonb NOT NULL DEFAULT '[]'::jsonb,
    ADD COLUMN context_ids  uuid[] NOT NULL DEFAULT '{}',
    ADD COLUMN answer       text,
    ADD COLUMN citations    jsonb NOT NULL DEFAULT '[]'::jsonb,
    ADD COLUMN abstained    boolean,
    ADD COLUMN timings      jsonb NOT NULL DEFAULT '{}'::jsonb;
CREATE INDEX query_executions_created ON query_executions (tenant_id, created_at DESC);
