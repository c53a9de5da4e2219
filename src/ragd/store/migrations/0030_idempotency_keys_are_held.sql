-- Idempotency keys are held while their request runs (issue 68). Two requests with the same key at once both ran
-- (one failed on the other's rows, and that failure became the key's response). A request now claims the key as
-- its `owner` and beats `heartbeat_at` while it runs: another request with the key meanwhile is answered 409 (retry
-- later), and one whose owner stopped beating (its server was killed) takes the key over and runs again.
ALTER TABLE idempotency_keys ADD COLUMN owner uuid, ADD COLUMN heartbeat_at timestamptz;
GRANT UPDATE (owner, heartbeat_at) ON idempotency_keys TO ragd_app;
GRANT DELETE ON idempotency_keys TO ragd_app;
