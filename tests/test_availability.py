"""No tenant and no single request takes the service down for everyone (issue 56): a tenant's SQL holding locks,
keys, transactions or connections stalls only that tenant; the queue tells tenants nothing of each other; a
worker that drains the queue finishes what killed workers left."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

import ragd
from ragd import jobs

from .conftest import run_cli


def _note(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"# {name}\n\n{text}\n", encoding="utf-8")
    return path


@contextmanager
def login(client: ragd.Ragd, tenant: str) -> Iterator[psycopg.Connection[Any]]:
    """A raw login as the tenant's own role, autocommit, as a tenant given SQL access would hold one (none of the
    session settings ragd's pools give their connections)."""
    role = client.store.tenant_role(tenant)
    with psycopg.connect(client.store._login_url(role), autocommit=True) as conn:
        yield conn


@pytest.fixture
def two(client: ragd.Ragd, tmp_path: Path) -> tuple[ragd.Collection, ragd.Collection]:
    tag = uuid.uuid4().hex[:6]
    a = client.collection("avail", tenant="avail-a-" + tag)
    b = client.collection("avail", tenant="avail-b-" + tag)
    a.ingest([_note(tmp_path / "a", "a.md", "Tenant A keeps its ledgers of copper.")])
    b.ingest([_note(tmp_path / "b", "b.md", "Tenant B keeps its ledgers of tin.")])
    return a, b


def test_a_tenant_holding_every_queue_key_it_can_name_stalls_no_upload(
        client: ragd.Ragd, two: tuple[ragd.Collection, ragd.Collection], tmp_path: Path) -> None:
    """The queue's bound per tenant was an advisory lock on a key any role could take: A holding its own key (and
    B's) hung every upload of that tenant, each holding a pool connection. The lock is now a row no tenant can
    read or lock."""
    a, b = two
    with login(client, a.tenant) as conn:
        for tenant in (a.tenant, b.tenant):
            conn.execute("SELECT pg_advisory_lock(hashtextextended('ragd-queue:' || %s, 0))", (tenant,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT * FROM ragd_locks FOR UPDATE")
        started = time.monotonic()
        queued = [jobs.enqueue(col, [_note(tmp_path / col.tenant, "q.md", "Queued while A holds the keys.")])
                  for col in (a, b)]
        assert time.monotonic() - started < 5
    for col, run in zip((a, b), queued):
        jobs.cancel(client, str(run.run_id), tenant=col.tenant)


def test_tenants_hear_nothing_of_the_queue_and_cannot_wake_a_worker(
        client: ragd.Ragd, two: tuple[ragd.Collection, ragd.Collection], tmp_path: Path) -> None:
    """PostgreSQL has no privilege for LISTEN: A listening on the queue's channels heard B's job ids and timing.
    The queue now sends nothing (workers poll), and what A sends on those channels is heard by no worker."""
    a, b = two
    with login(client, a.tenant) as conn:
        for channel in ("procrastinate_any_queue_v1", f"procrastinate_queue_v1#{jobs.QUEUE}"):
            conn.execute(psycopg.sql.SQL("LISTEN {}").format(psycopg.sql.Identifier(channel)))
        queued = jobs.enqueue(b, [_note(tmp_path / "b2", "heard.md", "A job of B's that A must not hear of.")])
        heard = list(conn.notifies(timeout=2.0, stop_after=1))
        assert heard == []
        conn.execute("NOTIFY procrastinate_any_queue_v1, '{\"type\": \"job_inserted\", \"job_id\": 1}'")
    worker = jobs.Jobs(client)
    asyncio.run(worker.run(signals=False, until_empty=True))
    assert client.run(str(queued.run_id), tenant=b.tenant)["status"] == "succeeded"


def test_a_draining_worker_finishes_the_job_a_killed_worker_left(cli_env: dict[str, str], client: ragd.Ragd,
                                                                 tmp_path: Path) -> None:
    """kill -9 a worker mid-file, then run only `ragd worker --until-empty`: it exited 0 with the job left in
    `doing` and the run `running`. It now queues the stalled job again (once its heartbeats have stopped for
    RAGD_WORKER_STALLED_S) and stores it before it says the queue is empty."""
    folder = tmp_path / "long"
    folder.mkdir()
    with (folder / "ledger.jsonl").open("w", encoding="utf-8") as out:
        for i in range(6000):
            out.write(json.dumps({"id": f"l-{i}", "text": f"Ledger line {i}: {i * 7} crates of pears{i % 13}."}))
            out.write("\n")
    col = client.collection("drain-" + uuid.uuid4().hex[:6])
    queued = jobs.enqueue(col, [folder])
    env = {**os.environ, **cli_env, "RAGD_WORKER_HEARTBEAT_S": "0.5", "RAGD_WORKER_STALLED_S": "2",
           "RAGD_ONNX_THREADS": "1"}
    worker = subprocess.Popen([sys.executable, "-m", "ragd.cli", "worker"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and client.run(str(queued.run_id))["status"] != "running":
            time.sleep(0.05)
        time.sleep(0.5)  # inside the file: reading, embedding or between batches
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait()
    assert client.run(str(queued.run_id))["status"] == "running"
    drained = run_cli(["worker", "--until-empty"], {**cli_env, "RAGD_WORKER_HEARTBEAT_S": "0.5",
                                                    "RAGD_WORKER_STALLED_S": "2"}, timeout=300)
    assert drained.returncode == 0, drained.stderr
    run = client.run(str(queued.run_id))
    assert run["status"] == "succeeded" and run["stats"]["counts"] == {"ingested": 6000}, run["status"]
    assert "Traceback" not in drained.stderr

