"""Ingestion runs and their items, and queued runs (ragd.jobs): a tenant's files claimed, held, finished or
cancelled by the workers."""

from __future__ import annotations

INSERT_RUN = """
INSERT INTO ingestion_runs (run_id, tenant_id, collection_id, status, stage, config)
VALUES (%(run_id)s, %(tenant_id)s, %(collection_id)s, 'running', 'extract', %(config)s)"""

RUNNING_RUNS = """
SELECT run_id, tenant_id, config->>'host', config->>'pid' FROM ingestion_runs
WHERE collection_id = %(collection_id)s AND status = 'running' ORDER BY started_at"""
ALL_RUNNING_RUNS = """
SELECT run_id, tenant_id, config->>'host', config->>'pid' FROM ingestion_runs WHERE status = 'running'
ORDER BY started_at, run_id"""

INTERRUPT_RUN = """
UPDATE ingestion_runs SET status = 'failed', error = %(error)s, finished_at = now()
WHERE run_id = %(run_id)s AND tenant_id = %(tenant_id)s AND status = 'running'"""

UPDATE_RUN = """
UPDATE ingestion_runs SET stats = %(stats)s, stage = %(stage)s WHERE run_id = %(run_id)s"""

FINISH_RUN = """
UPDATE ingestion_runs SET status = %(status)s, stage = %(stage)s, stats = %(stats)s, error = %(error)s,
       finished_at = now()
WHERE run_id = %(run_id)s"""

INSERT_ITEMS = """
INSERT INTO ingestion_items (run_id, item_index, tenant_id, source_uri, external_id, status, error_code, reason,
                             doc_id, doc_version_id, chunk_count, extract_seconds, store_seconds)
SELECT %(run_id)s, i, %(tenant_id)s, u, e, s, c, r, d, v, n, xs, ss
FROM unnest(%(indexes)b::int8[], %(source_uris)b::text[], %(external_ids)b::text[], %(statuses)b::text[],
            %(codes)b::text[], %(reasons)b::text[], %(doc_ids)b::uuid[], %(versions)b::uuid[], %(chunks)b::int[],
            %(extract_seconds)b::float8[], %(store_seconds)b::float8[])
     AS x(i, u, e, s, c, r, d, v, n, xs, ss)"""

LIST_RUNS = """
SELECT r.run_id, c.name AS collection, r.status, r.stage, r.started_at, r.finished_at, r.stats, r.error
FROM ingestion_runs r JOIN collections c USING (collection_id) WHERE r.collection_id = %(collection_id)s
ORDER BY r.started_at DESC, r.run_id LIMIT %(limit)s"""

GET_RUN = """
SELECT r.run_id, c.name AS collection, r.status, r.stage, r.started_at, r.finished_at, r.config, r.stats, r.error
FROM ingestion_runs r JOIN collections c USING (collection_id) WHERE r.run_id::text LIKE %(prefix)s
ORDER BY r.started_at DESC LIMIT 2"""

RUN_ITEMS = """
SELECT item_index, source_uri, external_id, status, error_code, reason, doc_id, chunk_count, extract_seconds,
       store_seconds
FROM ingestion_items WHERE run_id = %(run_id)s ORDER BY item_index"""


# -- queued runs (ragd.jobs) -------------------------------------------------------------------------

