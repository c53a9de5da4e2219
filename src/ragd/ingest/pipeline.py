"""A run of ingestion: files pass once through three rooms, walk (walk.py: which paths are files), read (read.py
and worker.py: their documents, in worker processes under time and memory limits) and write (write.py: planned
and stored through the store), with prepare (normalize, chunk, identify) between read and write, one run row and
one outcome per item.

Each document becomes visible all at once: its version, chunks, embeddings and BM25 postings are
written and activated in one transaction, and the previous version is retired in that same one.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg

from ..errors import (
    IngestError,
    InvalidRequest,
    RagdError,
)
from ..ids import doc_id as make_doc_id
from ..ids import sha256_text
from ..store import blocks, queries
from ..types import ExtractedDocument, IngestReport
from . import dedupe, prefetch
from .chunk import chunk_blocks
from .extract import ExtractOptions
from .identity import identify
from .normalize import storable
from .read import too_long
from .state import (
    PART_ITEMS,
    STOP_CODES,
    Collection,
    Duplicates,
    Part,
    Prepared,
    Progress,
    RunState,
    fail_item,
    failure_outcome,
)
from .uploads import process_alive
from .walk import display, expand_paths
from .worker import Extraction, default_workers
from .write import Ahead, commit_isolating, embed_ahead, hold_part, write_items

if TYPE_CHECKING:
    from ..store import Store


PROGRESS_RECORDS = 500  # a file of records (JSONL, CSV, mbox) reports progress every this many documents
# A batch is one transaction: it is committed once it holds BATCH_DOCS documents or BATCH_CHUNKS chunks. Larger
# batches of small documents cost the server less (each batch upserts every term it contains once, and writes one
# BM25 block per term); the chunk bound keeps a batch of long documents, and what a crash can lose, small. 512/1024
# stored SciFact (5,183 abstracts, given vectors) in 11.3-11.4 s against 12.1-12.7 s at 256/512, same run.
BATCH_DOCS = 512
BATCH_CHUNKS = 1024
# A run's first batch is smaller, and each next one twice the one before up to those bounds: the database starts
# writing while the rest is still being prepared, instead of waiting for a whole batch to be chunked and embedded.
FIRST_BATCH_DOCS = 64


def batch_limits() -> Iterator[tuple[int, int]]:
    """The documents and chunks at which each batch of a run is committed, in order."""
    docs = FIRST_BATCH_DOCS
    while True:
        yield docs, BATCH_CHUNKS * docs // BATCH_DOCS
        docs = min(BATCH_DOCS, 2 * docs)


# -- preparation -------------------------------------------------------------------------------------


def content_hash(doc: ExtractedDocument) -> str:
    canonical = [
        [b.type, b.text, b.level, list(b.header), [list(r) for r in b.rows]] for b in doc.blocks
    ]
    return sha256_text(json.dumps(canonical, ensure_ascii=False, separators=(",", ":")))


def prepare(col: Collection, doc: ExtractedDocument, index: int, tags: Sequence[str],
            metadata: dict[str, Any]) -> Prepared:
    error = too_long(doc, col.settings.max_document_chars)  # (documents given in memory, long PDFs read in parts)
    if error is not None:
        raise error
    clean = storable(doc)
    if clean is not doc:
        doc = dataclasses.replace(clean, warnings=(*clean.warnings, "characters PostgreSQL cannot store (NUL, lone "
                                                   "surrogates) were dropped or replaced by U+FFFD"))
    doc_id = make_doc_id(col.collection_id, doc.external_id)
    chunks, warnings = chunk_blocks(doc.blocks, col.policy, col.counter, doc_id=str(doc_id))
    if not chunks:
        raise IngestError(f"{doc.external_id}: nothing to index after extraction")
    identity = identify(doc.blocks, doc.title)
    if not identity.empty:  # whose and which period: the title, and every chunk's retrieval context
        line = identity.line()
        doc = dataclasses.replace(doc, title=line, metadata={**doc.metadata, "identity": identity.as_dict()})
        chunks = [dataclasses.replace(c, context=line) for c in chunks]
    all_tags = tuple(sorted(set(doc.tags) | set(tags)))
    return Prepared(
        item_index=index,
        doc=doc,
        doc_id=doc_id,
        content_hash=content_hash(doc),
        chunks=chunks,
        warnings=[*doc.warnings, *warnings],
        tags=all_tags,
        metadata={**doc.metadata, **metadata},
    )


class _Stages:
    """Committed batches go through two threads: one embeds a batch while the other writes the batch before it,
    so the model, the database and the extraction of the next files work at once. One thread writes, in the
    order things were handed over (items that failed before the store included), so the run's outcomes, ids and
    rows are the same as one step after another; at most two batches wait, so memory stays flat."""

    def __init__(self) -> None:
        self._embedder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragd-embed")
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragd-write")
        self._commits: deque[Future[None]] = deque()
        self._calls: deque[Future[None]] = deque()
        self._error: BaseException | None = None

    def commit(self, embed: Callable[[], Ahead], write: Callable[[Ahead | None], None]) -> None:
        ahead = self._embedder.submit(embed)

        def written() -> None:
            try:
                vectors = ahead.result()
            except Exception as exc:
                if isinstance(exc, RagdError) and exc.code in STOP_CODES:
                    raise
                vectors = None  # the commit embeds for itself, and a bad document fails alone there
            write(vectors)

        self._commits.append(self._writer.submit(self._unless_failed, written))
        while len(self._commits) > 2:
            self._commits.popleft().result()
        self._check()

    def call(self, fn: Callable[[], None]) -> None:
        """Run fn on the writing thread, after everything handed over before it."""
        self._calls.append(self._writer.submit(self._unless_failed, fn))
        self._check()

    def _unless_failed(self, fn: Callable[[], Any]) -> Any:
        if self._error is not None:
            raise self._error
        try:
            return fn()
        except BaseException as exc:
            self._error = exc
            raise

    def _check(self) -> None:
        while self._calls and self._calls[0].done():
            self._calls.popleft().result()
        if self._error is not None:
            raise self._error

    def drain(self) -> None:
        """Wait for everything handed over; raise what failed."""
        for pending in (self._commits, self._calls):
            while pending:
                pending.popleft().result()
        self._check()

    def close(self) -> None:
        """Stop taking work; a batch being written finishes (its transaction commits or rolls back whole)."""
        self._embedder.shutdown(wait=True, cancel_futures=True)
        self._writer.shutdown(wait=True, cancel_futures=True)


def run_ingest(
    col: Collection,
    paths: Sequence[str | os.PathLike[str]] | None = None,
    *,
    documents: Iterable[ExtractedDocument] = (),
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
    options: ExtractOptions = ExtractOptions(),
    duplicates: Duplicates = "skip",
    near_duplicates: float | None = None,
    on_progress: Progress | None = None,
    uploads: Sequence[tuple[str, Path] | tuple[str, Path, str]] = (),
    workers: int | None = None,
    part: Part | None = None,
    labels: Mapping[str, tuple[Sequence[str], Mapping[str, Any]]] | None = None,
    refused: Sequence[IngestError] = (),
    kind: str = "ingest",
) -> IngestReport:
    """`uploads` are (name, file) pairs: each file is extracted like a path, but its documents are named by
    `name` (external id) and `upload:name` (source, or a third element: the source URI), not by where the file
    was spooled. With `part`, the items
    join that queued run (see Part) and the run's row is left to the job layer. `labels` (reindex): the tags and
    metadata each external id had, kept beside what extraction gives now (whose metadata keys win); `refused`
    are items recorded as they are (skipped or failed) before the sources."""
    started = time.monotonic()
    threshold = near_threshold(col, near_duplicates)
    state = RunState(run_id=part.run_id if part else uuid.uuid4(), near_threshold=threshold,
                      next_index=part.base if part else 0, shared=part is not None, part=part)
    if part is None:
        config = {"paths": [str(p) for p in paths or ()], "tags": list(tags), "duplicates": duplicates,
                  "near_duplicate_threshold": threshold, "host": socket.gethostname(),
                  "embed_model": col.embed_model, "chunk_policy": col.policy.as_dict(), "pid": os.getpid(),
                  **({"kind": kind} if kind != "ingest" else {})}
        with col.store.tenant(col.tenant) as conn:
            _close_interrupted_runs(conn, col)
            conn.execute(queries.INSERT_RUN, {"run_id": state.run_id, "tenant_id": col.tenant,
                                              "collection_id": col.collection_id, "config": json.dumps(config)})
    stage = "extract"
    extraction = Extraction(col.settings, options, workers or col.settings.ingest_workers or default_workers())
    stages = _Stages()
    try:
        sources: list[Path | IngestError] = [*refused, *expand_paths(paths or (),
                                                                     follow_symlinks=options.follow_symlinks)]
        named = {u[1].resolve(): (u[0], u[2] if len(u) == 3 else f"upload:{u[0]}") for u in uploads}
        sources += [u[1] for u in uploads]
        extra = documents if isinstance(documents, Sequence) else list(documents)  # (read as the run reaches them)
        total = len(sources) + len(extra)
        # (a file of many records counts as one item: a low estimate)
        state.read_ahead = prefetch.Prefetch.start(col, total, threshold)
        batch: list[Prepared] = []
        batch_chunks = 0
        limits = batch_limits()
        max_docs, max_chunks = next(limits)

        def commit(full: list[Prepared]) -> None:
            stages.commit(lambda: embed_ahead(col, full, state),
                          lambda ahead: commit_isolating(col, state, full, duplicates, started, ahead))
            # compacted as it goes, not once at the end: a long run writes a partial block per term per batch,
            # which every search reads until compaction merges them (a term of a 980k-document load had thousands)
            # and which, merged all at once at the end, left two thirds of the blocks' table free space
            stages.call(lambda: _compact_if_due(col, state))

        def add(doc: ExtractedDocument | Exception, uri: str, seconds: float = 0.0,
                original: tuple[Path, str] | None = None) -> None:
            """One item: `seconds` its share of its file's extraction, `original` the file and its name."""
            nonlocal batch, batch_chunks, max_docs, max_chunks
            index = state.take_index()
            if part is not None and (index in part.done or index >= part.base + PART_ITEMS):
                return  # stored by a killed attempt of this job (or past what one file of a queued run may hold)
            begun = time.perf_counter()
            if isinstance(doc, Exception):
                failure = dataclasses.replace(failure_outcome(uri, doc), extract_seconds=seconds)
                stages.call(lambda: fail_item(state, index, failure))
                return
            try:
                kept_tags, kept_meta = (labels or {}).get(doc.external_id, ((), {}))
                batch.append(prepare(col, doc, index, (*tags, *kept_tags),
                                     {**{k: v for k, v in kept_meta.items() if k not in doc.metadata},
                                      **(metadata or {})}))
                batch[-1].extract_seconds = seconds + time.perf_counter() - begun
                batch[-1].original = original
                batch_chunks += len(batch[-1].chunks)
            except Exception as exc:  # of any kind: this item fails, the run goes on
                failure = dataclasses.replace(failure_outcome(doc.source_uri, exc),
                                              extract_seconds=seconds + time.perf_counter() - begun)
                stages.call(lambda: fail_item(state, index, failure))
            if len(batch) >= max_docs or batch_chunks >= max_chunks:
                commit(batch)
                batch, batch_chunks = [], 0
                max_docs, max_chunks = next(limits)

        for done, (src, extracted, seconds) in enumerate(extraction.each(sources), start=1):
            if isinstance(src, IngestError):
                add(src, str(src).split(":")[0])
            else:
                name = named.get(src.resolve())
                for count, doc in enumerate(extracted, start=1):
                    if name is not None:
                        doc = _renamed(doc, src.resolve(), *name)
                    # a failure names the path as walked, not a link's target
                    add(doc, name[1] if name is not None else src.absolute().as_uri(), seconds / len(extracted),
                        (src.resolve(), name[0] if name is not None else display(src.resolve())))
                    if on_progress and count % PROGRESS_RECORDS == 0:  # a file of many records shows it moves
                        on_progress(done - 1, total, f"{display(Path(src.name))}: {count} records")
            if on_progress:
                on_progress(done, total, display(Path(src.name)) if isinstance(src, Path) else "")
        for done, doc in enumerate(extra, start=len(sources) + 1):
            add(doc, doc.source_uri)
            if on_progress:
                on_progress(done, total, doc.external_id)
        stage = "store"
        if batch:
            commit(batch)
        stages.drain()
        if state.pending:
            _flush_pending(col, state, started)
        _vector_index(col, state)
    except BaseException as exc:
        stages.close()  # nothing writes while the run is closed as failed
        if part is not None:
            raise  # the job layer retries it or fails the file; the run goes on
        if isinstance(exc, Exception) and getattr(exc, "code", None) != "database_unavailable":
            _vector_index(col, state)  # what was committed gets its index (not on Ctrl-C: the next run builds it)
        _finish(col, state, "failed", stage, f"{type(exc).__name__}: {exc}", started)
        raise
    finally:
        stages.close()
        extraction.close()
        state.read_ahead.close()
    outcomes = state.outcomes
    failed = sum(1 for o in outcomes if o.status == "failed")
    status = "failed" if outcomes and failed == len(outcomes) else "succeeded"
    if part is None:
        _finish(col, state, status, "done", None if status == "succeeded" else "every item failed", started)
    return IngestReport(run_id=state.run_id, status=status, items=tuple(outcomes), seconds=time.monotonic() - started,
                        embedded=state.embedded, cache_hits=state.cache_hits)


