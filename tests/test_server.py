"""The REST adapter through the ASGI app over httpx (FastAPI's TestClient runs its lifespan): seed 001's
/v1/query and seed 002's /v1/search and /v1/index contracts, every documented status, API keys, one error shape."""

from __future__ import annotations

import json
import logging
import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

import ragd
from ragd import keys
from ragd.answer.abstain import ABSTAIN_ANSWER
from ragd.config import Settings
from ragd.server import create_app

from .conftest import SAMPLES, run_cli

QUESTION = "How many days of parental leave do employees in Germany get?"


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


@pytest.fixture(scope="module")
def world(settings: Settings) -> Iterator[dict[str, Any]]:
    """Two tenants with a key each; tenant A's samples in collection `docs`."""
    client = ragd.connect(settings=settings.model_copy(update={"cache_ttl_s": 0, "rate_limit_per_minute": 0}))
    a, b = "api-a-" + uuid.uuid4().hex[:6], "api-b-" + uuid.uuid4().hex[:6]
    client.collection("docs", tenant=a).ingest([SAMPLES])
    _, key_a = keys.create(client.store, a, "tests")
    _, key_b = keys.create(client.store, b, "tests")
    yield {"client": client, "a": a, "b": b, "key_a": key_a, "key_b": key_b}
    client.close()


