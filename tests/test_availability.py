"""No tenant and no single request takes the service down for everyone (issue 56): a tenant's SQL holding locks,
keys, transactions or connections stalls only that tenant; the queue tells tenants nothing of each other; a
worker that drains the queue finishes what killed workers left."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

import ragd
from ragd import jobs, keys
from ragd.config import Settings
from ragd.errors import Busy
from ragd.store import embedded

from .conftest import SAMPLES, run_cli, serving


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


RECORDS = 15_000  # a file long enough (several seconds) to be killed inside of


def test_a_draining_worker_finishes_the_job_a_killed_worker_left(cli_env: dict[str, str], client: ragd.Ragd,
                                                                 tmp_path: Path) -> None:
    """kill -9 a worker mid-file, then run only `ragd worker --until-empty`: it exited 0 with the job left in
    `doing` and the run `running`. It now queues the stalled job again (once its heartbeats have stopped for
    RAGD_WORKER_STALLED_S) and stores it before it says the queue is empty."""
    folder = tmp_path / "long"
    folder.mkdir()
    with (folder / "ledger.jsonl").open("w", encoding="utf-8") as out:
        for i in range(RECORDS):
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
    assert run["status"] == "succeeded" and run["stats"]["counts"] == {"ingested": RECORDS}, run["status"]
    assert "Traceback" not in drained.stderr



# -- a tenant's resources are bounded ------------------------------------------------------------------------------

def test_a_tenant_at_its_connection_limit_is_told_so_and_no_one_else_is_stalled(
        settings: Settings) -> None:
    """A raw tenant login opened 81 connections, after which no one could log in. Its role now has a CONNECTION
    LIMIT (RAGD_TENANT_CONNECTION_LIMIT, set again at each process's first login check): past it, that tenant's
    new sessions are refused with a reason, and every other tenant's go on."""
    tag = uuid.uuid4().hex[:6]
    lonely, calm = "avail-c-" + tag, "avail-d-" + tag  # tenants no pool of this process has logged in as
    with ragd.connect(settings=settings) as maker:
        maker.collection("avail", tenant=lonely).ingest(documents=[{"id": "c", "text": "Copper ledgers of C."}])
        maker.collection("avail", tenant=calm).ingest(documents=[{"id": "d", "text": "Tin ledgers of D."}])
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
                hits = next_process.collection("avail", tenant=calm, create=False).search("tin")
                assert hits and time.monotonic() - started < 2
        finally:
            for conn in held:
                conn.close()
    with ragd.connect(settings=settings) as restored:  # the configured limit is the role's again
        assert restored.collection("avail", tenant=lonely, create=False).search("copper ledgers")
        assert restored.collection("avail", tenant=calm, create=False).search("tin")
        with psycopg.connect(restored.store.url) as conn:
            for tenant in (lonely, calm):
                assert conn.execute("SELECT rolconnlimit FROM pg_roles WHERE rolname = %s",
                                    (restored.store.tenant_role(tenant),)).fetchone() == (20,)


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


# -- tenant A in every hostile state at once, tenant B served as usual ---------------------------------------------

def _hostile(url: str, tenants: list[str]) -> list[psycopg.Connection[Any]]:
    """bench/hostile_tenant.py's hold_everything: one tenant's logins holding all a tenant may hold."""
    import importlib.util

    from .conftest import REPO

    if "hostile_tenant" not in sys.modules:
        sys.path.append(str(REPO / "bench"))  # (it imports the benches' _common)
        found = importlib.util.spec_from_file_location("hostile_tenant", REPO / "bench" / "hostile_tenant.py")
        assert found is not None and found.loader is not None
        module = importlib.util.module_from_spec(found)
        sys.modules["hostile_tenant"] = module
        found.loader.exec_module(module)
    return sys.modules["hostile_tenant"].hold_everything(url, tenants)  # type: ignore[no-any-return]


def test_tenant_a_in_every_hostile_state_stalls_only_itself(client: ragd.Ragd, cli_env: dict[str, str],
                                                           tmp_path: Path) -> None:
    """While A holds everything above and sends uploads of its own, B searches, uploads into a new collection
    (its index is built in the background, behind A's snapshot, never in the request) and reads /readyz: each
    answer within 1 s at p95, nothing 5xx but A's own (503 with Retry-After)."""
    tag = uuid.uuid4().hex[:6]
    a, b = "hostile-a-" + tag, "victim-b-" + tag
    _, key_a = keys.create(client.store, a, "tests")
    _, key_b = keys.create(client.store, b, "tests")
    client.collection("mine", tenant=a).ingest(documents=[{"id": "a1", "text": "A's own ledger of copper."}])
    client.collection("mine", tenant=b).ingest(documents=[{"id": "b1", "text": "B's own ledger of tin."}])
    env = {**cli_env, "RAGD_RERANKER": "none", "RAGD_RATE_LIMIT_PER_MINUTE": "0", "RAGD_DB_TIMEOUT_S": "3",
           "RAGD_DB_LOCK_TIMEOUT_S": "3", "RAGD_TENANT_CONNECTION_LIMIT": "20"}
    auth_a, auth_b = {"Authorization": f"Bearer {key_a}"}, {"Authorization": f"Bearer {key_b}"}
    with serving(env) as server, httpx.Client(base_url=server["url"], timeout=60) as http:
        assert http.get("/readyz").status_code == 200
        assert http.post("/v1/search", json={"query": "tin", "namespace": "mine"}, headers=auth_b).status_code == 200
        held = _hostile(client.store._login_url(client.store.tenant_role(a)), [a, b])
        try:
            def upload_a(n: int) -> int:
                files = [("files", (f"a-{n}.md", f"# A {n}\n\nA's upload {n} about copper.\n".encode(),
                                    "text/markdown"))]
                wait = "false" if n % 2 else "true"
                return http.post("/v1/documents", params={"collection": f"a-new-{n}", "wait": wait}, files=files,
                                 headers=auth_a).status_code

            timings: list[float] = []
            statuses: list[tuple[str, int]] = []

            def timed(what: str, call: Any) -> None:
                started = time.monotonic()
                response = call()
                timings.append(time.monotonic() - started)
                statuses.append((what, response.status_code))

            with ThreadPoolExecutor(8) as pool:
                a_replies = pool.map(upload_a, range(8))
                for n in range(6):
                    timed("search", lambda: http.post("/v1/search", json={"query": "tin", "namespace": "mine"},
                                                      headers=auth_b))
                    timed("readyz", lambda: http.get("/readyz"))
                    timed("upload", lambda n=n: http.post(
                        "/v1/documents", params={"collection": f"b-new-{tag}-{n}"}, headers=auth_b,
                        files=[("files", (f"b-{n}.md", f"# B {n}\n\nB's note {n} on tin.\n".encode(),
                                          "text/markdown"))]))
                    timed("list", lambda: http.get("/v1/documents", params={"collection": "mine"}, headers=auth_b))
                a_statuses = list(a_replies)
            found = http.post("/v1/search", json={"query": "note tin", "namespace": f"b-new-{tag}-0",
                                                  "threshold": 0.0}, headers=auth_b)
        finally:
            for conn in held:
                conn.close()
    assert all(status < 500 for _, status in statuses), statuses
    assert [s for w, s in statuses if w == "upload"] == [200] * 6
    timings.sort()
    p95 = timings[int(0.95 * (len(timings) - 1))]
    assert p95 < 1.0, (p95, timings)
    assert found.status_code == 200 and found.json()["results"], found.text  # searched by exact scan meanwhile
    assert all(status in (200, 202, 503) for status in a_statuses), a_statuses  # A's own trouble only
    assert "Traceback" not in server["stderr"]


def test_a_tenants_waiting_requests_hold_only_its_share_of_the_connections(
        settings: Settings, two: tuple[ragd.Collection, ragd.Collection]) -> None:
    """Bulkheads: A's requests waiting on the database hold at most ADMIN_SHARE of the privileged pool and all of
    A's own sessions, never more; past RAGD_DB_TIMEOUT_S the next of A's is Busy (503 with Retry-After), while B's
    go on at once."""
    from ragd.store.postgres import ADMIN_POOL_SIZE, ADMIN_RESERVED, ADMIN_SHARE, TENANT_POOL_SIZE

    a, b = two
    with ragd.connect(settings=settings.model_copy(update={"db_timeout_s": 0.5})) as rag, \
            contextlib.ExitStack() as stack:
        rag.store.tenant_role(a.tenant)  # (known to this process: no lookup needs A's share below)
        for _ in range(ADMIN_SHARE):
            stack.enter_context(rag.store.admin(a.tenant))
        started = time.monotonic()
        with pytest.raises(Busy, match="requests waiting on the database"), rag.store.admin(a.tenant):
            pass
        assert time.monotonic() - started < 3
        with rag.store.admin(b.tenant) as conn:  # B's share is B's
            assert conn.execute("SELECT 1").fetchone() == (1,)
        for _ in range(TENANT_POOL_SIZE):
            stack.enter_context(rag.store.tenant(a.tenant))
        with pytest.raises(Busy, match="sessions of this process in use"), rag.store.tenant(a.tenant):
            pass
        assert rag.collection("avail", tenant=b.tenant, create=False).search("tin")
        for _ in range(ADMIN_POOL_SIZE - ADMIN_RESERVED - ADMIN_SHARE):  # B's requests take what tenants may
            stack.enter_context(rag.store.admin(b.tenant))
        with pytest.raises(Busy, match="connections for tenants' requests were all in use"), \
                rag.store.admin("a-third-tenant"):
            pass
        with rag.store.admin() as conn:  # key checks and /readyz still find theirs
            assert conn.execute("SELECT 1").fetchone() == (1,)


def test_busy_is_a_503_with_retry_after(settings: Settings, two: tuple[ragd.Collection, ragd.Collection]) -> None:
    from fastapi.testclient import TestClient

    from ragd.server import create_app
    from ragd.store.postgres import TENANT_POOL_SIZE

    a, _ = two
    rag = ragd.connect(settings=settings.model_copy(update={"db_timeout_s": 0.5, "rate_limit_per_minute": 0}))
    try:
        _, key = keys.create(rag.store, a.tenant, "tests")
        with TestClient(create_app(client=rag)) as http, contextlib.ExitStack() as stack:
            for _ in range(TENANT_POOL_SIZE):
                stack.enter_context(rag.store.tenant(a.tenant))
            r = http.post("/v1/search", json={"query": "copper", "namespace": "avail"},
                          headers={"Authorization": f"Bearer {key}"})
        assert r.status_code == 503 and r.json()["error"] == "busy" and r.headers["retry-after"] == "5", r.text
        assert "sessions of this process in use" in r.json()["message"]
    finally:
        rag.close()


def test_a_server_asked_to_stop_stops_within_seconds_whatever_its_requests_wait_for(
        client: ragd.Ragd, cli_env: dict[str, str], tmp_path: Path) -> None:
    """A request that waits (here A's cancel, waiting on A's own lock on its file for up to a minute) held
    `ragd serve` after SIGTERM or Ctrl-C until it ended: the server cancels what is still running after
    SHUTDOWN_GRACE_S, and abandons the threads that still wait."""
    from ragd.server import SHUTDOWN_GRACE_S

    tenant = "stopper-" + uuid.uuid4().hex[:6]
    _, key = keys.create(client.store, tenant, "tests")
    col = client.collection("stops", tenant=tenant)
    queued = jobs.enqueue(col, [_note(tmp_path, "held.md", "A file whose row its tenant holds.")])
    env = {**cli_env, "RAGD_SERVE_JOBS": "off", "RAGD_DB_LOCK_TIMEOUT_S": "60", "RAGD_RATE_LIMIT_PER_MINUTE": "0"}
    for stop in (signal.SIGTERM, signal.SIGINT):
        with client.store.tenant(tenant) as conn, serving(env) as server:
            conn.execute("SELECT ragd_hold_file(%s, 0, 0)", (queued.run_id,))  # held until this block ends
            with ThreadPoolExecutor(1) as pool:
                waiting = pool.submit(httpx.post, f"{server['url']}/v1/runs/{queued.run_id}/cancel",
                                      headers={"Authorization": f"Bearer {key}"}, timeout=120)
                time.sleep(1.0)
                assert not waiting.done()
                started = time.monotonic()
                os.kill(int(server["pid"]), stop)
                deadline = started + SHUTDOWN_GRACE_S + 10
                while time.monotonic() < deadline and _alive(int(server["pid"])):
                    time.sleep(0.1)
                assert not _alive(int(server["pid"])), f"still running {time.monotonic() - started:.1f} s after {stop}"
                with contextlib.suppress(httpx.HTTPError):
                    waiting.result(timeout=10)
        assert "Traceback" not in server["stderr"], server["stderr"][-3000:]
    jobs.cancel(client, str(queued.run_id), tenant=tenant)


def _alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return waited == 0


def test_a_workers_jobs_do_not_wait_behind_another_tenants_snapshot(
        client: ragd.Ragd, settings: Settings, two: tuple[ragd.Collection, ragd.Collection], tmp_path: Path) -> None:
    """A worker serves every tenant's files: B's first file into a new collection is stored, and the worker free
    for the next, while the collection's index waits for A's snapshot beside the jobs; `--until-empty` says the
    queue is drained once that build is done too."""
    import threading

    from ragd.store import queries

    a, b = two
    col = client.collection("fresh-" + uuid.uuid4().hex[:6], tenant=b.tenant)
    queued = jobs.enqueue(col, [_note(tmp_path / "w", "first.md", "B's first file of a new collection.")])
    with login(client, a.tenant) as snapshot, ragd.connect(settings=settings) as worker_client:
        snapshot.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        snapshot.execute("SELECT count(*) FROM chunks")
        drained = threading.Thread(target=lambda: asyncio.run(jobs.Jobs(worker_client).run(signals=False,
                                                                                          until_empty=True)))
        drained.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and client.run(str(queued.run_id), tenant=b.tenant)["status"] != "succeeded":
            time.sleep(0.1)
        assert client.run(str(queued.run_id), tenant=b.tenant)["status"] == "succeeded"
        assert [h.external_id for h in col.search("first file", k=3)]  # searched exactly meanwhile
        time.sleep(0.5)
        assert drained.is_alive()  # its build waits for A's snapshot
        snapshot.execute("COMMIT")
        drained.join(60)
        assert not drained.is_alive()
    with client.store.admin() as conn:
        name = queries.hnsw_index_name(col.collection_id)
        assert conn.execute(queries.HNSW_INDEX_VALID, {"name": name}).fetchone() == (True,)


def test_index_builds_held_back_by_a_snapshot_queue_and_hold_few_connections(
        client: ragd.Ragd, settings: Settings, two: tuple[ragd.Collection, ragd.Collection]) -> None:
    """A tenant making many new collections while its snapshot holds every build back: the builds queue, at most
    MAX_INDEX_BUILDS of them holding a connection (one each would fill max_connections), and all are built once
    the snapshot ends."""
    from ragd.store import queries
    from ragd.store.vector_index import MAX_INDEX_BUILDS

    a, b = two
    tag = uuid.uuid4().hex[:6]
    with login(client, a.tenant) as snapshot, ragd.connect(settings=settings) as server_side:
        server_side.background_index_builds = True
        snapshot.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        snapshot.execute("SELECT count(*) FROM chunks")
        made = []
        for i in range(6):
            col = server_side.collection(f"many-{tag}-{i}", tenant=b.tenant)
            col.ingest(documents=[{"id": f"m{i}", "text": f"Many collections, number {i}, of tin."}])
            made.append(col)
        time.sleep(1.0)
        names = [queries.hnsw_index_name(col.collection_id) for col in made]
        with psycopg.connect(client.store.url, autocommit=True) as conn:  # builds of these collections in flight
            building = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                                    "'ragd-maintenance' AND query ILIKE 'CREATE INDEX CONCURRENTLY%%' AND "
                                    "EXISTS (SELECT 1 FROM unnest(%s::text[]) n WHERE query LIKE '%%' || n || '%%')",
                                    (names,)).fetchone()
        assert building == (MAX_INDEX_BUILDS,)
        assert not server_side.wait_for_index_builds(0.5)
        snapshot.execute("COMMIT")
        assert server_side.wait_for_index_builds(120)
    with client.store.admin() as conn:
        for col in made:
            name = queries.hnsw_index_name(col.collection_id)
            assert conn.execute(queries.HNSW_INDEX_VALID, {"name": name}).fetchone() == (True,)


