"""What was asked and kept: answers' reproducibility records, evaluations, and idempotency keys."""

from __future__ import annotations

INSERT_EXECUTION = """
INSERT INTO query_executions (query_id, tenant_id, collection_id, request_id, question_hash, question, plan, models,
                              prompt_version, generator, chunk_ids, retrieved, context_ids, answer, citations,
                              abstained, timings, result_hash)
VALUES (%(query_id)s, %(tenant_id)s, %(collection_id)s, %(request_id)s, %(question_hash)s, %(question)s, %(plan)s,
        %(models)s, %(prompt_version)s, %(generator)s, %(chunk_ids)s, %(retrieved)s, %(context_ids)s, %(answer)s,
        %(citations)s, %(abstained)s, %(timings)s, %(result_hash)s)"""

GET_EXECUTION = """
SELECT q.query_id, c.name AS collection, q.created_at, q.request_id, q.question_hash, q.question, q.plan, q.models,
       q.prompt_version, q.generator, q.chunk_ids, q.retrieved, q.context_ids, q.answer, q.citations, q.abstained,
       q.timings, q.result_hash
FROM query_executions q JOIN collections c USING (collection_id) WHERE q.query_id::text LIKE %(prefix)s
ORDER BY q.created_at DESC LIMIT 2"""


INSERT_EVALUATION = """
INSERT INTO evaluations (eval_id, tenant_id, collection, dataset, kind, config, metrics)
VALUES (%(eval_id)s, %(tenant_id)s, %(collection)s, %(dataset)s, %(kind)s, %(config)s, %(metrics)s)"""
LIST_EVALUATIONS = """
SELECT eval_id, collection, dataset, kind, config, metrics, created_at FROM evaluations
WHERE %(collection)s::text IS NULL OR collection = %(collection)s
ORDER BY created_at DESC, eval_id LIMIT %(limit)s"""


# -- idempotency keys ----------------------------------------------------------------------------------

# The key's record, claimed for this request: a new key, or one older than a day, takes this request's hash.
# a key is taken by this request when new, past its 24 hours, or the same request's whose owner stopped beating
CLAIM_IDEMPOTENCY_KEY = """
INSERT INTO idempotency_keys (tenant_id, key, request_hash, owner, heartbeat_at)
VALUES (%(tenant_id)s, %(key)s, %(request_hash)s, %(owner)s, now())
ON CONFLICT (tenant_id, key) DO UPDATE SET request_hash = EXCLUDED.request_hash, status_code = NULL,
    response = NULL, created_at = now(), owner = EXCLUDED.owner, heartbeat_at = now()
    WHERE idempotency_keys.created_at < now() - interval '24 hours'
       OR (idempotency_keys.status_code IS NULL AND idempotency_keys.request_hash = EXCLUDED.request_hash
           AND (idempotency_keys.heartbeat_at IS NULL
                OR idempotency_keys.heartbeat_at < now() - make_interval(secs => %(stale_s)s)))"""
GET_IDEMPOTENCY_KEY = """
SELECT request_hash, status_code, response, owner IS NOT DISTINCT FROM %(owner)s::uuid
FROM idempotency_keys WHERE key = %(key)s"""
BEAT_IDEMPOTENCY_KEY = """
UPDATE idempotency_keys SET heartbeat_at = now() WHERE key = %(key)s AND owner = %(owner)s"""
FINISH_IDEMPOTENCY_KEY = """
UPDATE idempotency_keys SET status_code = %(status_code)s, response = %(response)s, heartbeat_at = NULL
WHERE key = %(key)s AND owner = %(owner)s"""
RELEASE_IDEMPOTENCY_KEY = """
DELETE FROM idempotency_keys WHERE key = %(key)s AND owner = %(owner)s AND status_code IS NULL"""
