"""The real embedded PostgreSQL, started once per test session in a temporary RAGD_HOME.

Set RAGD_TEST_DSN to run the suite against another PostgreSQL server with pgvector instead.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psycopg
import pytest

import ragd
from ragd.config import Settings
from ragd.store import embedded

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "samples"
DATA = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def ragd_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("ragd-home")
    yield home
    embedded.stop(home / "pgdata")


@pytest.fixture(scope="session")
def base_url(ragd_home: Path) -> str:
    return os.environ.get("RAGD_TEST_DSN") or embedded.start(ragd_home / "pgdata")


@pytest.fixture(scope="session")
def settings(ragd_home: Path, base_url: str) -> Settings:
    return Settings(home=ragd_home, database_url=base_url, embedder="hash")


@pytest.fixture(scope="session")
def client(settings: Settings) -> Iterator[ragd.Ragd]:
    rag = ragd.connect(settings=settings)
    yield rag
    rag.close()


@pytest.fixture
def name() -> str:
    """A collection name of its own for each test."""
    return "t" + uuid.uuid4().hex[:12]


@pytest.fixture
def fresh_database(base_url: str) -> Iterator[str]:
    """An empty database on the same server, dropped afterwards."""
    db = "ragd_" + uuid.uuid4().hex[:10]
    with psycopg.connect(base_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{db}"')
    url = psycopg.conninfo.make_conninfo(base_url, dbname=db)
    yield url
    with psycopg.connect(base_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


def run_cli(args: list[str], env_extra: dict[str, str], cwd: Path | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGD_")}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-m", "ragd.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd or REPO, timeout=timeout)


@pytest.fixture
def cli_env(ragd_home: Path, base_url: str) -> dict[str, str]:
    env = {"RAGD_HOME": str(ragd_home), "RAGD_EMBEDDER": "hash"}
    if os.environ.get("RAGD_TEST_DSN"):
        env["RAGD_DATABASE_URL"] = base_url
    return env


def pdf_bytes(objects: list[bytes]) -> bytes:
    """A PDF of the given objects (object 1 the catalogue), with a correct cross-reference table."""
    out, offsets = b"%PDF-1.4\n", []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    return out + b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(env_extra: dict[str, str], *args: str, port: int | None = None) -> Iterator[dict[str, str]]:
    """{"url": ...} while the server runs (on `port`, else a free one); "stderr" is added once it has stopped."""
    port = port or free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGD_")} | env_extra
    # output to a file, not a pipe: a server that logs more than a pipe holds would block on a full pipe
    log = tempfile.NamedTemporaryFile(mode="w+", prefix="ragd-serve-", suffix=".log")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen([sys.executable, "-m", "ragd.cli", "serve", "--port", str(port), *args], env=env,
                            cwd=REPO, stdout=log, stderr=log, text=True)
    url = f"http://127.0.0.1:{port}"
    state = {"url": url, "pid": str(proc.pid), "log": log.name}  # "log": what it has written so far
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                log.seek(0)
                raise AssertionError(log.read())
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        yield state
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.seek(0)
        state["stderr"] = log.read()
        log.close()
