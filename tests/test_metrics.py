"""GET /metrics of a real `ragd serve`: what was served, answered and ingested, the queue and the database's state,
summed over worker processes, never a question or a document in a label, and only to whom it is for."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import httpx
from fastapi.testclient import TestClient
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ragd.config import Settings, load_settings
from ragd.metrics import REGISTRY
from ragd.server import create_app

from .conftest import REPO, SAMPLES, run_cli, serving

QUESTION = "How many days of parental leave do employees in Germany get?"
OFF_TOPIC = "What is the boiling point of liquid nitrogen on Titan?"


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    """The sum of the samples of `name` whose labels include `labels`."""
    return sum(v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= set(ls))


def test_metrics_count_requests_answers_ingests_and_read_the_database(cli_env: dict[str, str], name: str,
                                                                      tmp_path: Path) -> None:
    env = {**cli_env, "RAGD_RERANKER": "none", "RAGD_RATE_LIMIT_PER_MINUTE": "0", "RAGD_SERVE_JOBS": "off"}
    tenant = "metrics-" + uuid.uuid4().hex[:6]
    key = run_cli(["keys", "create", "--tenant", tenant], env).stdout.strip().splitlines()[-1]
    auth = {"Authorization": f"Bearer {key}"}
    secret_id = "board-minutes-" + uuid.uuid4().hex[:8]
    with serving(env) as server, httpx.Client(base_url=server["url"], headers=auth, timeout=60) as http:
        files = [("files", (p.name, p.read_bytes())) for p in sorted(SAMPLES.iterdir())]
        assert http.post("/v1/documents", params={"collection": name}, files=files).status_code == 200
        for question in (QUESTION, OFF_TOPIC):
            assert http.post("/v1/query", json={"question": question, "collection": name}).status_code == 200
        assert http.get(f"/v1/documents/{secret_id}", params={"collection": name}).status_code == 404
        queued = tmp_path / "later.md"
        queued.write_text("# Later\n\nQueued and not yet stored.\n", encoding="utf-8")
        accepted = http.post("/v1/documents", params={"collection": name, "wait": "false"},
                             files=[("files", ("later.md", queued.read_bytes()))])
        assert accepted.status_code == 202
        scraped = httpx.get(server["url"] + "/metrics", timeout=30)  # loopback, no key needed
    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain")
    text = scraped.text
    samples = _samples(text)
    assert _value(samples, "ragd_http_requests_total", route="/v1/query", method="POST", status="200") == 2
    assert _value(samples, "ragd_http_requests_total", route="/v1/documents/{ref:docref}", status="404") == 1
    assert _value(samples, "ragd_http_request_duration_seconds_count", route="/v1/query") == 2
    assert _value(samples, "ragd_answers_total", outcome="answered") >= 1
    assert _value(samples, "ragd_answers_total", outcome="abstained") >= 1
    assert _value(samples, "ragd_answer_stage_duration_seconds_count", stage="embed") == 2
    assert _value(samples, "ragd_answer_stage_duration_seconds_count", stage="total") == 2
    assert _value(samples, "ragd_ingest_items_total", status="ingested") >= len(files)
    assert _value(samples, "ragd_database_up") == 1
    assert _value(samples, "ragd_queue_jobs", state="todo") >= 1  # no worker runs: the upload waits
    assert _value(samples, "ragd_queue_oldest_job_age_seconds") >= 0
    assert ("ragd_db_pool_connections", (("pool", "admin"), ("state", "max"))) in samples
    assert ("ragd_workers", (("state", "alive"),)) in samples
    # labels carry templates and outcomes: no question, document id, collection or tenant
    for secret in (secret_id, "parental", "Titan", name, tenant, key):
        assert secret not in text
    # the Grafana dashboard in docs/ asks only for series this scrape has
    dashboard = json.loads((REPO / "docs" / "grafana" / "ragd-dashboard.json").read_text(encoding="utf-8"))
    asked = {name for panel in dashboard["panels"] for target in panel["targets"]
             for name in re.findall(r"\bragd_[a-z_]+", target["expr"])}
    assert len(asked) >= 10 and asked <= {n for n, _ in samples}, asked - {n for n, _ in samples}


def test_metrics_need_their_token_or_a_loopback_caller(settings: Settings) -> None:
    guarded = create_app(Settings(**{**settings.model_dump(), "metrics_token": "scrape-me"}))
    open_ = create_app(settings)
    remote = ("10.1.2.3", 40000)
    with TestClient(guarded, client=remote) as c:
        refused = c.get("/metrics")
        wrong = c.get("/metrics", headers={"Authorization": "Bearer nope"})
        ok = c.get("/metrics", headers={"Authorization": "Bearer scrape-me"})
    with TestClient(open_, client=remote) as c:
        far = c.get("/metrics")
    assert refused.status_code == 401 and wrong.status_code == 401 and refused.json()["error"] == "unauthorized"
    assert ok.status_code == 200 and "ragd_database_up" in ok.text
    assert far.status_code == 403 and "RAGD_METRICS_TOKEN" in far.json()["message"]


def test_metrics_sum_the_worker_processes(cli_env: dict[str, str]) -> None:
    env = {**cli_env, "RAGD_RERANKER": "none", "RAGD_SERVE_JOBS": "off"}
    with serving(env, "--workers", "2") as server, httpx.Client(base_url=server["url"], timeout=30) as http:
        before = _value(_samples(http.get("/metrics").text), "ragd_http_requests_total", route="/healthz")
        for _ in range(12):  # new connections: spread over both processes
            assert httpx.get(server["url"] + "/healthz", timeout=30).status_code == 200
        scrapes = [_samples(httpx.get(server["url"] + "/metrics", timeout=30).text) for _ in range(4)]
    counts = {_value(s, "ragd_http_requests_total", route="/healthz") for s in scrapes}
    assert counts == {before + 12}  # every scrape, whichever process answers it, sums both


def test_an_empty_metrics_token_is_no_token(settings: Settings, monkeypatch: Any) -> None:
    """`RAGD_METRICS_TOKEN=` (a template whose secret was missing) keeps /metrics to loopback: an empty bearer
    value from another host is refused, as is no header."""
    monkeypatch.setenv("RAGD_METRICS_TOKEN", "")
    assert load_settings().metrics_token is None
    for blank in ("", "   "):
        def app(blank: str = blank) -> Any:  # (an app's lifespan runs once)
            return create_app(Settings(**{**settings.model_dump(), "metrics_token": blank}))

        with TestClient(app(), client=("10.1.2.3", 40000)) as c:
            for headers in ({"Authorization": "Bearer "}, {"Authorization": "Bearer"}, {}):
                refused = c.get("/metrics", headers=headers)
                assert refused.status_code == 403, (blank, headers, refused.status_code)
        with TestClient(app(), client=("127.0.0.1", 40000)) as c:
            assert c.get("/metrics").status_code == 200


def test_metric_labels_stay_bounded_whatever_methods_and_paths_are_sent(settings: Settings) -> None:
    """Thousands of made-up methods and paths (no key needed: each a 404 or 405) add no series: a method the API
    does not serve is `other`, a path no route serves `unmatched`."""

    def series() -> set[tuple[tuple[str, str], ...]]:
        return {ls for (n, ls) in _samples(generate_latest(REGISTRY).decode()) if n == "ragd_http_requests_total"}

    with TestClient(create_app(settings), client=("127.0.0.1", 40000)) as c:
        for method in ("GET", "PROPFIND", "BREW"):  # every label value the flood below can make, once
            c.request(method, "/v1/no-such-route")
            c.request(method, "/healthz")
        before = series()
        for n in range(1500):
            c.request(f"M{n:04d}X", f"/made-up/{n}")
            c.request("GET", f"/v1/nothing-here-{n}/{uuid.uuid4().hex}")
            c.request(f"Q{n:04d}", "/healthz")
        after = series()
    assert after == before, sorted(after - before)[:5]
    methods = {dict(ls)["method"] for ls in after}
    assert "other" in methods and not any(m.startswith(("M", "Q", "PROPFIND", "BREW")) for m in methods)
    assert ("route", "unmatched") in {kv for ls in after for kv in ls}
