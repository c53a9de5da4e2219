-- Idempotency keys (issue 29): a client that lost the connection during an upload or an index request retries it
-- with the same `Idempotency-Key` header. A key names one request of one tenant: the same request again gets the
-- response the first one finished with (replayed, nothing run twice), or, when the first never finished (the
-- server was killed), runs again (what the first stored is found unchanged); another request under the same key is
-- refused. Kept 24 hours.
CREATE TABLE idempotency_keys (
    tenant_id     text NOT NULL DEFAULT ragd_tenant() REFERENCES tenants ON DELETE CASCADE,
    key           text NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    request_hash  text NOT NULL,
    status_code   integer,
    response      jsonb,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, key)
);
ALTER TABLE idempotency_keys ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON idempotency_keys USING (tenant_id = (SELECT ragd_tenant()))
    WITH CHECK (tenant_id = (SELECT ragd_tenant()));
GRANT SELECT, INSERT ON idempotency_keys TO ragd_app;
GRANT UPDATE (request_hash, status_code, response, created_at) ON idempotency_keys TO ragd_app;