def near_threshold(col: Collection, given: float | None) -> float:
    """The whole-document similarity at which a new document is a near-duplicate (given, else configured)."""
    threshold = col.settings.near_duplicate_threshold if given is None else given
    if not dedupe.RECORDED <= threshold <= 1.0:
        raise InvalidRequest(f"near-duplicate threshold {threshold} is out of range: use {dedupe.RECORDED} to 1.0 "
                             "(1.0 disables)")
    return threshold


def _vector_index(col: Collection, state: RunState) -> None:
    """A new collection's HNSW index, built once its first run has written its rows (see ensure_vector_index);
    if that fails the data stays committed and searchable by exact scan, and the next run builds it."""
    try:
        col.ensure_vector_index()
    except Exception as exc:  # of any kind: the documents are stored; only the index is missing
        state.warnings.append(storable(f"vector index not built ({str(exc).strip()}): searches scan this "
                                       "collection's vectors exactly until the next ingest builds it"))


def _compact_if_due(col: Collection, state: RunState) -> None:
    """The collection's BM25 blocks compacted once ingest has written `compact_after_blocks` since the last
    compaction (a partial block per term per batch adds up), checked after each batch is committed (the last
    one's check is the run's); if that fails, searches are exact without it."""
    if not col.settings.compact_after_blocks:
        return
    try:
        with col.store.tenant(col.tenant) as conn:
            row = conn.execute(queries.BLOCKS_WRITTEN, {"collection_id": col.collection_id}).fetchone()
        if row is not None and row[0] >= col.settings.compact_after_blocks:
            blocks.compact(lambda: col.store.tenant(col.tenant), col.collection_id)
    except Exception as exc:  # of any kind: the documents are stored and searched exactly either way
        warning = storable(f"BM25 blocks not compacted ({str(exc).strip()}): searches are exact without it; the "
                           "next run or `ragd compact` compacts them")
        if warning not in state.warnings:  # (tried after every batch: said once)
            state.warnings.append(warning)