def test_two_processes_building_indexes_at_once_take_turns(
        client: ragd.Ragd, settings: Settings, two: tuple[ragd.Collection, ragd.Collection]) -> None:
    """Every collection's HNSW index is on one table, where two CREATE INDEX CONCURRENTLY can deadlock (each holds
    the table's self-conflicting lock, or waits for it, while the other waits for its transaction): two processes'
    builds held back by a snapshot and released together both end built, taking turns through a row of
    ragd_locks. (The deadlock is timing-dependent: two background builders of one process hit it three times in
    one run of this module, which test_index_builds_held_back... then failed; one builder a process and the turns
    across processes make it impossible.)"""
    import threading

    from ragd.store import queries

    a, b = two
    tag = uuid.uuid4().hex[:6]
    with ragd.connect(settings=settings) as one, ragd.connect(settings=settings) as other:
        cols = [rag.collection(f"turns-{tag}-{n}", tenant=b.tenant) for n, rag in enumerate((one, other))]
        for n, col in enumerate(cols):  # rows without an index: as a collection's first run leaves them
            col.ingest(documents=[{"id": f"t{n}", "text": f"Turn {n} of the builds, on tin."}])
            with client.store.dedicated() as conn:
                conn.execute(queries.drop_hnsw_index(col.collection_id))
        outcome: dict[int, BaseException | bool] = {}

        def build(n: int) -> None:
            try:
                outcome[n] = cols[n].build_vector_index()
            except BaseException as exc:  # (what the build raised is what the test looks at)
                outcome[n] = exc

        with login(client, a.tenant) as snapshot:
            snapshot.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            snapshot.execute("SELECT count(*) FROM chunks")
            threads = [threading.Thread(target=build, args=(n,)) for n in range(2)]
            for t in threads:
                t.start()
            time.sleep(1.5)  # both waiting: one behind the snapshot, the other for its turn
            snapshot.execute("COMMIT")
            for t in threads:
                t.join(120)
        assert outcome == {0: True, 1: True}, outcome
    with client.store.admin() as conn:
        for col in cols:
            name = queries.hnsw_index_name(col.collection_id)
            assert conn.execute(queries.HNSW_INDEX_VALID, {"name": name}).fetchone() == (True,)