# one enqueue of a tenant at a time, so two cannot both pass its bound: the row of ragd_locks named after the tenant's
# queue, locked to the end of the transaction (made on first use). No tenant can read or lock those rows; an
# advisory lock's key any role could take, and a tenant holding it stalled every upload waiting on it.
QUEUE_LOCK = """
INSERT INTO ragd_locks (name) VALUES ('queue:' || %(tenant_id)s)
ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name"""
OPEN_FILES = """
SELECT count(*) FROM ingestion_files WHERE tenant_id = %(tenant_id)s AND status IN ('queued', 'running')"""
RECENT_FILE_RATE = """
SELECT count(*) / 60.0 FROM ingestion_files
WHERE tenant_id = %(tenant_id)s AND status = 'done' AND finished_at > now() - interval '1 minute'"""
INSERT_QUEUED_RUN = """
INSERT INTO ingestion_runs (run_id, tenant_id, collection_id, status, stage, config)
VALUES (%(run_id)s, %(tenant_id)s, %(collection_id)s, 'queued', 'queued', %(config)s)"""
INSERT_QUEUED_FILE = """
INSERT INTO ingestion_files (run_id, ordinal, tenant_id, name, source_uri, size, content)
VALUES (%(run_id)s, %(ordinal)s, %(tenant_id)s, %(name)s, %(source_uri)s, length(%(content)s), %(content)s)"""
SET_FILE_JOBS = """
UPDATE ingestion_files f SET job_id = x.j FROM unnest(%(ordinals)s::int[], %(job_ids)s::bigint[]) AS x(o, j)
WHERE f.run_id = %(run_id)s AND f.ordinal = x.o"""
LOCK_RUN = "SELECT status FROM ingestion_runs WHERE run_id = %(run_id)s FOR UPDATE"
START_FILE = """
WITH f AS (
    UPDATE ingestion_files SET status = 'running', attempts = attempts + 1, started_at = coalesce(started_at, now()),
                               worker = %(worker)s
    WHERE run_id = %(run_id)s AND ordinal = %(ordinal)s AND status IN ('queued', 'running') RETURNING *
), r AS (
    UPDATE ingestion_runs SET status = 'running', stage = 'store'
    WHERE run_id = %(run_id)s AND status = 'queued' AND EXISTS (SELECT 1 FROM f) RETURNING run_id
)
SELECT f.tenant_id, c.name, f.name, f.source_uri, f.content, ir.config, f.attempts
FROM f JOIN ingestion_runs ir ON ir.run_id = f.run_id JOIN collections c ON c.collection_id = ir.collection_id"""
PART_ITEMS_DONE = """
SELECT item_index FROM ingestion_items
WHERE run_id = %(run_id)s AND item_index >= %(low)s AND item_index < %(high)s ORDER BY item_index"""
FINISH_FILE = """
UPDATE ingestion_files SET status = 'done', content = NULL, finished_at = now()
WHERE run_id = %(run_id)s AND ordinal = %(ordinal)s AND status IN ('queued', 'running') AND attempts = %(attempt)s"""
# whether an attempt of a file's job is still the file's latest (a tenant session, through the definer function;
# the worker's own session, locking the row itself), held to the end of the transaction
HOLD_FILE = "SELECT ragd_hold_file(%(run_id)s, %(ordinal)s, %(attempt)s)"
OWN_FILE = """
SELECT attempts = %(attempt)s AND status = 'running' FROM ingestion_files
WHERE run_id = %(run_id)s AND ordinal = %(ordinal)s FOR UPDATE"""
CANCEL_FILES = """
UPDATE ingestion_files SET status = 'cancelled', content = NULL, finished_at = now()
WHERE run_id = %(run_id)s AND status = 'queued' RETURNING job_id"""
CANCEL_RUN = "UPDATE ingestion_runs SET status = 'cancelled', error = %(error)s WHERE run_id = %(run_id)s"
# a queued run's stats from its items; closed (succeeded, or failed when every item failed; a cancelled run stays
# cancelled) once none of its files is queued or running
CLOSE_QUEUED_RUN = """
WITH f AS (
    SELECT count(*) FILTER (WHERE status IN ('queued', 'running')) AS open FROM ingestion_files
    WHERE run_id = %(run_id)s
), s AS (
    SELECT coalesce(sum(n), 0) AS items, coalesce(sum(n) FILTER (WHERE status = 'failed'), 0) AS failed,
           coalesce(sum(chunks) FILTER (WHERE status IN ('ingested', 'updated')), 0) AS chunks,
           coalesce(jsonb_object_agg(status, n ORDER BY status), '{}'::jsonb) AS counts
    FROM (SELECT status, count(*) AS n, sum(chunk_count) AS chunks FROM ingestion_items
          WHERE run_id = %(run_id)s GROUP BY status) c
)
UPDATE ingestion_runs r SET
    stats = r.stats || jsonb_build_object('items', s.items, 'counts', s.counts, 'chunks', s.chunks,
                                          'seconds', round(extract(epoch FROM now() - r.started_at)::numeric, 3)),
    status = CASE WHEN f.open > 0 OR r.status NOT IN ('queued', 'running') THEN r.status
                  WHEN s.items > 0 AND s.failed = s.items THEN 'failed' ELSE 'succeeded' END,
    stage = CASE WHEN f.open = 0 THEN 'done' ELSE r.stage END,
    error = CASE WHEN f.open = 0 AND r.status IN ('queued', 'running') AND s.items > 0 AND s.failed = s.items
                 THEN 'every item failed' ELSE r.error END,
    finished_at = CASE WHEN f.open = 0 THEN coalesce(r.finished_at, now()) ELSE r.finished_at END
FROM f, s WHERE r.run_id = %(run_id)s"""
# A queued run's files, each with its state (its items are numbered from ordinal x 1,000,000).
RUN_FILE_LIST = """
SELECT ordinal, name, size, status, attempts, started_at, finished_at FROM ingestion_files
WHERE run_id = %(run_id)s ORDER BY ordinal LIMIT 10000"""
RUN_FILES = """
SELECT status, count(*) FROM ingestion_files WHERE run_id = %(run_id)s GROUP BY status ORDER BY status"""