@pytest.fixture(scope="module")
def http(world: dict[str, Any]) -> Iterator[TestClient]:
    with TestClient(create_app(client=world["client"])) as test_client:
        yield test_client


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _is_error(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error", "message"} and body["error"] == code and body["message"], body
    return body  # type: ignore[no-any-return]


def test_health_and_readiness(http: TestClient) -> None:
    assert http.get("/healthz").json() == {"status": "ok"}
    ready = http.get("/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"
    assert "/v1/query" in http.get("/openapi.json").json()["paths"]


def test_query_answers_with_citations_in_seed_001_shape(http: TestClient, world: dict[str, Any]) -> None:
    response = http.post("/v1/query", json={"question": QUESTION, "collection": "docs"}, headers=_auth(world["key_a"]))
    assert response.status_code == 200, response.text
    body = response.json()
    assert list(body) == ["answer", "citations", "abstained", "debug"]
    assert not body["abstained"] and body["debug"] is None and "14 weeks" in body["answer"]  # Germany's own rule
    assert body["citations"] and set(body["citations"][0]) == {"doc_id", "doc_version_id", "chunk_id", "title",
                                                               "version_label"}
    assert f"[chunk:{body['citations'][0]['chunk_id']}]" in body["answer"]
    assert response.headers["X-Request-ID"]


def test_each_query_logs_one_line_with_its_http_status(http: TestClient, world: dict[str, Any],
                                                       caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="ragd.query"):
        ok = http.post("/v1/query", json={"question": QUESTION, "collection": "docs"},
                       headers={**_auth(world["key_a"]), "X-Request-ID": "req-123"})
        missing = http.post("/v1/query", json={"question": QUESTION, "collection": "nope"},
                            headers=_auth(world["key_a"]))
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "ragd.query"]
    assert ok.headers["X-Request-ID"] == "req-123" and len(lines) == 2
    assert lines[0]["request_id"] == "req-123" and lines[0]["http_status"] == 200
    assert lines[0]["tenant_id"] == world["a"] and QUESTION not in json.dumps(lines)
    assert {"k_vec", "k_fts", "num_context_chunks", "latency_ms_llm", "llm_provider"} <= set(lines[0])
    assert lines[1]["http_status"] == 404 == missing.status_code
    assert lines[1]["request_id"] == missing.headers["X-Request-ID"]


def test_query_abstains_in_seed_001_shape(http: TestClient, world: dict[str, Any]) -> None:
    response = http.post("/v1/query", json={"question": "What is the capital of Mongolia?", "collection": "docs",
                                            "top_k": 5}, headers=_auth(world["key_a"]))
    assert response.status_code == 200
    assert response.json() == {"answer": ABSTAIN_ANSWER, "citations": [], "abstained": True, "debug": None}


def test_query_debug_says_when_the_reranker_failed_open(settings: Settings, world: dict[str, Any]) -> None:
    broken = ragd.connect(settings=settings.model_copy(update={
        "cache_ttl_s": 0, "reranker": "cohere:rerank-v3.5", "rerank_url": _dead_url(), "rerank_timeout_s": 0.5}))
    try:
        with TestClient(create_app(client=broken)) as test_client:
            body = test_client.post("/v1/query", json={"question": QUESTION, "collection": "docs", "debug": True},
                                    headers=_auth(world["key_a"])).json()
    finally:
        broken.close()
    assert body["debug"]["reranker_skipped"] is True and body["debug"]["reranker_error"]
    assert not body["abstained"]  # the fused order stands, judged by its RRF evidence


def test_query_maps_a_failing_generator_to_502(settings: Settings, world: dict[str, Any]) -> None:
    broken = ragd.connect(settings=settings.model_copy(update={
        "cache_ttl_s": 0, "reranker": "none", "generator": "openai:m", "llm_base_url": _dead_url(),
        "llm_max_retries": 0}))
    try:
        with TestClient(create_app(client=broken)) as test_client:
            response = test_client.post("/v1/query", json={"question": QUESTION, "collection": "docs"},
                                        headers=_auth(world["key_a"]))
    finally:
        broken.close()
    assert "generator openai:m" in _is_error(response, 502, "llm_unavailable")["message"]


def test_an_unexpected_failure_is_500_internal_and_the_server_carries_on(settings: Settings, fresh_database: str,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    """A defect nobody mapped (here a table gone from under the server) is 500 `internal` in the one error shape,
    with no traceback in the body but the whole one in the server log; the next request is served again."""
    client = ragd.connect(settings=settings.model_copy(update={
        "database_url": fresh_database, "cache_ttl_s": 0, "reranker": "none", "rate_limit_per_minute": 0}))
    try:
        client.collection("docs", tenant="t500").ingest([SAMPLES])
        _, key = keys.create(client.store, "t500", "tests")
        body = {"question": QUESTION, "collection": "docs"}
        with TestClient(create_app(client=client), raise_server_exceptions=False) as test_client:
            with psycopg.connect(fresh_database, autocommit=True) as conn:
                conn.execute("ALTER TABLE query_executions RENAME TO query_executions_gone")
                with caplog.at_level(logging.ERROR, logger="ragd.server"):
                    broken = test_client.post("/v1/query", json=body, headers=_auth(key))
                conn.execute("ALTER TABLE query_executions_gone RENAME TO query_executions")
            healed = test_client.post("/v1/query", json=body, headers=_auth(key))
    finally:
        client.close()
    assert "Traceback" not in _is_error(broken, 500, "internal")["message"]
    assert broken.headers["X-Request-ID"] and "query_executions" in caplog.text
    assert healed.status_code == 200 and healed.json()["citations"]


@pytest.mark.parametrize("body", [{}, {"question": ""}, {"question": "x", "top_k": 0}, {"question": "x", "top_k": "a"},
                                  {"question": "x", "unknown": 1}, {"question": "x" * 9000}])
def test_bad_query_requests_are_400(http: TestClient, world: dict[str, Any], body: dict[str, Any]) -> None:
    _is_error(http.post("/v1/query", json=body, headers=_auth(world["key_a"])), 400, "bad_request")


def test_malformed_json_is_400(http: TestClient, world: dict[str, Any]) -> None:
    response = http.post("/v1/query", content=b"{not json", headers={**_auth(world["key_a"]),
                                                                     "Content-Type": "application/json"})
    _is_error(response, 400, "bad_request")


@pytest.mark.parametrize("header", [None, "Bearer", "Basic abc", "Bearer ragd_00000000_" + "x" * 43, "Bearer nope"])
def test_missing_or_bad_keys_are_401(http: TestClient, header: str | None) -> None:
    headers = {"Authorization": header} if header else {}
    for method, path, body in (("POST", "/v1/query", {"question": QUESTION}), ("POST", "/v1/search", {"query": "x"}),
                               ("POST", "/v1/index", {"documents": []})):
        response = http.request(method, path, json=body, headers=headers)
        _is_error(response, 401, "unauthorized")
        assert response.headers["WWW-Authenticate"].startswith("Bearer")


def test_a_revoked_key_is_401(http: TestClient, world: dict[str, Any]) -> None:
    record, key = keys.create(world["client"].store, world["a"], "short-lived")
    assert http.post("/v1/search", json={"query": "leave", "namespace": "docs"}, headers=_auth(key)).status_code == 200
    keys.revoke(world["client"].store, record["key_id"])
    _is_error(http.post("/v1/search", json={"query": "leave", "namespace": "docs"}, headers=_auth(key)),
              401, "unauthorized")


def test_the_tenant_comes_from_the_key(http: TestClient, world: dict[str, Any]) -> None:
    mismatch = http.post("/v1/query", json={"question": QUESTION, "collection": "docs", "tenant_id": world["a"]},
                         headers=_auth(world["key_b"]))
    _is_error(mismatch, 403, "forbidden")
    same = http.post("/v1/query", json={"question": QUESTION, "collection": "docs", "tenant_id": world["a"]},
                     headers=_auth(world["key_a"]))
    assert same.status_code == 200
    # B's key sees nothing of A's: A's collection does not exist for B
    _is_error(http.post("/v1/query", json={"question": QUESTION, "collection": "docs"},
                        headers=_auth(world["key_b"])), 404, "collection_not_found")
    _is_error(http.post("/v1/search", json={"query": "parental leave", "namespace": "docs"},
                        headers=_auth(world["key_b"])), 404, "collection_not_found")


def test_search_in_seed_002_shape(http: TestClient, world: dict[str, Any]) -> None:
    response = http.post("/v1/search", json={"query": "per diem London", "namespace": "docs", "limit": 3,
                                             "threshold": 0.0}, headers=_auth(world["key_a"]))
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"success", "query", "results", "latencyMs", "rerankingApplied"}
    assert body["success"] and body["query"] == "per diem London" and body["rerankingApplied"] is True
    assert 0 < len(body["results"]) <= 3 and body["latencyMs"] > 0
    first = body["results"][0]
    assert set(first) == {"id", "content", "similarity", "keywordRank", "combinedScore", "metadata", "namespace",
                          "sourceId", "chunkIndex", "rerankScore"}
    assert "London" in first["content"] and first["namespace"] == "docs" and first["keywordRank"] > 0
    plain = http.post("/v1/search", json={"query": "per diem London", "namespace": "docs", "limit": 3,
                                          "useReranking": False, "threshold": 0.0},
                      headers=_auth(world["key_a"])).json()
    assert plain["rerankingApplied"] is False and all("rerankScore" not in r for r in plain["results"])
    # threshold 1.0 keeps only what the keyword leg found: no vector match reaches cosine 1
    strict = http.post("/v1/search", json={"query": "per diem London", "namespace": "docs", "threshold": 1.0},
                       headers=_auth(world["key_a"])).json()["results"]
    assert strict and all(r["keywordRank"] > 0 for r in strict)
    _is_error(http.post("/v1/search", json={"query": "x", "limit": 0}, headers=_auth(world["key_a"])),
              400, "bad_request")


def test_index_is_always_200_and_lists_failed_items(http: TestClient, world: dict[str, Any]) -> None:
    namespace = "ns-" + uuid.uuid4().hex[:8]
    docs = [{"content": "The Zephyr project ships in March.", "id": "zephyr", "metadata": {"team": "x"}},
            {"content": ""}, {"metadata": {"a": 1}},
            {"content": "Orion needs two reviewers per change.", "sourceId": "orion.md"},
            {"content": "ok", "metadata": "not an object"}]
    response = http.post("/v1/index", json={"documents": docs, "namespace": namespace},
                         headers=_auth(world["key_b"]))
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["success"] is False and body["indexed"] == 2 and body["total"] == 5
    assert body["namespace"] == namespace and body["chunksCreated"] >= 2
    assert [f["index"] for f in body["failed"]] == [1, 2, 4] and all(f["error"] for f in body["failed"])
    found = http.post("/v1/search", json={"query": "Zephyr ships", "namespace": namespace, "threshold": 0.0},
                      headers=_auth(world["key_b"])).json()["results"]
    assert found[0]["sourceId"] == "zephyr" and found[0]["metadata"]["team"] == "x"
    _is_error(http.post("/v1/search", json={"query": "Zephyr", "namespace": namespace},
                        headers=_auth(world["key_a"])), 404, "collection_not_found")


def test_unknown_routes_and_methods_use_the_error_shape(http: TestClient) -> None:
    _is_error(http.get("/v1/nothing"), 404, "not_found")
    _is_error(http.get("/v1/query"), 405, "method_not_allowed")


def test_a_method_not_allowed_lists_every_method_of_the_path(http: TestClient) -> None:
    """Allow names the methods of every route at the path, whichever router holds them (routers included in the
    app are not flat route lists)."""
    for path, allowed in (("/v1/documents", "GET, POST"), ("/v1/documents/some/id", "DELETE, GET"),
                          ("/v1/query", "POST"), ("/v1/runs/" + str(uuid.uuid4()) + "/cancel", "POST")):
        response = http.request("PUT", path)
        _is_error(response, 405, "method_not_allowed")
        assert response.headers["allow"] == allowed, path


def test_keys_cli_creates_lists_and_revokes(cli_env: dict[str, str]) -> None:
    tenant = "cli-" + uuid.uuid4().hex[:6]
    created = run_cli(["keys", "create", "--tenant", tenant, "--name", "ci"], cli_env)
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip().splitlines()[-1]
    assert key.startswith("ragd_")
    listed = run_cli(["keys", "list", "--tenant", tenant, "--json"], cli_env)
    rows = __import__("json").loads(listed.stdout)["keys"]
    assert len(rows) == 1 and rows[0]["name"] == "ci" and key not in listed.stdout
    assert key.startswith(rows[0]["prefix"]) and rows[0]["revoked_at"] is None
    assert run_cli(["keys", "revoke", rows[0]["prefix"]], cli_env).returncode == 0
    again = run_cli(["keys", "revoke", rows[0]["prefix"]], cli_env)
    assert again.returncode == 2 and again.stderr.startswith("error (bad_request): API key")


def test_documents_upload_list_get_delete_and_runs(http: TestClient, world: dict[str, Any]) -> None:
    a, b = _auth(world["key_a"]), _auth(world["key_b"])
    collection = "up-" + uuid.uuid4().hex[:8]
    files = [("files", ("../../etc/handbook.md", (SAMPLES / "parental-leave.md").read_bytes(), "text/markdown")),
             ("files", ("broken.pdf", b"%PDF-1.7 this is not a pdf", "application/pdf"))]
    response = http.post("/v1/documents", params={"collection": collection}, files=files, headers=a)
    assert response.status_code == 200, response.text
    run = response.json()
    assert run["collection"] == collection and run["counts"]["ingested"] == 1 and run["counts"]["failed"] == 1
    by_status = {i["status"]: i for i in run["items"]}
    assert by_status["ingested"]["external_id"] == "handbook.md"  # no directories from the client's name
    assert by_status["failed"]["error_code"] == "corrupt_document"
    listed = http.get("/v1/documents", params={"collection": collection}, headers=a).json()
    assert [d["external_id"] for d in listed["documents"]] == ["handbook.md"]
    doc = http.get("/v1/documents/handbook.md", params={"collection": collection}, headers=a)
    assert doc.status_code == 200 and doc.json()["versions"][0]["is_active"]
    runs = http.get("/v1/runs", params={"collection": collection}, headers=a).json()["runs"]
    assert run["run_id"] in [r["run_id"] for r in runs]
    one = http.get(f"/v1/runs/{run['run_id']}", headers=a).json()
    asked = http.post("/v1/query", json={"question": "How long is parental leave in Germany?",
                                         "collection": collection, "debug": True}, headers=a).json()
    record = http.get(f"/v1/executions/{asked['debug']['query_id']}", headers=a)
    assert record.status_code == 200 and record.json()["result_hash"] == asked["debug"]["result_hash"]
    _is_error(http.get(f"/v1/executions/{asked['debug']['query_id']}", headers=b), 404, "not_found")
    assert len(one["items"]) == 2
    names = [c["name"] for c in http.get("/v1/collections", headers=a).json()["collections"]]
    assert collection in names and "docs" in names
    # another tenant: every route that takes an id answers 404, and lists show nothing of A's
    doc_id = doc.json()["doc_id"]
    for method, path in (("GET", f"/v1/documents/{doc_id}"), ("DELETE", f"/v1/documents/{doc_id}"),
                         ("GET", f"/v1/runs/{run['run_id']}"), ("GET", "/v1/documents"), ("GET", "/v1/runs")):
        response = http.request(method, path, params={"collection": collection}, headers=b)
        assert response.status_code == 404, (method, path, response.text)
    assert collection not in [c["name"] for c in http.get("/v1/collections", headers=b).json()["collections"]]
    assert http.delete("/v1/documents/handbook.md", params={"collection": collection}, headers=a).status_code == 200
    _is_error(http.get("/v1/documents/handbook.md", params={"collection": collection}, headers=a),
              404, "document_not_found")


def test_long_multibyte_file_names_are_cut_by_bytes_and_lose_no_file(http: TestClient, world: dict[str, Any]) -> None:
    """A name of 200 characters can be 600 bytes, past the 255 a file name may take: it is cut by bytes on a
    character boundary, its extension kept, and the other files of the request are stored with it."""
    a = _auth(world["key_a"])
    collection = "names-" + uuid.uuid4().hex[:8]
    long = "Übersicht der Urlaubsregeln " + "日本語の長い名前" * 20 + ".md"
    assert len(long) < 200 < 255 < len(long.encode("utf-8"))
    files = [("files", ("good.md", b"# Leave\n\nSpain grants 112 days.\n", "text/markdown")),
             ("files", (long, b"# Leave\n\nGermany grants 98 days.\n", "text/markdown")),
             ("files", ("also-good.md", b"# Leave\n\nFrance grants 112 days.\n", "text/markdown"))]
    response = http.post("/v1/documents", params={"collection": collection}, files=files, headers=a)
    assert response.status_code == 200, response.text
    assert response.json()["counts"]["ingested"] == 3
    ids = sorted(d["external_id"] for d in http.get("/v1/documents", params={"collection": collection},
                                                     headers=a).json()["documents"])
    [cut] = [i for i in ids if i not in ("good.md", "also-good.md")]
    assert cut.endswith(".md") and len(cut.encode("utf-8")) <= 200 and long.startswith(cut[:-3])
    assert len(cut) > 60  # cut near the limit, not emptied


def test_an_upload_over_the_size_limit_is_413(settings: Settings, world: dict[str, Any]) -> None:
    small = ragd.connect(settings=settings.model_copy(update={"max_file_bytes": 1000}))
    try:
        with TestClient(create_app(client=small)) as test_client:
            response = test_client.post("/v1/documents", files=[("files", ("big.txt", b"x" * 5000, "text/plain"))],
                                        headers=_auth(world["key_a"]))
    finally:
        small.close()
    assert "big.txt" in _is_error(response, 413, "file_too_large")["message"]


def test_the_rate_limit_holds_across_server_processes(settings: Settings, world: dict[str, Any]) -> None:
    """Two apps over the same database stand for two worker processes (or a restart): they share one count."""
    _, key = keys.create(world["client"].store, world["a"], "limited")
    _, other = keys.create(world["client"].store, world["a"], "another")
    if time.time() % 60 > 50:  # the window is the wall-clock minute: do not straddle two
        time.sleep(61 - time.time() % 60)
    limited = [ragd.connect(settings=settings.model_copy(update={"rate_limit_per_minute": 3})) for _ in range(2)]
    body = {"query": "leave", "namespace": "docs", "useReranking": False}
    try:
        with TestClient(create_app(client=limited[0])) as one, TestClient(create_app(client=limited[1])) as two:
            statuses = [c.post("/v1/search", json=body, headers=_auth(key)).status_code for c in (one, two, one)]
            over = two.post("/v1/search", json=body, headers=_auth(key))
            also = one.post("/v1/search", json=body, headers=_auth(key))
            other_key = one.post("/v1/search", json=body, headers=_auth(other))
    finally:
        for client in limited:
            client.close()
    assert statuses == [200, 200, 200]
    for response in (over, also):
        _is_error(response, 429, "rate_limited")
        assert 1 <= int(response.headers["Retry-After"]) <= 60
    assert other_key.status_code == 200  # the limit is per key


def _sse(text: str) -> list[tuple[str, Any]]:
    events = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((fields.get("event", "message"), fields["data"]))
    return events


def test_query_streams_tokens_then_citations_then_the_whole_response(http: TestClient,
                                                                     world: dict[str, Any]) -> None:
    plain = http.post("/v1/query", json={"question": QUESTION, "collection": "docs"}, headers=_auth(world["key_a"]))
    streamed = http.post("/v1/query", json={"question": QUESTION, "collection": "docs", "stream": True},
                         headers=_auth(world["key_a"]))
    assert streamed.status_code == 200 and streamed.headers["content-type"].startswith("text/event-stream")
    events = _sse(streamed.text)
    names = [name for name, _ in events]
    assert names[-2:] == ["citations", "done"] and set(names[:-2]) == {"token"} and len(names) > 5
    assert "".join(json.loads(data)["text"] for name, data in events if name == "token") == plain.json()["answer"]
    assert json.loads(events[-2][1]) == plain.json()["citations"]
    assert json.loads(events[-1][1]) == plain.json()
    _is_error(http.post("/v1/query", json={"question": QUESTION, "collection": "nope", "stream": True},
                        headers=_auth(world["key_a"])), 404, "collection_not_found")


def test_openai_compatible_chat_completions(http: TestClient, world: dict[str, Any]) -> None:
    a = _auth(world["key_a"])
    models = http.get("/v1/models", headers=a).json()
    assert models["object"] == "list" and "docs" in [m["id"] for m in models["data"]]
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"},
                {"role": "assistant", "content": "hi"},
                {"role": "user", "content": [{"type": "text", "text": QUESTION}]}]
    body = http.post("/v1/chat/completions", json={"model": "docs", "messages": messages, "temperature": 0.7},
                     headers=a).json()
    assert body["object"] == "chat.completion" and body["model"] == "docs"
    content = body["choices"][0]["message"]["content"]
    assert body["choices"][0]["message"]["role"] == "assistant" and body["choices"][0]["finish_reason"] == "stop"
    assert body["citations"] and f"[chunk:{body['citations'][0]['chunk_id']}]" in content
    assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"]
    streamed = http.post("/v1/chat/completions", json={"model": "docs", "messages": messages, "stream": True},
                         headers=a)
    events = [data for _, data in _sse(streamed.text)]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == content
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop" and chunks[-1]["citations"] == body["citations"]
    _is_error(http.post("/v1/chat/completions", json={"model": "nope", "messages": messages}, headers=a),
              404, "collection_not_found")
    _is_error(http.post("/v1/chat/completions", json={"model": "docs", "messages": [{"role": "system",
                                                                                     "content": "x"}]}, headers=a),
              400, "bad_request")
    _is_error(http.post("/v1/chat/completions", json={"model": "docs", "messages": messages}), 401, "unauthorized")


