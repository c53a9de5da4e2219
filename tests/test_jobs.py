"""Ingestion as jobs (ragd.jobs): queued runs stored by real workers on the real queue, exactly once, fairly, with
backpressure, progress and cancellation."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from procrastinate.job_context import JobContext
from procrastinate.jobs import Job

import ragd
from ragd import jobs, keys
from ragd.config import Settings
from ragd.errors import QueueFull, RunNotFound
from ragd.server import create_app
from ragd.store import embedded, queries

from .conftest import run_cli


def _files(folder: Path, n: int, prefix: str = "note") -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        path = folder / f"{prefix}-{i:03d}.md"
        path.write_text(f"# {prefix} {i}\n\nThe {prefix} number {i} says the harbour {i * 7} opened in {1900 + i}.\n"
                        f"Unique words {prefix}{i}alpha {prefix}{i}beta.\n", encoding="utf-8")
        paths.append(path)
    return paths


def _drain(rag: ragd.Ragd, concurrency: int = 2) -> jobs.Jobs:
    """Run a worker of this process until the queue is empty."""
    worker = jobs.Jobs(rag)
    asyncio.run(worker.run(concurrency=concurrency, signals=False, until_empty=True))
    return worker


def _open_files(rag: ragd.Ragd, tenant: str) -> int:
    with rag.store.admin() as conn:
        return int(conn.execute(queries.OPEN_FILES, {"tenant_id": tenant}).fetchone()[0])  # type: ignore[index]


def test_a_queued_run_is_stored_by_a_worker_with_progress(client: ragd.Ragd, name: str, tmp_path: Path) -> None:
    col = client.collection(name)
    paths = _files(tmp_path / "docs", 6)
    (tmp_path / "docs" / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    queued = jobs.enqueue(col, [tmp_path / "docs"], tags=["q"])
    assert queued.files == 7 and queued.failed == 0
    run = client.run(str(queued.run_id))
    assert run["status"] == "queued" and run["progress"]["files"] == {
        "total": 7, "queued": 7, "running": 0, "done": 0, "cancelled": 0}
    assert col.documents() == []  # nothing stored before a worker runs
    worker = _drain(client)
    assert worker.jobs_done == 7
    run = client.run(str(queued.run_id))
    assert run["status"] == "succeeded", run
    statuses = sorted(i["status"] for i in run["items"])
    assert statuses == ["failed"] + ["ingested"] * 6
    failed = next(i for i in run["items"] if i["status"] == "failed")
    assert failed["error_code"] == "corrupt_document"
    assert failed["source_uri"] == (tmp_path / "docs" / "broken.pdf").resolve().as_uri()
    assert run["stats"]["counts"] == {"failed": 1, "ingested": 6} and run["stats"]["chunks"] >= 6
    assert run["progress"]["files"]["done"] == 7 and run["progress"]["eta_s"] == 0.0
    # stored as `ingest` stores them: the same external ids, tags, searchable
    docs = {d["external_id"] for d in col.documents()}
    assert {str(p.resolve()) for p in paths} <= docs
    hits = col.search("harbour number 3 opened 1903", k=3)
    assert hits and hits[0].external_id == str(paths[3].resolve())
    # the bytes are dropped once stored; the queue holds nothing of the run
    with client.store.admin() as conn:
        assert conn.execute("SELECT count(*) FROM ingestion_files WHERE run_id = %s AND content IS NOT NULL",
                            (queued.run_id,)).fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM procrastinate_jobs WHERE args->>'run_id' = %s",
                            (str(queued.run_id),)).fetchone() == (0,)


def test_the_same_files_queued_again_are_unchanged(client: ragd.Ragd, name: str, tmp_path: Path) -> None:
    col = client.collection(name)
    _files(tmp_path, 3)
    first = jobs.enqueue(col, [tmp_path])
    _drain(client)
    again = jobs.enqueue(col, [tmp_path])
    _drain(client)
    assert client.run(str(first.run_id))["stats"]["counts"] == {"ingested": 3}
    assert client.run(str(again.run_id))["stats"]["counts"] == {"unchanged": 3}


def test_a_tenant_over_its_bound_is_told_to_wait_and_others_are_not(settings: Settings, tmp_path: Path) -> None:
    rag = ragd.connect(settings=settings.model_copy(update={"queue_max_files": 4}))
    try:
        paths = _files(tmp_path, 6)
        busy = rag.collection("queue-bound", tenant="busy-tenant")
        jobs.enqueue(busy, paths[:3])
        with pytest.raises(QueueFull) as refused:
            jobs.enqueue(busy, paths[3:5])
        assert refused.value.retry_after_s >= 1 and "RAGD_QUEUE_MAX_FILES=4" in str(refused.value)
        assert _open_files(rag, "busy-tenant") == 3  # nothing of the refused run was queued
        other = rag.collection("queue-bound", tenant="calm-tenant")
        calm = jobs.enqueue(other, paths[:2])  # another tenant's bound is its own
        _drain(rag)
        assert rag.run(str(calm.run_id), tenant="calm-tenant")["status"] == "succeeded"
        assert _open_files(rag, "busy-tenant") == 0
        jobs.enqueue(busy, paths[3:5])  # room again
        _drain(rag)
    finally:
        rag.close()


def test_a_small_upload_is_not_queued_behind_another_tenants_huge_one(client: ragd.Ragd, tmp_path: Path) -> None:
    big = client.collection("fair", tenant="fair-big")
    small = client.collection("fair", tenant="fair-small")
    huge = jobs.enqueue(big, _files(tmp_path / "big", 12, "big"))
    little = jobs.enqueue(small, _files(tmp_path / "small", 2, "small"))
    _drain(client, concurrency=1)
    with client.store.admin() as conn:
        order = [row[0] for row in conn.execute(
            "SELECT run_id FROM ingestion_files WHERE run_id = ANY(%s) ORDER BY started_at, ordinal",
            ([huge.run_id, little.run_id],))]
    # one worker took them one at a time: the small run's two files came among the first four, not after twelve
    assert [i for i, r in enumerate(order) if r == little.run_id] == [1, 3]


def test_cancel_drops_queued_files_and_keeps_what_was_stored(client: ragd.Ragd, name: str, tmp_path: Path) -> None:
    col = client.collection(name)
    first = jobs.enqueue(col, _files(tmp_path / "a", 2, "kept"))
    _drain(client)
    queued = jobs.enqueue(col, _files(tmp_path / "b", 5, "dropped"))
    out = jobs.cancel(client, str(queued.run_id))
    assert out == {"run_id": str(queued.run_id), "status": "cancelled", "dropped": 5}
    _drain(client)  # nothing left for a worker
    run = client.run(str(queued.run_id))
    assert run["status"] == "cancelled" and run["items"] == [] and run["finished_at"] is not None
    assert run["progress"]["files"]["cancelled"] == 5
    assert client.run(str(first.run_id))["status"] == "succeeded"
    assert len(col.documents()) == 2
    # an ended run is left as it is
    assert jobs.cancel(client, str(first.run_id))["status"] == "succeeded"
    client.collection(name, tenant="cancel-other")
    with pytest.raises(RunNotFound):  # another tenant's run does not exist for it
        jobs.cancel(client, str(queued.run_id), tenant="cancel-other")


def _wait_run(http: TestClient, location: str, headers: dict[str, str], timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        run = http.get(location, headers=headers).json()
        if run["status"] not in ("queued", "running") or time.monotonic() > deadline:
            return run  # type: ignore[no-any-return]
        time.sleep(0.2)


def test_an_upload_with_wait_false_is_202_and_the_servers_worker_stores_it(settings: Settings,
                                                                           tmp_path: Path) -> None:
    tenant, other = "rest-q-" + uuid.uuid4().hex[:6], "rest-r-" + uuid.uuid4().hex[:6]
    rag = ragd.connect(settings=settings.model_copy(update={"rate_limit_per_minute": 0, "serve_jobs": "on",
                                                            "worker_heartbeat_s": 0.5}))
    try:
        _, key = keys.create(rag.store, tenant, "tests")
        _, key_other = keys.create(rag.store, other, "tests")
        auth, auth_other = {"Authorization": f"Bearer {key}"}, {"Authorization": f"Bearer {key_other}"}
        paths = _files(tmp_path, 20, "upload")
        files = [("files", (p.name, p.read_bytes(), "text/markdown")) for p in paths]
        with TestClient(create_app(client=rag)) as http:
            began = time.monotonic()
            response = http.post("/v1/documents", params={"collection": "queued", "wait": "false"}, files=files,
                                 headers=auth)
            assert response.status_code == 202, response.text
            body = response.json()
            assert body["status"] == "queued" and body["files"] == 20 and body["collection"] == "queued"
            assert response.headers["location"] == f"/v1/runs/{body['run_id']}"
            run = _wait_run(http, response.headers["location"], auth)
            assert time.monotonic() - began < 120
            assert run["status"] == "succeeded", run
            assert run["progress"]["files"]["done"] == 20 and run["stats"]["counts"] == {"ingested": 20}
            assert sorted(i["external_id"] for i in run["items"]) == sorted(p.name for p in paths)
            # another tenant neither sees nor cancels it
            assert http.get(response.headers["location"], headers=auth_other).status_code == 404
            assert http.post(response.headers["location"] + "/cancel", headers=auth_other).status_code == 404
            found = http.post("/v1/search", json={"query": "upload7alpha", "namespace": "queued", "limit": 3,
                                                  "useReranking": False, "threshold": 0.0}, headers=auth).json()
            assert found["results"] and found["results"][0]["sourceId"] == "upload-007.md", found
            # an ended run is left as it is by cancel; a run is never deleted
            ended = http.post(response.headers["location"] + "/cancel", headers=auth)
            assert ended.status_code == 200 and ended.json()["status"] == "succeeded"
            assert http.delete(response.headers["location"], headers=auth).status_code == 405
    finally:
        rag.close()


def test_the_rest_queue_answers_429_with_retry_after_when_full(settings: Settings, tmp_path: Path) -> None:
    tenant = "rest-full-" + uuid.uuid4().hex[:6]
    rag = ragd.connect(settings=settings.model_copy(update={"rate_limit_per_minute": 0, "queue_max_files": 3,
                                                            "serve_jobs": "off"}))
    try:
        _, key = keys.create(rag.store, tenant, "tests")
        auth = {"Authorization": f"Bearer {key}"}
        files = [("files", (p.name, p.read_bytes(), "text/markdown")) for p in _files(tmp_path, 2)]
        with TestClient(create_app(client=rag)) as http:
            first = http.post("/v1/documents", params={"wait": "false"}, files=files, headers=auth)
            assert first.status_code == 202
            full = http.post("/v1/documents", params={"wait": "false"}, files=files, headers=auth)
            assert full.status_code == 429 and full.json()["error"] == "queue_full"
            assert int(full.headers["retry-after"]) >= 1
            cancelled = http.post(first.headers["location"] + "/cancel", headers=auth)
            assert cancelled.json() == {"run_id": first.json()["run_id"], "status": "cancelled", "dropped": 2}
            assert http.post("/v1/documents", params={"wait": "false"}, files=files,
                             headers=auth).status_code == 202  # room again
    finally:
        jobs.cancel(rag, str(_latest_run(rag, tenant)), tenant=tenant)
        rag.close()


def _latest_run(rag: ragd.Ragd, tenant: str) -> uuid.UUID:
    with rag.store.admin() as conn:
        return conn.execute("SELECT run_id FROM ingestion_runs WHERE tenant_id = %s ORDER BY started_at DESC LIMIT 1",
                            (tenant,)).fetchone()[0]  # type: ignore[index, no-any-return]


# -- exactly once, with workers killed -------------------------------------------------------------------


def _jsonl(path: Path, records: int, tag: str) -> Path:
    path.write_text("".join(json.dumps({"id": f"{tag}-{i}", "text": f"Record {i} of {tag}: the {tag} ledger line "
                                        f"{i} notes {i * 13} crates of {tag}{i % 17}fruit."}) + "\n"
                            for i in range(records)), encoding="utf-8")
    return path


def _worker(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "ragd.cli", "worker", "--concurrency", "1"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _stop(workers: list[subprocess.Popen[bytes]]) -> None:
    """Ask the workers to stop (they finish their job), and kill one that does not within 30 s."""
    for w in workers:
        w.send_signal(signal.SIGTERM)
    for w in workers:
        try:
            w.wait(timeout=30)
        except subprocess.TimeoutExpired:
            w.kill()


def _running_workers(rag: ragd.Ragd, run_id: uuid.UUID, pids: set[int]) -> set[int]:
    """The pids of our workers storing a file of the run now."""
    with rag.store.admin() as conn:
        rows = conn.execute("SELECT worker FROM ingestion_files WHERE run_id = %s AND status = 'running'",
                            (run_id,)).fetchall()
    return {int(r[0].rsplit(":", 1)[1]) for r in rows if r[0]} & pids


def test_every_file_is_stored_exactly_once_while_workers_are_killed(cli_env: dict[str, str], settings: Settings,
                                                                    tmp_path: Path) -> None:
    """30 files (ten of them with several batches' worth of records, so a job commits several) through 3 workers; a
    worker is killed with SIGKILL at seeded random moments (three times, each replaced): every document is stored
    once, with one version, every item is `ingested` (no file counted twice, none lost) and the run succeeded."""
    from ragd.ingest.pipeline import BATCH_DOCS

    records = 2 * BATCH_DOCS + 100  # five batches a ledger (they grow): a job lasts long enough to be killed in
    total = 20 + 10 * records
    rng = random.Random(32)
    folder = tmp_path / "kill"
    folder.mkdir()
    _files(folder, 20, "page")
    for n in range(10):
        _jsonl(folder / f"ledger-{n}.jsonl", records, f"ledger{n}")
    rag = ragd.connect(settings=settings)
    env = {**os.environ, **cli_env, "RAGD_WORKER_HEARTBEAT_S": "0.5", "RAGD_WORKER_STALLED_S": "2",
           "RAGD_JOB_RETRY_WAIT_S": "0.2", "RAGD_ONNX_THREADS": "1"}
    col = rag.collection("killed-" + uuid.uuid4().hex[:6])
    queued = jobs.enqueue(col, [folder])
    workers = [_worker(env) for _ in range(3)]
    killed = 0
    try:
        deadline = time.monotonic() + 240
        while killed < 3 and time.monotonic() < deadline:
            busy = _running_workers(rag, queued.run_id, {w.pid for w in workers})
            if not busy:
                if rag.run(str(queued.run_id))["status"] not in ("queued", "running"):
                    break
                time.sleep(0.05)
                continue
            time.sleep(rng.uniform(0.0, 1.0))  # somewhere in the job: extracting, embedding, between batches
            chosen = rng.choice(sorted(busy))  # drawn once: a draw per worker could match none of them
            victim = next(w for w in workers if w.pid == chosen)
            victim.send_signal(signal.SIGKILL)
            victim.wait()
            workers[workers.index(victim)] = _worker(env)
            killed += 1
        run = jobs.wait_for(rag, str(queued.run_id), timeout_s=max(10.0, deadline - time.monotonic()))
    finally:
        _stop(workers)
    assert killed >= 1
    assert run["status"] == "succeeded", run["status"]
    items = run["items"]
    assert len(items) == total and {i["status"] for i in items} == {"ingested"}
    assert run["stats"]["counts"] == {"ingested": total}
    with rag.store.tenant(col.tenant) as conn:
        docs = conn.execute("SELECT count(*), count(DISTINCT external_id) FROM documents WHERE collection_id = %s",
                            (col.collection_id,)).fetchone()
        versions = conn.execute("SELECT count(*), count(*) FILTER (WHERE is_active) FROM document_versions v "
                                "JOIN documents d USING (doc_id) WHERE d.collection_id = %s",
                                (col.collection_id,)).fetchone()
        orphans = conn.execute("SELECT count(*) FROM chunks c WHERE c.collection_id = %s AND NOT EXISTS (SELECT 1 "
                               "FROM document_versions v WHERE v.doc_version_id = c.doc_version_id AND v.is_active)",
                               (col.collection_id,)).fetchone()
    assert docs == (total, total) and versions == (total, total) and orphans == (0,)
    assert len({i["doc_id"] for i in items}) == total  # each item its own document
    with rag.store.admin() as conn:
        attempts = [r[0] for r in conn.execute("SELECT attempts FROM ingestion_files WHERE run_id = %s",
                                                (queued.run_id,))]
    assert killed == 3 and sum(attempts) >= 30 + 3  # each kill cost its job a second attempt (or more)
    rag.close()


def test_the_cli_queues_watches_and_cancels(cli_env: dict[str, str], tmp_path: Path, name: str) -> None:
    env = {**cli_env, "RAGD_TENANT": "cli-queue"}
    _files(tmp_path, 3, "cli")
    queued = run_cli(["ingest", str(tmp_path), "-c", name, "--queue", "--json"], env)
    assert queued.returncode == 0, queued.stderr
    run_id = json.loads(queued.stdout)["run_id"]
    assert json.loads(queued.stdout) == {"run_id": run_id, "status": "queued", "files": 3, "failed": 0}
    worked = run_cli(["worker", "--until-empty"], env)
    assert worked.returncode == 0, worked.stderr
    watched = run_cli(["runs", "watch", run_id], env)
    assert watched.returncode == 0, watched.stderr
    assert sum(line.startswith("ingested ") for line in watched.stdout.splitlines()) == 3  # each item as it lands
    assert f"run {run_id} succeeded: files 3/3 done" in watched.stdout
    shown = run_cli(["runs", "show", run_id], env)
    assert "files 3/3 done (0 running, 0 queued, 0 cancelled)" in shown.stdout
    again = json.loads(run_cli(["ingest", str(tmp_path), "-c", name, "--queue", "--json"], env).stdout)
    cancelled = run_cli(["runs", "cancel", again["run_id"]], env)
    assert cancelled.returncode == 0 and f"run {again['run_id']} cancelled: 3 queued files dropped" in cancelled.stdout
    missing = run_cli(["runs", "cancel", str(uuid.uuid4())], env)
    assert missing.returncode == 4 and "run_not_found" in missing.stderr


def test_a_run_survives_postgresql_killed_mid_job(tmp_path: Path) -> None:
    """PostgreSQL itself killed with SIGKILL while two workers store a run (its own embedded server): the workers
    say so, wait for it, and the run ends with every document stored once."""
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGD_")} | {
        "RAGD_HOME": str(home), "RAGD_EMBEDDER": "hash", "RAGD_WORKER_HEARTBEAT_S": "0.5",
        "RAGD_WORKER_STALLED_S": "2", "RAGD_JOB_RETRY_WAIT_S": "0.2", "RAGD_ONNX_THREADS": "1"}
    folder = tmp_path / "ledgers"
    folder.mkdir()
    for n in range(8):
        _jsonl(folder / f"ledger-{n}.jsonl", 600, f"pgkill{n}")
    settings = Settings(home=home, embedder="hash")
    rag = ragd.connect(settings=settings)
    col = rag.collection("pg-killed")
    queued = jobs.enqueue(col, [folder])
    workers = [_worker(env) for _ in range(2)]
    try:
        deadline = time.monotonic() + 60
        while not _running_workers(rag, queued.run_id, {w.pid for w in workers}) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        postmaster = int((home / "pgdata" / "postmaster.pid").read_text().split()[0])
        os.kill(postmaster, signal.SIGKILL)
        for _ in range(10):  # its backends notice their postmaster is gone and end; then it starts again
            time.sleep(1.0)
            if run_cli(["db", "start"], {"RAGD_HOME": str(home), "RAGD_EMBEDDER": "hash"}).returncode == 0:
                break
        run = jobs.wait_for(rag, str(queued.run_id), timeout_s=180)
    finally:
        _stop(workers)
        rag.close()
        embedded.stop(home / "pgdata")
    assert run["status"] == "succeeded", run["status"]
    failed = [(i["item_index"], i["error_code"], i["reason"]) for i in run["items"] if i["status"] != "ingested"]
    assert run["stats"]["counts"] == {"ingested": 8 * 600}, failed
    assert len({i["doc_id"] for i in run["items"]}) == 8 * 600


def test_a_file_claimed_again_while_its_first_attempt_runs_is_stored_once(client: ragd.Ragd, name: str,
                                                                          tmp_path: Path) -> None:
    """procrastinate gives a stalled worker's job (its heartbeats late, its connection to the queue lost) to another
    worker while the first attempt may still be storing the file. The newer attempt holds the file from its claim:
    the older one's next batch is refused (it stops, recording nothing), the newer skips what the older stored, and
    the run counts every document once with no failed item (it used to record the loser's duplicate-key error)."""
    folder = tmp_path / "ledger"
    folder.mkdir()
    _jsonl(folder / "big.jsonl", 3000, "claimed")
    col = client.collection(name)
    queued = jobs.enqueue(col, [folder])
    first, second = jobs.Jobs(client), jobs.Jobs(client)
    results: dict[str, str] = {}

    def attempt(worker: jobs.Jobs, key: str, tries: int) -> None:
        results[key] = worker._ingest_file(_context(worker, queued.run_id, tries), str(queued.run_id), 0)

    older = threading.Thread(target=attempt, args=(first, "older", 0))
    older.start()
    deadline = time.monotonic() + 120
    while not _items(client, queued.run_id) and time.monotonic() < deadline:  # its first batch committed
        time.sleep(0.02)
    attempt(second, "newer", 1)  # the job handed out again, while the older attempt goes on
    older.join(timeout=300)
    run = client.run(str(queued.run_id))
    assert results["older"] == "superseded" and results["newer"].endswith(" items"), results
    assert run["status"] == "succeeded", run["status"]
    assert run["stats"]["counts"] == {"ingested": 3000}, [i for i in run["items"] if i["status"] != "ingested"][:3]
    with client.store.tenant(col.tenant) as conn:
        docs = conn.execute("SELECT count(*), count(DISTINCT external_id) FROM documents WHERE collection_id = %s",
                            (col.collection_id,)).fetchone()
        versions = conn.execute("SELECT count(*) FROM document_versions v JOIN documents d USING (doc_id) "
                                "WHERE d.collection_id = %s", (col.collection_id,)).fetchone()
    assert docs == (3000, 3000) and versions == (3000,)
    with client.store.admin() as conn:
        file = conn.execute("SELECT status, attempts FROM ingestion_files WHERE run_id = %s",
                            (queued.run_id,)).fetchone()
    assert file == ("done", 2)
    client.collection(name, tenant="claimed-other")
    with client.store.tenant("claimed-other") as conn:  # another tenant's session learns nothing of the file
        assert conn.execute("SELECT ragd_hold_file(%s, 0, 2)", (queued.run_id,)).fetchone() == (None,)


def test_a_tenant_holding_its_own_files_row_does_not_hold_a_worker(client: ragd.Ragd, settings: Settings,
                                                                    name: str, tmp_path: Path) -> None:
    """A tenant's SQL session can lock its own queued file's row (ragd_hold_file takes it FOR SHARE) and keep its
    transaction open; a worker claiming that file waits at most RAGD_DB_LOCK_TIMEOUT_S, fails transiently (the job
    is tried again later) and is free for other tenants' files; once the tenant lets go, the file is stored."""
    _files(tmp_path, 1, "held")
    col = client.collection(name, tenant="holds-its-row")
    queued = jobs.enqueue(col, [tmp_path])
    impatient = ragd.connect(settings=settings.model_copy(update={"db_lock_timeout_s": 0.5}))
    outcome: dict[str, BaseException | str] = {}

    def claim() -> None:
        try:
            side = jobs.Jobs(impatient)
            outcome["claim"] = side._ingest_file(_context(side, queued.run_id, 0), str(queued.run_id), 0)
        except BaseException as exc:  # (what the attempt raised is what the test looks at)
            outcome["claim"] = exc

    try:
        with client.store.tenant(col.tenant) as conn:
            conn.execute("SELECT ragd_hold_file(%s, 0, 0)", (queued.run_id,))  # held until this block ends
            worker = threading.Thread(target=claim)
            worker.start()
            worker.join(timeout=60)  # (a guard: the claim gives up after 0.5 s)
            assert not worker.is_alive()
        assert isinstance(outcome["claim"], jobs.TRANSIENT), outcome  # procrastinate tries the job again later
        assert "lock timeout" in str(outcome["claim"])
        _drain(client)
        run = client.run(str(queued.run_id), tenant=col.tenant)
        assert run["status"] == "succeeded" and run["stats"]["counts"] == {"ingested": 1}
    finally:
        impatient.close()


def _context(worker: jobs.Jobs, run_id: uuid.UUID, attempts: int) -> JobContext:
    """The context procrastinate hands the task: its job, tried `attempts` times before."""
    job = Job(id=None, queue=jobs.QUEUE, lock=None, queueing_lock=None, task_name=jobs.TASK, attempts=attempts,
              task_kwargs={"run_id": str(run_id), "ordinal": 0})
    return JobContext(app=worker.app, job=job, start_timestamp=time.time(), abort_reason=lambda: None)


def _items(rag: ragd.Ragd, run_id: uuid.UUID) -> int:
    with rag.store.admin() as conn:
        return int(conn.execute("SELECT count(*) FROM ingestion_items WHERE run_id = %s", (run_id,)).fetchone()[0])


def test_a_queued_run_records_refused_paths_as_ingest_does(client: ragd.Ragd, name: str, tmp_path: Path) -> None:
    """A link to nothing (skipped while walking) and a FIFO (not a regular file): the same items, statuses, codes
    and sources as `ragd ingest` records for the same folder."""
    _files(tmp_path, 1)
    (tmp_path / "gone.md").symlink_to(tmp_path / "missing.md")
    os.mkfifo(tmp_path / "pipe.md")

    def refused(run: dict[str, Any]) -> list[tuple[str, str, str]]:
        return sorted((i["status"], i["error_code"], i["source_uri"]) for i in run["items"]
                      if i["status"] not in ("ingested", "unchanged"))

    direct = client.collection(name).ingest([tmp_path])
    queued = jobs.enqueue(client.collection(name + "-q"), [tmp_path])
    _drain(client)
    expected = refused(client.run(str(direct.run_id)))
    assert {s for s, _, _ in expected} == {"skipped", "failed"} and len(expected) == 2
    assert refused(client.run(str(queued.run_id))) == expected
