"""Ingestion as jobs (ragd.jobs): queued runs stored by real workers on the real queue, exactly once, fairly, with
backpressure, progress and cancellation."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import ragd
from ragd import jobs
from ragd.config import Settings
from ragd.errors import QueueFull, RunNotFound
from ragd.store import queries


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
    assert failed["error_code"] == "corrupt_document" and failed["source_uri"] == (tmp_path / "docs" / "broken.pdf").resolve().as_uri()
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