def test_readyz_is_503_when_a_configured_model_does_not_load(settings: Settings, tmp_path: Any) -> None:
    broken = ragd.connect(settings=settings.model_copy(update={"generator": f"gguf:{tmp_path}/missing.gguf"}))
    try:
        with TestClient(create_app(client=broken)) as test_client:
            ready = test_client.get("/readyz")
            alive = test_client.get("/healthz")
    finally:
        broken.close()
    assert "missing.gguf" in _is_error(ready, 503, "models_unavailable")["message"] and alive.status_code == 200


def test_every_request_logs_one_line(http: TestClient, world: dict[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="ragd.request"):
        http.post("/v1/search", json={"query": "leave", "namespace": "docs"}, headers=_auth(world["key_a"]))
        http.get("/v1/documents", params={"collection": "docs"})  # no key
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "ragd.request"]
    assert [(x["method"], x["path"], x["http_status"]) for x in lines] == [
        ("POST", "/v1/search", 200), ("GET", "/v1/documents", 401)]
    assert lines[0]["tenant_id"] == world["a"] and lines[1]["tenant_id"] is None
    assert all(x["request_id"] and x["latency_ms"] >= 0 for x in lines)


# -- characters PostgreSQL cannot store, shapes too deep (issue 29) ---------------------------------------------

