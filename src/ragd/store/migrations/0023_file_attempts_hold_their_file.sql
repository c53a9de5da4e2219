-- A queued file's job can run twice at once: procrastinate hands the job of a worker whose heartbeats stopped (its
-- connection to the queue lost, its machine slow) to another worker while the first attempt may still be storing
-- the file. The latest attempt to claim the file (START_FILE counts `attempts`) holds it: each batch of the file's
-- documents first asks this function, in its own transaction, whether its attempt is still the latest, and locks
-- the file's row (FOR SHARE) until it commits. A newer claim waits for that batch, then reads what it stored; an
-- older attempt's next batch is refused and writes nothing. NULL for a file that is not the session tenant's.
CREATE FUNCTION ragd_hold_file(run uuid, file integer, attempt integer) RETURNS boolean
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT f.attempts = attempt AND f.status = 'running' FROM ingestion_files f
    WHERE f.tenant_id = ragd_session_tenant() AND f.run_id = run AND f.ordinal = file
    FOR SHARE
$$;
REVOKE ALL ON FUNCTION ragd_hold_file(uuid, integer, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ragd_hold_file(uuid, integer, integer) TO ragd_app;
