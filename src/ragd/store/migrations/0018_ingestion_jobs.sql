-- Ingestion as jobs (issue 32). procrastinate's own tables and functions (its schema, as the pinned release
-- ships it) live in ragd's database, created here, so the embedded default needs nothing more. They belong to
-- the privileged login: no tenant role may read the queue (its jobs name every tenant's runs) or call its
-- functions.
-- include: procrastinate schema

DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
             WHERE p.proname LIKE 'procrastinate\_%' AND p.pronamespace = current_schema()::regnamespace LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
    END LOOP;
END
$$;

-- A queued run's status goes queued -> running -> succeeded/failed, or cancelled (its queued files dropped).
ALTER TABLE ingestion_runs DROP CONSTRAINT ingestion_runs_status_check;
ALTER TABLE ingestion_runs ADD CONSTRAINT ingestion_runs_status_check
    CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled'));

-- A queued run's files: one job each. The file's bytes travel in the database, so a worker on any machine reads
-- them; they are dropped once the file's items are stored. A file's items are numbered from its ordinal times
-- 1,000,000 (a container or a file of records holds at most that many documents), so a retried job knows which
-- of its documents a killed attempt already stored (in the same transaction as their items).
ALTER TABLE ingestion_items ALTER COLUMN item_index TYPE bigint;
CREATE TABLE ingestion_files (
    run_id      uuid NOT NULL,
    ordinal     integer NOT NULL CHECK (ordinal >= 0),
    tenant_id   text NOT NULL,
    name        text NOT NULL,  -- the documents' external id (a path or an upload's name)
    source_uri  text NOT NULL,
    size        bigint NOT NULL,
    content     bytea,
    status      text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'done', 'cancelled')),
    job_id      bigint,
    attempts    integer NOT NULL DEFAULT 0,
    worker      text,  -- host:pid of the process storing it (its last attempt)
    started_at  timestamptz,
    finished_at timestamptz,
    PRIMARY KEY (tenant_id, run_id, ordinal),
    FOREIGN KEY (run_id, tenant_id) REFERENCES ingestion_runs (run_id, tenant_id) ON DELETE CASCADE
);
CREATE INDEX ingestion_files_open ON ingestion_files (tenant_id) WHERE status IN ('queued', 'running');
REVOKE ALL ON ingestion_files FROM PUBLIC;
-- a tenant sees its own files' progress, never their bytes
ALTER TABLE ingestion_files ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON ingestion_files USING (tenant_id = (SELECT ragd_tenant()))
    WITH CHECK (tenant_id = (SELECT ragd_tenant()));
GRANT SELECT (run_id, ordinal, tenant_id, name, source_uri, size, status, attempts, worker, started_at, finished_at)
    ON ingestion_files TO ragd_app;
