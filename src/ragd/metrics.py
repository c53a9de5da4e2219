"""Prometheus metrics the library and the server count as they work (prometheus-client): HTTP requests by route
and status with their latency, answers (answered or abstained) with each stage's latency, ingested items by
outcome. What is only known by asking the database (the queue, the workers, the pools, whether it answers) is read
when /metrics is scraped (ragd.server.metrics).

Labels are bounded: route templates (`unmatched` for a path no route serves), methods (`other` for one the API
does not serve), statuses, stages and outcomes: never a path, a document's text or a
question. A tenant label is added only with RAGD_METRICS_TENANT_LABELS=true (one series per tenant: mind the
cardinality); otherwise it is empty, which Prometheus treats as absent.

Under `ragd serve --workers N` the processes write their counts to PROMETHEUS_MULTIPROC_DIR (prometheus-client's
multiprocess mode), which the server sets for its workers, and a scrape sums them."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)
# seconds: 5 ms to 60 s (a search is tens of ms, an upload or a generated answer may take tens of seconds)
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
STAGES = ("embed", "vector", "lexical", "fuse", "rerank", "generate")

REQUESTS = Counter("ragd_http_requests", "HTTP requests served, by route template, method and status",
                   ["route", "method", "status", "tenant"], registry=REGISTRY)
REQUEST_SECONDS = Histogram("ragd_http_request_duration_seconds", "HTTP request latency by route template",
                            ["route", "method"], buckets=BUCKETS, registry=REGISTRY)
ANSWERS = Counter("ragd_answers", "Questions answered, by outcome (answered or abstained)", ["outcome", "tenant"],
                  registry=REGISTRY)
ANSWER_SECONDS = Histogram("ragd_answer_stage_duration_seconds",
                           "Latency of each stage of an answer (embed, vector, lexical, fuse, rerank, generate) "
                           "and of the whole (total)", ["stage"], buckets=BUCKETS, registry=REGISTRY)
INGESTED = Counter("ragd_ingest_items", "Ingested items by outcome (ingested, updated, unchanged, duplicate, "
                                        "skipped, failed)", ["status", "tenant"], registry=REGISTRY)


@functools.cache
def _tenant_labels() -> bool:
    """RAGD_METRICS_TENANT_LABELS, read once per process (not on every request)."""
    return os.environ.get("RAGD_METRICS_TENANT_LABELS", "").strip().lower() in ("1", "true", "yes", "on")


def tenant_label(tenant: str | None) -> str:
    """The tenant as a label value: itself when RAGD_METRICS_TENANT_LABELS is on, else empty."""
    return (tenant or "") if _tenant_labels() else ""


def count_answer(tenant: str, abstained: bool, stages_ms: Mapping[str, float], total_ms: float) -> None:
    """An answer: its outcome and each stage's time (milliseconds, as the query log has them)."""
    ANSWERS.labels("abstained" if abstained else "answered", tenant_label(tenant)).inc()
    for stage in STAGES:
        if stage in stages_ms:
            ANSWER_SECONDS.labels(stage).observe(stages_ms[stage] / 1000)
    ANSWER_SECONDS.labels("total").observe(total_ms / 1000)


def count_items(tenant: str, statuses: Mapping[str, int]) -> None:
    """A run's items by outcome."""
    label = tenant_label(tenant)
    for status, n in statuses.items():
        if n:
            INGESTED.labels(status, label).inc(n)


def method_label(method: str) -> str:
    """A request's method as a label value: one of the methods HTTP defines for an API, else `other`; a client
    may name any method it likes, and each would otherwise be a series of its own for as long as the server runs."""
    method = method.upper()
    return method if method in METHODS else "other"


def count_request(route: str, method: str, status: int, tenant: str | None, seconds: float) -> None:
    """A request served: `route` is its route template (or `unmatched`), never its path."""
    shown = method_label(method)
    REQUESTS.labels(route, shown, str(status), tenant_label(tenant)).inc()
    REQUEST_SECONDS.labels(route, shown).observe(seconds)
