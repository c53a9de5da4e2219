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
from ragd.config import Settings
from ragd.errors import Busy
from ragd.store import embedded

from .conftest import SAMPLES, run_cli


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



# -- a tenant's resources are bounded ------------------------------------------------------------------------------

def test_a_tenant_at_its_connection_limit_is_told_so_and_no_one_else_is_stalled(
        client: ragd.Ragd, settings: Settings, two: tuple[ragd.Collection, ragd.Collection]) -> None:
    """A raw tenant login opened 81 connections, after which no one could log in. Its role now has a CONNECTION
    LIMIT (RAGD_TENANT_CONNECTION_LIMIT, set again at each process's first login check): past it, that tenant's
    new sessions are refused with a reason, and every other tenant's go on."""
    _, b = two
    lonely = "avail-c-" + uuid.uuid4().hex[:6]  # a tenant no pool of this process has logged in as
    with ragd.connect(settings=settings) as maker:
        maker.collection("avail", tenant=lonely).ingest(documents=[{"id": "c", "text": "Copper ledgers of C."}])
    limited = settings.model_copy(update={"tenant_connection_limit": 3, "db_timeout_s": 2.0})
    with ragd.connect(settings=limited) as fresh:
        fresh.collection("avail", tenant=lonely, create=False).search("copper ledgers")  # its role checked and limited
        url = fresh.store._login_url(fresh.store.tenant_role(lonely))
        held: list[psycopg.Connection[Any]] = []
        try:
            with pytest.raises(psycopg.OperationalError, match="too many connections for role"):
                for _ in range(4):  # (its pool holds one or two of the three already)
                    held.append(psycopg.connect(url))
            assert len(held) <= 2
            with ragd.connect(settings=limited) as next_process:
                with pytest.raises(Busy, match=f"tenant '{lonely}' has too many connections open"):
                    next_process.collection("avail", tenant=lonely, create=False).search("copper ledgers")
                started = time.monotonic()
                hits = next_process.collection("avail", tenant=b.tenant, create=False).search("tin")
                assert hits and time.monotonic() - started < 2
        finally:
            for conn in held:
                conn.close()
    with ragd.connect(settings=settings) as restored:  # the configured limit is the role's again
        assert restored.collection("avail", tenant=lonely, create=False).search("copper ledgers")
        with psycopg.connect(restored.store.url) as conn:
            assert conn.execute("SELECT rolconnlimit FROM pg_roles WHERE rolname = %s",
                                (restored.store.tenant_role(lonely),)).fetchone() == (20,)


def test_a_tenants_statement_cannot_fill_the_disk(settings: Settings,
                                                  two: tuple[ragd.Collection, ragd.Collection]) -> None:
    """temp_file_limit was -1 for tenant roles: a sort of any size spilled to disk. It is stored for the role, and a
    tenant cannot set it (nor lift it) in its session."""
    a, _ = two
    with ragd.connect(settings=settings.model_copy(update={"tenant_temp_file_limit_mb": 1})) as small:
        small.collection("avail", tenant=a.tenant, create=False).search("copper")
        with small.store.tenant(a.tenant) as conn:
            assert conn.execute("SHOW temp_file_limit").fetchone() == ("1MB",)
            with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
                conn.execute("SET temp_file_limit = -1")
            conn.execute("SET work_mem = '64kB'")
            with pytest.raises(psycopg.errors.ConfigurationLimitExceeded, match="temp_file_limit"):
                conn.execute("SELECT count(*) FROM (SELECT md5(g::text) m FROM generate_series(1, 300000) g "
                             "ORDER BY m) s")


def test_stored_settings_are_repaired_whatever_role_they_make_the_login(
        client: ragd.Ragd, settings: Settings, two: tuple[ragd.Collection, ragd.Collection]) -> None:
    """`ALTER ROLE CURRENT_USER SET role = 'ragd_app'` made the login check read ragd_app's settings, so the others
    stored beside it were never repaired: a fresh process's tenant session ran with work_mem 1GB and index scans
    off. The check reads the session user's settings."""
    a, _ = two
    with login(client, a.tenant) as conn:
        for setting in ("work_mem = '1GB'", "enable_indexscan = off", "role = 'ragd_app'"):
            conn.execute(f"ALTER ROLE CURRENT_USER SET {setting}")
    with ragd.connect(settings=settings) as fresh:
        assert fresh.collection("avail", tenant=a.tenant, create=False).search("copper")
        with fresh.store.tenant(a.tenant) as conn:
            assert conn.execute("SELECT current_setting('work_mem') <> '1GB', current_setting('enable_indexscan'), "
                                "session_user = current_user").fetchone() == (True, "on", True)
        with psycopg.connect(fresh.store.url) as conn:
            stored = conn.execute("SELECT s.setconfig FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole "
                                  "WHERE r.rolname = %s", (fresh.store.tenant_role(a.tenant),)).fetchall()
    assert stored == [([f"temp_file_limit={settings.tenant_temp_file_limit_mb * 1024}"],)]


# -- workers and errors -------------------------------------------------------------------------------------------

def test_a_command_after_the_postmaster_died_is_one_line_or_an_answer(tmp_path: Path) -> None:
    """kill -9 the embedded server's postmaster: the next command starts it again (its pid file and exiting
    backends were taken for a running server: `internal: OperationalError`), and a command pointed at the dead
    server's URL says in one line that the database is unavailable (exit 3), no pool warnings, no repair."""
    env = {"RAGD_HOME": str(tmp_path), "RAGD_EMBEDDER": "hash", "RAGD_RERANKER": "none"}
    assert run_cli(["ingest", str(SAMPLES), "-c", "docs"], env).returncode == 0
    try:
        pgdata = tmp_path / "pgdata"
        url = f"postgresql://postgres@/ragd?host={pgdata}&port=5432"
        for _ in range(2):
            os.kill(int((pgdata / "postmaster.pid").read_text().split()[0]), signal.SIGKILL)
            time.sleep(0.3)
            dead = run_cli(["search", "parental leave", "-c", "docs"], {**env, "RAGD_DATABASE_URL": url})
            assert dead.returncode == 3 and dead.stderr.count("\n") == 1, dead.stderr
            assert dead.stderr.startswith("error (database_unavailable)") and "repairing" not in dead.stderr
            again = run_cli(["search", "parental leave", "-c", "docs"], env)
            assert again.returncode == 0 and "parental-leave.md" in again.stdout, again.stderr
            assert again.stderr == ""
    finally:
        embedded.stop(tmp_path / "pgdata")
