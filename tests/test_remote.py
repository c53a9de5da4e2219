"""The remote client (`ragd.connect("http://...")`) against a real `ragd serve` process: the library's face and
result types over REST, another tenant's key, a rate limit, a dead server, a restarted one, a server whose
database is down."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import psycopg
import pytest

import ragd
from ragd.config import Settings
from ragd.errors import (
    CollectionNotFound,
    DatabaseUnavailable,
    DocumentNotFound,
    RateLimited,
    ServerUnavailable,
    Unauthorized,
)
from ragd.remote import RemoteCollection, RemoteRagd, RemoteRun
from ragd.types import Answer, Candidate, IngestReport

from .conftest import SAMPLES, free_port, run_cli, serving

QUESTION = "How many days of parental leave do employees in Germany get?"


def _key(env: dict[str, str], tenant: str) -> str:
    return run_cli(["keys", "create", "--tenant", tenant], env).stdout.strip().splitlines()[-1]


def _remote(url: str, key: str | None, name: str, **options: float) -> tuple[RemoteRagd, RemoteCollection]:
    remote = ragd.connect(url, api_key=key, **options)
    assert isinstance(remote, RemoteRagd)
    return remote, remote.collection(name)


def test_the_remote_client_gives_the_librarys_results(cli_env: dict[str, str], settings: Settings, name: str,
                                                      tmp_path: Path) -> None:
    tenant = "remote-" + uuid.uuid4().hex[:6]
    env = {**cli_env, "RAGD_RERANKER": "none", "RAGD_RATE_LIMIT_PER_MINUTE": "0"}
    key, other_key = _key(env, tenant), _key(env, tenant + "-b")
    local = ragd.connect(settings=Settings(**{**settings.model_dump(), "reranker": "none"}))
    with serving(env) as server:
        remote, col = _remote(server["url"], key, name)
        report = col.ingest(SAMPLES, tags=["hr"])
        assert isinstance(report, IngestReport) and not report.failed
        assert report.count("ingested") > len(list(SAMPLES.iterdir())) - 1  # faq.jsonl: a document per record
        mine = local.collection(name, tenant=tenant, create=False)

        # search and ask: the same candidates and answers as the library in process
        hits = col.search("parental leave Germany", k=5, filters={"tags_any": ["hr"]})
        assert hits and all(isinstance(h, Candidate) for h in hits)
        assert hits == mine.search("parental leave Germany", k=5, filters={"tags_any": ["hr"]})
        assert col.search("parental leave Germany", k=5, filters={"tags_any": ["nope"]}) == []
        answer = col.ask(QUESTION)
        assert isinstance(answer, Answer) and not answer.abstained and answer.citations
        here = mine.ask(QUESTION)
        assert (answer.answer, answer.citations, answer.result_hash) == (here.answer, here.citations,
                                                                          here.result_hash)
        assert answer.query_id is not None and remote.execution(answer.query_id)["question"] == QUESTION
        stream = col.ask_stream(QUESTION)
        pieces = list(stream)
        assert len(pieces) > 3 and "".join(pieces) == answer.answer
        assert stream.answer.result_hash == answer.result_hash

        # documents, chunks, runs: the library's rows
        assert col.documents() == mine.documents()
        ref = hits[0].external_id
        assert ref is not None and col.document(ref) == mine.document(ref)
        assert col.chunk(hits[0].chunk_id) == mine.chunk(str(hits[0].chunk_id))
        assert col.original(ref).data == mine.original(ref).data
        assert col.run(report.run_id)["status"] == "succeeded"
        assert [r["run_id"] for r in col.runs()] == [r["run_id"] for r in mine.runs()]
        given = col.ingest(documents=[{"id": "note-1", "text": "The office plants are watered on Fridays."}])
        assert isinstance(given, IngestReport) and given.count("ingested") == 1

        # another tenant's key sees nothing of it; no key at all is refused
        _, theirs = _remote(server["url"], other_key, name)
        with pytest.raises(CollectionNotFound):
            theirs.search("parental leave", k=3)
        with pytest.raises(CollectionNotFound):
            theirs.document(ref)
        with pytest.raises(CollectionNotFound):
            theirs.delete(ref)
        with pytest.raises(Unauthorized, match="API key"):
            _remote(server["url"], None, name)[1].search("parental leave")

        # delete, then queue a file and watch its run
        assert col.delete(ref) == hits[0].doc_id
        with pytest.raises(DocumentNotFound):
            col.document(ref)
        note = tmp_path / "queued.md"
        note.write_text("# Queued\n\nThe queued note says the library opens at nine.\n", encoding="utf-8")
        queued = col.ingest(note, wait=False)
        assert isinstance(queued, RemoteRun) and queued.queued["files"] == 1
        done = queued.wait(timeout_s=120)
        assert done["status"] == "succeeded", done
        assert any(d["external_id"] == "queued.md" for d in col.documents())
        remote.close()
    local.close()


def test_a_rate_limited_key_raises_with_its_retry_time(cli_env: dict[str, str], name: str) -> None:
    env = {**cli_env, "RAGD_RERANKER": "none", "RAGD_RATE_LIMIT_PER_MINUTE": "2"}
    key = _key(env, "remote-rl-" + uuid.uuid4().hex[:6])
    with serving(env) as server:
        _, col = _remote(server["url"], key, name)
        for _ in range(2):
            with pytest.raises(CollectionNotFound):
                col.search("anything")
        with pytest.raises(RateLimited) as caught:
            col.search("anything")
    assert 0 < caught.value.retry_after_s <= 60 and "per minute" in str(caught.value)


def test_a_dead_server_is_named_and_a_restarted_one_is_used_again(cli_env: dict[str, str], name: str) -> None:
    env = {**cli_env, "RAGD_RERANKER": "none", "RAGD_RATE_LIMIT_PER_MINUTE": "0"}
    key = _key(env, "remote-up-" + uuid.uuid4().hex[:6])
    port = free_port()
    with serving(env, port=port) as server:
        remote, col = _remote(server["url"], key, name, retries=1, backoff_s=0.05)
        col.ingest(documents=[{"id": "a", "text": "Restarts keep the data where it was."}])
        before = col.search("restarts keep the data", k=1)
    started = time.monotonic()
    with pytest.raises(ServerUnavailable) as caught:
        col.search("restarts keep the data", k=1)
    message = str(caught.value)
    assert f"127.0.0.1:{port}" in message and "ragd serve" in message and "\n" not in message
    assert time.monotonic() - started < 10

    # the server comes back while a patient client is retrying: the call succeeds
    patient = RemoteRagd(remote.url, key, retries=8, backoff_s=0.5, max_wait_s=2.0).collection(name)
    ready = threading.Event()
    holder: dict[str, object] = {}

    def restart() -> None:
        time.sleep(1.0)
        with serving(env, port=port):
            ready.set()
            holder["done"] = holder.get("done") or threading.Event()
            assert isinstance(holder["done"], threading.Event)
            holder["done"].wait(120)

    holder["done"] = threading.Event()
    thread = threading.Thread(target=restart)
    thread.start()
    try:
        after = patient.search("restarts keep the data", k=1)
    finally:
        assert isinstance(holder["done"], threading.Event)
        holder["done"].set()
        thread.join(150)
    assert ready.is_set() and after == before


def test_a_server_that_loses_its_database_is_retried_then_named(fresh_database: str, base_url: str,
                                                                 tmp_path: Path, name: str) -> None:
    env = {"RAGD_HOME": str(tmp_path), "RAGD_DATABASE_URL": fresh_database, "RAGD_EMBEDDER": "hash",
           "RAGD_RERANKER": "none", "RAGD_DB_TIMEOUT_S": "1"}
    with serving(env) as server:
        _, col = _remote(server["url"], None, name, retries=2, backoff_s=0.2, max_wait_s=0.5)
        with pytest.raises(CollectionNotFound):
            col.search("anything")
        dbname = psycopg.conninfo.conninfo_to_dict(fresh_database)["dbname"]
        with psycopg.connect(base_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{dbname}" WITH (FORCE)')
        started = time.monotonic()
        with pytest.raises(DatabaseUnavailable, match="retry later"):
            col.search("anything")
        waited = time.monotonic() - started
    assert waited >= 2 * 0.5  # two waits (the server's Retry-After, capped at max_wait_s) before the third try
    assert server["stderr"].count(f'"path": "/v1/collections/{name}/search", "tenant_id": null, '
                                  '"http_status": 503') == 3