@pytest.mark.parametrize("bad", ["a\u0000b", "a\ud800b"])
def test_unstorable_characters_in_a_request_are_400(http: TestClient, world: dict[str, Any], bad: str) -> None:
    auth = _auth(world["key_a"])
    for route, body in (("/v1/query", {"question": f"parental {bad} leave", "collection": "docs"}),
                        ("/v1/query", {"question": f"parental {bad} leave", "collection": "docs", "stream": True}),
                        ("/v1/search", {"query": f"parental {bad} leave", "namespace": "docs"}),
                        ("/v1/chat/completions", {"model": "docs", "messages": [{"role": "user",
                                                                                 "content": f"leave {bad}"}]})):
        _is_error(http.post(route, content=json.dumps(body), headers={**auth, "Content-Type": "application/json"}),
                  400, "bad_request")
    for method in ("GET", "DELETE"):  # (a surrogate's bytes in a URL are not UTF-8: read as U+FFFD, a 404)
        response = http.request(method, "/v1/documents/a%00b?collection=docs", headers=auth)
        _is_error(response, 400, "bad_request")
    assert http.get("/v1/documents?collection=docs", headers=auth).status_code == 200  # the connection carries on


@pytest.mark.parametrize("question", ["\U0001F3FB", "?!", "\u200b"])
def test_a_question_of_no_words_abstains(http: TestClient, world: dict[str, Any], question: str) -> None:
    """(schemathesis found this one: a lone emoji embeds to a vector with no direction, whose cosine is NaN)"""
    response = http.post("/v1/query", json={"question": question, "collection": "docs", "debug": True},
                         headers=_auth(world["key_a"]))
    assert response.status_code == 200, response.text
    assert response.json()["abstained"] is True


