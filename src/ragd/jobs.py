"""Ingestion as jobs on a PostgreSQL queue (procrastinate), so any number of worker processes on any machine
pointed at the same database share the work, and an upload returns at once.

A queued run is a run row, one row per file in `ingestion_files` (its bytes with it, so a worker anywhere reads
them) and one procrastinate job per file, all written in one transaction. A worker stores a file's documents
through the library (`Collection.ingest(part=...)`): each batch's versions and its items commit together, so a job
killed at any point and run again by another worker (procrastinate's heartbeats find it) skips what the killed
attempt stored and the document ends stored once, the run's counts exact. The last file to finish closes the run.

Fair order: a job's priority is minus the number of files its tenant had open before it, so the queue serves
tenants in turn (a small upload is not queued behind another tenant's huge one) and each tenant first come, first
served. Backpressure: a tenant may have at most RAGD_QUEUE_MAX_FILES files open at once (QueueFull beyond).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from procrastinate import App, BaseRetryStrategy, JobContext, PsycopgConnector, RetryDecision
from procrastinate.jobs import Job
from procrastinate.sql import queries as procrastinate_queries

from .engine import Collection, Ragd
from .errors import (
    Busy,
    DatabaseUnavailable,
    InvalidRequest,
    OriginalsUnavailable,
    ProviderError,
    QueueFull,
    RagdError,
    RunNotFound,
    Superseded,
)
from .ingest.extract import ExtractOptions
from .ingest.pipeline import near_threshold
from .ingest.state import PART_ITEMS, Duplicates, Part, failure_outcome
from .ingest.uploads import spool_folder
from .ingest.walk import expand_paths, read_source
from .ingest.write import write_items
from .store import queries

log = logging.getLogger("ragd.jobs")
QUEUE = "ragd_ingest"
TASK = "ragd.ingest_file"
# failures worth another try later: the database or a model provider away for a while, a tenant's own sessions busy
TRANSIENT = (DatabaseUnavailable, Busy, ProviderError, OriginalsUnavailable, psycopg.OperationalError)


@dataclass(frozen=True)
class Queued:
    run_id: uuid.UUID
    files: int
    failed: int  # paths refused before queueing (unreadable, too large): items of the run already

    def as_dict(self) -> dict[str, Any]:
        return {"run_id": str(self.run_id), "status": "queued", "files": self.files, "failed": self.failed}


# -- queueing -----------------------------------------------------------------------------------------------


def enqueue(col: Collection, paths: Sequence[str | os.PathLike[str]] = (), *,
            uploads: Sequence[tuple[str, str | os.PathLike[str]]] = (), tags: Sequence[str] = (),
            metadata: Mapping[str, Any] | None = None, duplicates: Duplicates = "skip",
            near_duplicates: float | None = None, options: ExtractOptions | None = None) -> Queued:
    """Queue files (paths walked like `ingest`'s, and uploaded (name, file) pairs) as one run of one job per file;
    returns at once. QueueFull when the tenant's open files would pass RAGD_QUEUE_MAX_FILES."""
    options = options or ExtractOptions()
    threshold = near_threshold(col, near_duplicates)
    run_id = uuid.uuid4()
    files: list[tuple[str | None, Path]] = []  # (an upload's name, or None: a path named as `ingest` names it)
    refused: list[tuple[str, RagdError]] = []
    for found in expand_paths(list(paths), follow_symlinks=options.follow_symlinks):
        if isinstance(found, RagdError):
            refused.append((str(found).split(":")[0], found))
        else:
            files.append((None, found))
    files += [(name, Path(path)) for name, path in uploads]
    limit = col.settings.queue_max_files
    if len(files) > limit:
        raise InvalidRequest(f"{len(files)} files are more than a tenant may queue at once "
                             f"(RAGD_QUEUE_MAX_FILES={limit}); queue them in parts or raise the limit")
    config = {"queued": True, "paths": [str(p) for p in paths], "tags": list(tags),
              "metadata": dict(metadata or {}), "duplicates": duplicates, "near_duplicate_threshold": threshold,
              "options": {"follow_symlinks": options.follow_symlinks}, "embed_model": col.embed_model,
              "chunk_policy": col.policy.as_dict(), "files": len(files)}
    with col.store.admin(col.tenant) as conn:  # (a bulkhead: this tenant's waits stall no other tenant)
        conn.execute(queries.QUEUE_LOCK, {"tenant_id": col.tenant})  # one enqueue of a tenant at a time
        open_files = conn.execute(queries.OPEN_FILES, {"tenant_id": col.tenant}).fetchone()[0]  # type: ignore[index]
        if open_files + len(files) > limit:
            raise QueueFull(f"tenant {col.tenant!r} has {open_files} files queued or being ingested; "
                            f"{len(files)} more would pass RAGD_QUEUE_MAX_FILES={limit}. Retry later",
                            retry_after_s=_retry_after(conn, col.tenant, open_files + len(files) - limit))
        conn.execute(queries.INSERT_QUEUED_RUN, {"run_id": run_id, "tenant_id": col.tenant,
                                                 "collection_id": col.collection_id, "config": json.dumps(config)})
        # failed items as `ragd ingest` records them: a path refused while walking, a file that cannot be read
        failures = [(n * PART_ITEMS, failure_outcome(where, error))
                    for n, (where, error) in enumerate(refused, start=len(files))]
        queued = []
        for ordinal, (name, path) in enumerate(files):
            upload = f"upload:{name}" if name is not None else None
            try:
                source = read_source(path, col.settings.max_file_bytes)
            except RagdError as exc:
                failures.append((ordinal * PART_ITEMS, failure_outcome(upload or path.absolute().as_uri(), exc)))
                continue
            conn.execute(queries.INSERT_QUEUED_FILE, {
                "run_id": run_id, "ordinal": ordinal, "tenant_id": col.tenant, "content": source.data,
                "name": source.external_id if name is None else name, "source_uri": upload or source.source_uri})
            queued.append(ordinal)
        write_items(conn, col.tenant, run_id, sorted(failures, key=lambda f: f[0]))
        jobs = [(QUEUE, TASK, -(open_files + n), None, None,
                 psycopg.types.json.Jsonb({"run_id": str(run_id), "ordinal": o}), None) for n, o in enumerate(queued)]
        if jobs:
            ids = [row[0] for row in conn.execute(procrastinate_queries["defer_jobs"], {"jobs": jobs})]
            conn.execute(queries.SET_FILE_JOBS, {"run_id": run_id, "ordinals": queued, "job_ids": ids})
        else:
            _close_run(conn, run_id)
    log.info("queued run %s: %d files (%d refused)", run_id, len(queued), len(failures))
    return Queued(run_id=run_id, files=len(queued), failed=len(failures))


def _retry_after(conn: psycopg.Connection[Any], tenant: str, over: int) -> int:
    """Seconds until about `over` of the tenant's open files are done, at the rate its files finished lately."""
    rate = conn.execute(queries.RECENT_FILE_RATE, {"tenant_id": tenant}).fetchone()[0]  # type: ignore[index]
    return max(1, min(300, round(over / rate))) if rate else 10


def cancel(rag: Ragd, run_id: str, *, tenant: str | None = None) -> dict[str, Any]:
    """Cancel a run: its queued files are dropped (their jobs deleted); files being stored finish, and every item
    stored stays. A run that already ended is left as it is."""
    run = rag.run(run_id, tenant=tenant)  # the tenant's own run, or RunNotFound
    with rag.store.admin(rag._tenant(tenant)) as conn:
        row = conn.execute(queries.LOCK_RUN, {"run_id": run["run_id"]}).fetchone()
        if row is None or row[0] not in ("queued", "running"):
            return {"run_id": str(run["run_id"]), "status": row[0] if row else run["status"], "dropped": 0}
        dropped = conn.execute(queries.CANCEL_FILES, {"run_id": run["run_id"]}).fetchall()
        for (job_id,) in dropped:
            if job_id is not None:
                conn.execute(procrastinate_queries["cancel_job"], {"job_id": job_id, "abort": False,
                                                                    "delete_job": True})
        conn.execute(queries.CANCEL_RUN, {"run_id": run["run_id"],
                                          "error": f"cancelled: {len(dropped)} queued files dropped"})
        _close_run(conn, run["run_id"])
    return {"run_id": str(run["run_id"]), "status": "cancelled", "dropped": len(dropped)}


# -- the worker's side --------------------------------------------------------------------------------------


class _Retry(BaseRetryStrategy):
    """Transient failures are tried again after a wait doubling each time; nothing else is."""

    def __init__(self, attempts: int, wait_s: float):
        self.attempts, self.wait_s = attempts, wait_s

    def get_retry_decision(self, *, exception: BaseException, job: Job) -> RetryDecision | None:
        if not isinstance(exception, TRANSIENT) or job.attempts + 1 >= self.attempts:
            return None
        return RetryDecision(retry_in={"seconds": self.wait_s * 2 ** job.attempts})


class Jobs:
    """One process's side of the queue: its procrastinate app and the collections its jobs write into."""

    def __init__(self, rag: Ragd):
        self.rag = rag
        s = rag.settings
        self.app = App(connector=PsycopgConnector(conninfo=rag.store.url, min_size=1, max_size=4,
                                                  kwargs={"application_name": "ragd-worker"}))
        self.app.task(name=TASK, queue=QUEUE, pass_context=True,
                      retry=_Retry(s.job_attempts, s.job_retry_wait_s))(self._ingest_file)
        self._collections: dict[tuple[str, str], Collection] = {}
        self._lock = threading.Lock()
        self.jobs_done = 0
        for name in ["procrastinate", *sorted(logging.root.manager.loggerDict)]:  # (a logger's filters are its own)
            if name.startswith("procrastinate"):
                quiet = logging.getLogger(name)
                if not any(isinstance(f, _OneLine) for f in quiet.filters):
                    quiet.addFilter(_OneLine())

    def _collection(self, tenant: str, name: str) -> Collection:
        with self._lock:
            col = self._collections.get((tenant, name))
            if col is None:
                col = self._collections[(tenant, name)] = self.rag.collection(name, tenant=tenant, create=False)
            return col

    def _ingest_file(self, context: JobContext, run_id: str, ordinal: int) -> str:
        attempt = context.job.attempts + 1
        with self.rag.store.admin() as conn:
            _bounded(conn, self.rag)
            row = conn.execute(queries.START_FILE, {"run_id": run_id, "ordinal": ordinal,
                                                    "worker": f"{socket.gethostname()}:{os.getpid()}"}).fetchone()
        if row is None:  # cancelled, or done by an attempt killed before procrastinate heard of it
            with self.rag.store.admin() as conn:
                _close_run(conn, uuid.UUID(run_id))
            return "nothing to do"
        tenant, collection, name, source_uri, content, config, claimed = row
        base = ordinal * PART_ITEMS
        fence = {"run_id": run_id, "ordinal": ordinal, "attempt": claimed}
        try:
            with self.rag.store.admin() as conn:
                done = frozenset(r[0] for r in conn.execute(queries.PART_ITEMS_DONE, {
                    "run_id": run_id, "low": base, "high": base + PART_ITEMS}))
            col = self._collection(tenant, collection)
            with spool_folder(self.rag.settings.home) as folder:
                path = Path(folder) / (os.path.basename(name.replace("\\", "/")) or "file")
                path.write_bytes(content)
                del content
                report = col.ingest(uploads=[(name, path, source_uri)], tags=config["tags"],
                                    metadata=config["metadata"], duplicates=config["duplicates"],
                                    near_duplicates=config["near_duplicate_threshold"],
                                    options=ExtractOptions(**config.get("options", {})), workers=1,
                                    part=Part(uuid.UUID(run_id), base, done, claimed))
            result = f"{len(report.items)} items"
        except Superseded as exc:  # the job was handed to another worker meanwhile: that attempt stores the file
            log.warning("run %s file %d (%s): %s; this attempt stops", run_id, ordinal, name, exc)
            return "superseded"
        except Exception as exc:  # of any kind: tried again if it may pass, else this file's failed item
            if isinstance(exc, TRANSIENT) and attempt < self.rag.settings.job_attempts:
                log.warning("run %s file %d (%s): attempt %d failed, retried later: %s", run_id, ordinal, name,
                            attempt, exc)
                raise
            code = exc.code if isinstance(exc, RagdError) else "unexpected_error"
            failure = RagdError(f"{name}: {str(exc).strip() or type(exc).__name__} (after {attempt} attempts)")
            failure.code = code
            with self.rag.store.admin() as conn:
                _bounded(conn, self.rag)
                if conn.execute(queries.OWN_FILE, fence).fetchone() != (True,):
                    log.warning("run %s file %d (%s): attempt %d failed (%s) after a newer attempt took the file; "
                                "that attempt stores it", run_id, ordinal, name, claimed, _line(exc))
                    return "superseded"
                taken = {r[0] for r in conn.execute(queries.PART_ITEMS_DONE, {
                    "run_id": run_id, "low": base, "high": base + PART_ITEMS})}
                index = next(i for i in range(base, base + PART_ITEMS) if i not in taken)
                write_items(conn, tenant, uuid.UUID(run_id), [(index, failure_outcome(source_uri, failure))])
            result = f"failed: {code}"
        with self.rag.store.admin() as conn:
            _bounded(conn, self.rag)
            conn.execute(queries.LOCK_RUN, {"run_id": run_id})
            conn.execute(queries.FINISH_FILE, fence)  # (an attempt superseded after its last batch finishes nothing)
            _close_run(conn, uuid.UUID(run_id))
        self.jobs_done += 1
        return result

    # -- running ------------------------------------------------------------------------------------

    async def run(self, *, concurrency: int = 1, stop: asyncio.Event | None = None, signals: bool = True,
                  until_empty: bool = False) -> None:
        """Run jobs until stopped (a signal, `stop` set) or, with `until_empty`, until the queue is empty. A lost
        database stops nothing: the worker says so in one line and starts again, waiting longer each time (its
        jobs meanwhile are retried by the others, or by itself once it is back)."""
        stop = stop or asyncio.Event()
        delay = 1.0
        # a new collection's index is built beside the jobs, not inside one: its build waits for every older
        # transaction, another tenant's too, and the worker serves every tenant's files meanwhile
        with self.rag.indexes_in_background():
            while not stop.is_set():
                try:
                    await self._run_once(concurrency, stop, signals, until_empty)
                    if until_empty:  # drained: the builds it started end before it says so
                        await asyncio.to_thread(self.rag.wait_for_index_builds)
                    return
                except Exception as exc:  # of any kind: the queue's database away, its connection lost
                    if until_empty:
                        raise DatabaseUnavailable(f"the ingestion worker lost the database: {_line(exc)}") from exc
                    log.warning("the ingestion worker lost the database (%s); starting again in %.0f s",
                                _line(exc), delay)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), delay)
                    delay = min(delay * 2, 30.0)

    async def _run_once(self, concurrency: int, stop: asyncio.Event, signals: bool, until_empty: bool) -> None:
        async with self.app.open_async():
            if not until_empty:
                await self._work(concurrency, stop, signals, until_empty)
                return
            # drained only when no job is left in `doing` either: a killed worker's job is queued again once its
            # heartbeats have stopped for RAGD_WORKER_STALLED_S, and a live worker's is waited for
            while not stop.is_set():
                await self._reclaim_once()
                await self._work(concurrency, stop, signals, until_empty)
                doing = await self.app.job_manager.list_jobs_async(queue=QUEUE, status="doing")
                if not list(doing):
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), min(self.rag.settings.worker_heartbeat_s, 1.0))

    async def _work(self, concurrency: int, stop: asyncio.Event, signals: bool, until_empty: bool) -> None:
        """procrastinate's worker until `stop` (or, with `until_empty`, until no job is left to take)."""
        s = self.rag.settings
        reclaim = asyncio.create_task(self._reclaim_stalled())
        worker = asyncio.create_task(self.app.run_worker_async(
            queues=[QUEUE], concurrency=concurrency, wait=not until_empty, install_signal_handlers=signals,
            update_heartbeat_interval=s.worker_heartbeat_s, stalled_worker_timeout=s.worker_stalled_s,
            delete_jobs="successful", name=f"ragd-{socket.gethostname()}-{os.getpid()}",
            listen_notify=False, fetch_job_polling_interval=s.worker_poll_s,
            abort_job_polling_interval=max(s.worker_poll_s, 5.0)))
        stopped = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait([worker, stopped], return_when=asyncio.FIRST_COMPLETED)
        finally:
            reclaim.cancel()
            stopped.cancel()
            if not worker.done():
                worker.cancel()  # procrastinate stops taking jobs; those running finish
            with contextlib.suppress(asyncio.CancelledError):
                await worker

    async def _reclaim_stalled(self) -> None:
        """Give the jobs of workers that stopped sending heartbeats (killed, their machine lost) to the queue
        again. Every worker does it; a job two of them found is queued once (the second finds it moved on)."""
        while True:
            await asyncio.sleep(self.rag.settings.worker_heartbeat_s)
            await self._reclaim_once()

    async def _reclaim_once(self) -> None:
        s = self.rag.settings
        manager = self.app.job_manager
        try:
            for job in await manager.get_stalled_jobs(queue=QUEUE, seconds_since_heartbeat=s.worker_stalled_s):
                with contextlib.suppress(Exception):  # taken again by another worker meanwhile
                    await manager.retry_job(job)
                    log.warning("job %s of a worker that stopped answering is queued again", job.id)
            await manager.prune_stalled_workers(s.worker_stalled_s)
        except Exception as exc:  # of any kind: the database away for a while; tried again next time
            log.warning("could not look for stalled jobs: %s", exc)


