"""GET /metrics: the Prometheus text of what ragd.metrics counted (summed over `ragd serve --workers N`'s
processes) and of what the database says at scrape time: the ingestion queue (jobs to do and being done, the
oldest waiting job's age), the job workers (alive, and the oldest heartbeat), the connection pools (open, in use,
idle, waiting) and whether the database answers at all. Only aggregates: no tenant, path or text in a label.

Who may scrape: loopback callers, unless RAGD_METRICS_TOKEN is set; then any caller that sends it as a bearer
token, and only they."""

from __future__ import annotations

import hmac
import logging
import os
from collections.abc import Iterator
from typing import Any

from fastapi import Request
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest, multiprocess
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ..engine import Ragd
from ..metrics import REGISTRY
from .errors import ApiError

log = logging.getLogger("ragd.server")
LOOPBACK = {"127.0.0.1", "::1", "localhost"}
CONTENT_TYPE = CONTENT_TYPE_LATEST
QUEUE_SQL = """
SELECT j.status::text, count(*), extract(epoch FROM now() - min(e.at))
FROM procrastinate_jobs j
LEFT JOIN procrastinate_events e ON e.job_id = j.id AND e.type = 'deferred'
WHERE j.status IN ('todo', 'doing')
GROUP BY j.status
"""
WORKERS_SQL = """
SELECT count(*) FILTER (WHERE last_heartbeat > now() - make_interval(secs => %(stale_s)s)),
       count(*) FILTER (WHERE last_heartbeat <= now() - make_interval(secs => %(stale_s)s)),
       coalesce(extract(epoch FROM now() - min(last_heartbeat)), 0)
FROM procrastinate_workers
"""


def allowed(request: Request, r: Ragd) -> None:
    """Raise the refusal of a caller that may not scrape (module docstring)."""
    token = r.settings.metrics_token
    if token is not None:
        sent = request.headers.get("authorization", "")
        scheme, _, value = sent.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(),
                                                                 token.get_secret_value().encode()):
            raise ApiError(401, "unauthorized", "the metrics need RAGD_METRICS_TOKEN: Authorization: Bearer <token>",
                           {"WWW-Authenticate": 'Bearer realm="ragd-metrics"'})
        return
    host = request.client.host if request.client else ""
    if host not in LOOPBACK:
        raise ApiError(403, "forbidden", "the metrics are served to loopback only; set RAGD_METRICS_TOKEN to "
                                         "scrape them from elsewhere")


class DatabaseState(Collector):
    """The gauges read from the database when scraped."""

    def __init__(self, r: Ragd):
        self.r = r

    def collect(self) -> Iterator[GaugeMetricFamily]:
        up = GaugeMetricFamily("ragd_database_up", "Whether the database answered this scrape (1) or not (0)")
        pools = GaugeMetricFamily("ragd_db_pool_connections", "Database connections of ragd's pools by pool "
                                  "(admin, tenant: all tenants' summed) and state (in_use, idle, waiting, max)",
                                  labels=["pool", "state"])
        for pool, stats in self.r.store.pool_stats().items():
            for state in ("in_use", "idle", "waiting", "max"):
                pools.add_metric([pool, state], stats[state])
        yield pools
        try:
            queue, workers = self._read()
        except Exception as exc:  # of any kind: the database's state is unknown, and says so
            log.warning("metrics: the database did not answer: %s", str(exc).splitlines()[0] if str(exc) else exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        jobs = GaugeMetricFamily("ragd_queue_jobs", "Ingestion jobs by state (todo: queued, doing: running)",
                                 labels=["state"])
        oldest = GaugeMetricFamily("ragd_queue_oldest_job_age_seconds",
                                   "Age of the oldest ingestion job still queued (0 when none is)")
        found = {status: (count, age) for status, count, age in queue}
        for state in ("todo", "doing"):
            jobs.add_metric([state], found.get(state, (0, 0))[0])
        oldest.add_metric([], float(found.get("todo", (0, 0))[1] or 0))
        alive, stale, heartbeat = workers
        workers_gauge = GaugeMetricFamily("ragd_workers", "Job workers by whether their heartbeat is recent "
                                          "(alive) or older than RAGD_WORKER_STALLED_S (stale)", labels=["state"])
        workers_gauge.add_metric(["alive"], alive)
        workers_gauge.add_metric(["stale"], stale)
        beat = GaugeMetricFamily("ragd_worker_oldest_heartbeat_age_seconds",
                                 "Age of the oldest heartbeat of a registered job worker (0 when none is)")
        beat.add_metric([], float(heartbeat))
        yield from (jobs, oldest, workers_gauge, beat)

    def _read(self) -> tuple[list[tuple[Any, ...]], tuple[Any, ...]]:
        with self.r.store.admin() as conn:
            conn.execute("SET LOCAL statement_timeout = '2s'")
            queue = conn.execute(QUEUE_SQL).fetchall()
            workers = conn.execute(WORKERS_SQL, {"stale_s": self.r.settings.worker_stalled_s}).fetchone()
        assert workers is not None
        return queue, tuple(workers)


def exposition(r: Ragd) -> bytes:
    """The Prometheus text: the counts (of every worker process in multiprocess mode) and the database's state."""
    state = CollectorRegistry(auto_describe=False)
    state.register(DatabaseState(r))
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        counted = CollectorRegistry()
        multiprocess.MultiProcessCollector(counted)  # type: ignore[no-untyped-call]
        return generate_latest(counted) + generate_latest(state)
    return generate_latest(REGISTRY) + generate_latest(state)