def test_index_refuses_items_it_cannot_store_as_given_and_says_so(http: TestClient, world: dict[str, Any]) -> None:
    namespace = "ns-" + uuid.uuid4().hex[:8]
    deep: Any = "bottom"
    for _ in range(900):
        deep = {"d": deep}
    docs = [{"content": "Aliased under another id.", "id": "a\u0000b"},
            {"content": "Metadata far too deep.", "id": "deep", "metadata": deep},
            {"content": "Kept: this one is fine.", "id": "fine"}]
    response = http.post("/v1/index", json={"documents": docs, "namespace": namespace},
                         headers=_auth(world["key_b"]))
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["indexed"] == 1 and [f["index"] for f in body["failed"]] == [0, 1]
    assert "NUL" in body["failed"][0]["error"] and "deeper than" in body["failed"][1]["error"]
    listed = http.get(f"/v1/documents?collection={namespace}", headers=_auth(world["key_b"])).json()
    assert [d["external_id"] for d in listed["documents"]] == ["fine"]  # nothing stored as "ab"
    deeper = "[" * 5000 + "1" + "]" * 5000  # past the JSON parser's own recursion limit
    body = '{"documents": [{"content": "x", "metadata": {"a": ' + deeper + "}}]}"
    too_deep = http.post("/v1/index", content=body,
                         headers={**_auth(world["key_b"]), "Content-Type": "application/json"})
    _is_error(too_deep, 400, "bad_request")