def _renamed(doc: ExtractedDocument | Exception, path: Path, name: str,
             source_uri: str) -> ExtractedDocument | Exception:
    """A spooled file's document named after the upload or the path it was read from (parts of a container keep
    their suffix)."""
    if isinstance(doc, Exception):
        return doc
    spooled, uri = display(path), path.as_uri()
    external = name + doc.external_id[len(spooled):] if doc.external_id.startswith(spooled) else doc.external_id
    source = source_uri + doc.source_uri[len(uri):] if doc.source_uri.startswith(uri) else doc.source_uri
    return dataclasses.replace(doc, external_id=external, source_uri=source)


def _close_interrupted_runs(conn: psycopg.Connection[Any], col: Collection) -> None:
    """A run whose process died (killed, crashed, power loss) stays 'running' forever; runs started on this
    host by a process that no longer exists are closed as failed. Their committed documents are complete
    (each batch commits atomically); re-running the same input finishes the rest."""
    for row in conn.execute(queries.RUNNING_RUNS, {"collection_id": col.collection_id}).fetchall():
        _interrupt_if_dead(conn, *row)


def close_interrupted_runs(store: Store) -> int:
    """The same for every collection of every tenant (a server starting): how many runs were closed."""
    with store.admin() as conn:
        return sum(_interrupt_if_dead(conn, *row) for row in conn.execute(queries.ALL_RUNNING_RUNS).fetchall())


def _interrupt_if_dead(conn: psycopg.Connection[Any], run_id: uuid.UUID, tenant: str, host: str | None,
                       pid: str | None) -> bool:
    if host != socket.gethostname() or not (pid or "").isdigit() or process_alive(int(pid or 0)):
        return False
    conn.execute(queries.INTERRUPT_RUN, {"run_id": run_id, "tenant_id": tenant,
                                         "error": f"interrupted: process {pid} on {host} ended mid-run"})
    return True


def _flush_pending(col: Collection, state: RunState, started: float) -> None:
    with col.store.tenant(col.tenant) as conn:
        hold_part(conn, state)
        write_items(conn, col.tenant, state.run_id, state.pending)
    state.pending = []


def _finish(col: Collection, state: RunState, status: str, stage: str, error: str | None, started: float) -> None:
    try:
        if state.pending:
            _flush_pending(col, state, started)
        with col.store.tenant(col.tenant) as conn:
            conn.execute(queries.FINISH_RUN, {"run_id": state.run_id, "status": status, "stage": stage,
                                              "stats": json.dumps(state.stats(started)), "error": error})
    except RagdError:
        if status == "succeeded":
            raise