def _bounded(conn: psycopg.Connection[Any], rag: Ragd) -> None:
    """This transaction waits for a row lock at most RAGD_DB_LOCK_TIMEOUT_S. A tenant's own SQL session may hold
    its run's or its file's row (FOR UPDATE of its run, ragd_hold_file); a worker serves every tenant, so it must
    not wait on one for long: the lock timeout is a transient failure, and the job is tried again later."""
    conn.execute("SELECT set_config('lock_timeout', %s, true)", (f"{rag.settings.db_lock_timeout_s:g}s",))


def _line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300] or type(exc).__name__


class _OneLine(logging.Filter):
    """procrastinate's own log records as one line each: the exception's message, never its traceback (a lost
    database is reported, not dumped)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            record.msg = f"{record.getMessage()}: {_line(record.exc_info[1])}"
            record.args = None
            record.exc_info, record.exc_text = None, None
        return True


def _close_run(conn: psycopg.Connection[Any], run_id: uuid.UUID) -> None:
    """Record the run's stats from its items, and close it when no file is left open (a cancelled run stays
    cancelled; the caller holds the run's row lock, so two last files cannot both miss each other)."""
    conn.execute(queries.CLOSE_QUEUED_RUN, {"run_id": run_id})


def wait_for(rag: Ragd, run_id: str, *, tenant: str | None = None, timeout_s: float = 3600,
             every: Callable[[dict[str, Any]], None] | None = None, interval_s: float = 0.5) -> dict[str, Any]:
    """Poll a run until it ends (or timeout_s passes); `every` sees each poll's run."""
    deadline = time.monotonic() + timeout_s
    while True:
        run = rag.run(run_id, tenant=tenant)
        if every is not None:
            every(run)
        if run["status"] not in ("queued", "running") or time.monotonic() > deadline:
            return run
        time.sleep(interval_s)


__all__ = [
    "Jobs",
    "QueueFull",
    "Queued",
    "RunNotFound",
    "cancel",
    "enqueue",
    "wait_for",
]
