-- The job queue sends no notifications (issue 56). PostgreSQL has no privilege for LISTEN: any role, a tenant's
-- too, may listen on procrastinate's channels and would hear every tenant's job ids and their timing, and may
-- NOTIFY on them. Workers poll the queue instead (ragd.jobs: listen_notify off), so the inserts' and aborts'
-- triggers go, nothing is sent, and a tenant's NOTIFY on those channels reaches no one.
DROP TRIGGER IF EXISTS procrastinate_jobs_notify_queue_job_inserted_v1 ON procrastinate_jobs;
DROP TRIGGER IF EXISTS procrastinate_jobs_notify_queue_job_aborted_v1 ON procrastinate_jobs;
