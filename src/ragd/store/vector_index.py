"""Each collection's HNSW index: built once from all its rows when its first ingest run ends (searches scan its
vectors exactly meanwhile), on a connection of its own, one build at a time across processes; in a server, by a
builder thread of the process so that no request waits for one (`IndexBuilds`)."""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid
from collections.abc import Callable
from typing import Any, Protocol

import psycopg

from . import embedded, queries
from .postgres import Store

log = logging.getLogger("ragd.engine")

# index builds a process runs at once in the background (IndexBuilds), on a connection of its own: every collection's
# HNSW index is on chunk_embeddings, where two CREATE INDEX CONCURRENTLY deadlock (each takes the table's
# self-conflicting SHARE UPDATE EXCLUSIVE lock and waits for the other's transaction), so one at a time
MAX_INDEX_BUILDS = 1
HNSW_BUILDS = "hnsw index builds"  # the ragd_locks row every process's build holds (the same deadlock, across them)


class Indexed(Protocol):
    """A collection whose index can be built (engine.Collection is one)."""

    @property
    def collection_id(self) -> uuid.UUID: ...

    def build_vector_index(self) -> bool: ...


def build(store: Store, collection_id: uuid.UUID, embed_model: str, dims: int, vector_type: str,
          ef_construction: int) -> bool:
    """Build a collection's index if it is missing or invalid (a build that was killed), on a connection of its own
    (never one of the pools': CREATE INDEX CONCURRENTLY waits for every transaction older than it, another tenant's
    too, and must hold no slot that requests need meanwhile); True when a valid index is in place. The build runs
    concurrently, so other tenants keep writing; one process builds a collection's index at a time, the others
    leave it to that one (False)."""
    name = queries.hnsw_index_name(collection_id)
    with store.dedicated() as conn:
        if conn.execute(queries.HNSW_INDEX_VALID, {"name": name}).fetchone() == (True,):
            return True
        with store.exclusive(conn, name) as mine:
            if not mine:
                return False  # another process is building it
            with store.serialized(conn, HNSW_BUILDS):
                state = conn.execute(queries.HNSW_INDEX_VALID, {"name": name}).fetchone()
                if state == (True,):
                    return True  # built by another process while this one waited its turn
                if state == (False,):
                    conn.execute(queries.drop_hnsw_index(collection_id))
                index = queries.create_hnsw_index(collection_id, embed_model, dims, vector_type, ef_construction)
                build_hnsw_index(store, conn, index, queries.drop_hnsw_index(collection_id),
                                 lambda: _graph_bytes(conn, collection_id, embed_model, dims, vector_type))
    return True


def _graph_bytes(conn: Any, collection_id: uuid.UUID, embed_model: str, dims: int, vector_type: str) -> int:
    """About the memory pgvector's build of this collection's graph takes (its active vectors counted)."""
    row = conn.execute(queries.INDEXED_ROWS, {"collection_id": collection_id, "embed_model": embed_model}).fetchone()
    return queries.hnsw_graph_bytes(row[0] if row else 0, dims, vector_type)


def build_hnsw_index(store: Store, conn: psycopg.Connection[Any], create: Any, drop: Any,
                     graph_bytes: Callable[[], int]) -> None:
    """Run `create` (an HNSW CREATE INDEX CONCURRENTLY) on conn (autocommit) for a graph of about graph_bytes()
    bytes (counted only where it is used: on the embedded server).
    On the embedded server the build's memory is sized to the graph (pgvector builds several times slower once
    its graph outgrows maintenance_work_mem), and it runs serially where /dev/shm cannot hold the parallel
    build's shared segment, which is as large as that memory (Docker gives containers 64 MB). On any server a
    parallel build that fails for want of shared memory is dropped (it leaves an invalid index) and run again
    serially. The session's settings are restored afterwards (the connection goes back to the pool)."""
    parallel = True
    try:
        if store.embedded:
            memory, parallel = embedded.index_build_memory(
                graph_bytes(), conn.execute(queries.MAINTENANCE_MEMORY).fetchone()[0])  # type: ignore[index]
            conn.execute(queries.SET_MAINTENANCE_MEMORY, {"kb": f"{memory // 1024}kB"})
            if not parallel:
                conn.execute(queries.SERIAL_MAINTENANCE)
        try:
            conn.execute(create)
        except (psycopg.errors.DiskFull, psycopg.errors.OutOfMemory) as exc:
            if not parallel or "shared memory" not in str(exc):
                raise
            log.warning("parallel HNSW build failed for want of shared memory (%s); building it serially",
                         str(exc).strip())
            conn.execute(drop)
            conn.execute(queries.SERIAL_MAINTENANCE)
            conn.execute(create)
    finally:
        if not conn.closed:
            with contextlib.suppress(psycopg.OperationalError):
                conn.execute(queries.RESET_MAINTENANCE)


class IndexBuilds:
    """A process's queue of index builds and the builder threads that run them (at most MAX_INDEX_BUILDS)."""

    def __init__(self) -> None:
        self._builds = threading.Condition()  # guards the four below
        self._pending: dict[uuid.UUID, Indexed] = {}  # queued, first come first built
        self._building: set[uuid.UUID] = set()
        self._builders = 0
        self._indexed: set[uuid.UUID] = set()  # collections whose index this process saw valid

    def queue(self, col: Indexed) -> None:
        """Queue col's build unless this process knows the index valid or has it queued or building. At most
        MAX_INDEX_BUILDS run at once, each on a connection of its own: a tenant making many collections while its
        snapshot holds every build back queues builds, not connections."""
        with self._builds:
            cid = col.collection_id
            if cid in self._indexed or cid in self._pending or cid in self._building:
                return
            self._pending[cid] = col
            if self._builders < MAX_INDEX_BUILDS:
                self._builders += 1
                threading.Thread(target=self._builder, name="ragd-index-builder",
                                 daemon=True).start()  # (a build cut short by the process's exit is redone next time)

    def _builder(self) -> None:
        while True:
            with self._builds:
                if not self._pending:
                    self._builders -= 1
                    self._builds.notify_all()
                    return
                cid, col = next(iter(self._pending.items()))
                del self._pending[cid]
                self._building.add(cid)
            built = False
            try:
                built = col.build_vector_index()
            except Exception as exc:  # of any kind: the rows are stored and searched exactly; the next ingest retries
                log.warning("the HNSW index of collection %s was not built (%s); searches scan its vectors exactly "
                            "until the next ingest builds it", cid, " ".join(str(exc).split()))
            finally:
                with self._builds:
                    self._building.discard(cid)
                    if built:
                        self._indexed.add(cid)
                    self._builds.notify_all()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait for the builds queued or running; True when none is left."""
        with self._builds:
            return self._builds.wait_for(lambda: not self._pending and not self._building, timeout_s)