def test_the_library_refuses_unstorable_ids_queries_and_depths(world: dict[str, Any]) -> None:
    from ragd.errors import InvalidRequest

    col = world["client"].collection("docs", tenant=world["a"], create=False)
    deep: Any = 1
    for _ in range(900):
        deep = [deep]
    for call in (lambda: col.search("a\x00b"), lambda: col.ask("a\ud800b"), lambda: col.document("a\x00b"),
                 lambda: col.delete("a\x00b"), lambda: col.ingest(documents=[{"id": "a\x00b", "text": "x"}]),
                 lambda: col.ingest(documents=[{"id": "d", "text": "x", "metadata": {"m": deep}}]),
                 lambda: col.ingest(documents=[{"id": "d", "text": "x"}], metadata={"m": deep})):
        with pytest.raises(InvalidRequest):
            call()


def test_runs_are_listed_per_collection(http: TestClient, world: dict[str, Any]) -> None:
    auth = _auth(world["key_b"])
    one, two = "runs-" + uuid.uuid4().hex[:6], "runs-" + uuid.uuid4().hex[:6]
    for namespace in (one, two, two):
        body = {"documents": [{"content": f"Run note for {namespace}.", "id": uuid.uuid4().hex}],
                "namespace": namespace}
        assert http.post("/v1/index", json=body, headers=auth).status_code == 200
    for namespace, count in ((one, 1), (two, 2)):
        runs = http.get(f"/v1/runs?collection={namespace}", headers=auth).json()["runs"]
        assert [r["collection"] for r in runs] == [namespace] * count


# -- every response carries the page's protections (issue 56) ---------------------------------------------------

def test_every_response_carries_the_security_headers_and_no_page_loads_from_a_cdn(
        http: TestClient, world: dict[str, Any], settings: Settings) -> None:
    from ragd.server import CONTENT_SECURITY_POLICY

    auth = _auth(world["key_a"])
    replies = {
        "200": http.get("/healthz"),
        "400 (a NUL in the query)": http.get("/v1/documents?collection=docs&q=%00", headers=auth),
        "401": http.get("/v1/documents?collection=docs"),
        "401 /mcp": http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        "404": http.get("/no/such/route"),
        "404 /docs": http.get("/docs"),
        "404 /redoc": http.get("/redoc"),
        "openapi": http.get("/openapi.json"),
    }
    for what, r in replies.items():
        assert r.headers.get("content-security-policy") == CONTENT_SECURITY_POLICY, what
        assert r.headers.get("x-frame-options") == "DENY" and r.headers.get("x-content-type-options") == "nosniff"
        assert "cdn" not in r.text.lower() and "swagger" not in r.text.lower(), what
    assert replies["404 /docs"].status_code == 404 and replies["openapi"].status_code == 200
    assert replies["401 /mcp"].status_code == 401
    # open mode (no keys) refuses a foreign Host with 403: that answer carries them too
    open_client = ragd.connect(settings=settings.model_copy(update={"allow_open": True}))
    try:
        app = create_app(client=open_client)
        app.state.keyed = False
        with TestClient(app) as open_http:
            app.state.keyed = False
            refused = open_http.get("/v1/collections", headers={"Host": "evil.example"})
    finally:
        open_client.close()
    assert refused.status_code == 403 and refused.headers["content-security-policy"] == CONTENT_SECURITY_POLICY


def test_an_unexpected_error_is_a_500_with_the_headers_and_no_traceback(world: dict[str, Any]) -> None:
    """A route that fails in a way no handler knows: one JSON line, the security headers, the request id."""
    from ragd.server import CONTENT_SECURITY_POLICY

    app = create_app(client=world["client"])

    @app.get("/boom")
    def boom() -> None:
        raise ZeroDivisionError("a bug")

    with TestClient(app, raise_server_exceptions=False) as client:
        r = client.get("/boom", headers={"X-Request-ID": "rid-500"})
    assert r.status_code == 500 and r.json() == {"error": "internal",
                                                 "message": "an internal error occurred; see the server log"}
    assert r.headers["content-security-policy"] == CONTENT_SECURITY_POLICY and r.headers["x-request-id"] == "rid-500"
