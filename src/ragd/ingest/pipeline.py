"""extract -> normalize -> chunk -> dedupe -> embed -> store, with a run row and one outcome per item.

Each document becomes visible all at once: its version, chunks, embeddings and BM25 postings are
written and activated in one transaction, and the previous version is retired in that same one.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import os
import socket
import stat
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np
import psycopg

from ..config import Settings
from ..errors import (
    CorruptDocument,
    EmptyDocument,
    FileTooLarge,
    IngestError,
    InvalidRequest,
    NotARegularFile,
    RagdError,
    Skipped,
    Superseded,
    SymlinkDangling,
    SymlinkLoop,
    SymlinkOutside,
    SymlinkWalked,
)
from ..ids import chunk_id as make_chunk_id
from ..ids import doc_id as make_doc_id
from ..ids import doc_version_id as make_version_id
from ..ids import sha256_text
from ..store import blocks, queries
from ..store.originals import media_type
from ..store.originals import originals_for as original_files
from ..types import Chunk, ExtractedDocument, IngestReport, ItemOutcome, ItemStatus
from . import bounds, dedupe, prefetch
from .bounds import Limits
from .chunk import chunk_blocks
from .detect import detect
from .extract import EXTRACTORS, ExtractOptions, Source, pdf
from .identity import identify
from .normalize import storable
from .uploads import process_alive
from .worker import POOL, PdfSplit, Worker

if TYPE_CHECKING:
    from ..embed.base import Embedder, TokenCounter
    from ..store import Store
    from ..types import ChunkPolicy

Progress = Callable[[int, int, str], None]
PROGRESS_RECORDS = 500  # a file of records (JSONL, CSV, mbox) reports progress every this many documents
Duplicates = Literal["skip", "keep"]
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


# failures that are not a document's fault: they stop the run instead of failing its items one by one
STOP_CODES = frozenset({"provider_unavailable", "model_not_available", "dimension_mismatch", "database_unavailable",
                        "originals_unavailable", "superseded"})


class Collection(Protocol):
    """What the pipeline needs of the collection it writes into (engine.Collection is one); the pipeline imports
    nothing above it."""

    tenant: str
    name: str
    collection_id: uuid.UUID
    embed_model: str
    dims: int
    embedder: Embedder
    policy: ChunkPolicy

    @property
    def store(self) -> Store: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def counter(self) -> TokenCounter: ...

    def check_dims(self, dims: int) -> None: ...

    def ensure_vector_index(self) -> bool: ...

    def write_artifacts(self, lines: Sequence[tuple[uuid.UUID, str]]) -> dict[uuid.UUID, str]: ...


# A queued run's file numbers its items from its ordinal times this (a container holds at most this many documents)
PART_ITEMS = 1_000_000


@dataclass(frozen=True)
class Part:
    """One job's share of a queued run: the run exists (its row, its other files' items); this file's items are
    numbered from `base`, and those in `done` were stored by an earlier attempt of the job (killed after their
    transaction committed), so they are skipped, not stored or counted again."""

    run_id: uuid.UUID
    base: int
    done: frozenset[int] = frozenset()
    attempt: int | None = None  # the job's attempt that claimed the file: its batches commit while it is the latest


@dataclass
class _Prepared:
    item_index: int
    doc: ExtractedDocument
    doc_id: uuid.UUID
    content_hash: str
    chunks: list[Chunk]
    warnings: list[str]
    tags: tuple[str, ...]
    metadata: dict[str, Any]
    signature: np.ndarray | None = None
    band_keys: list[int] = field(default_factory=list)
    artifact_uri: str | None = None  # written once planned as new, before the commit
    artifact_line: str | None = None  # its line in the artifact pack, made while the batch before is written
    lexemes: list[str] | None = None  # each chunk's tsvector (as text), made while the batch before is written
    # stored signatures sharing an LSH band with it and similar enough to be recorded, (version, document,
    # signature), found while the batch before is written; None: not looked up yet
    near_stored: list[tuple[uuid.UUID, uuid.UUID, np.ndarray]] | None = None
    action: str = "new"
    version_id: uuid.UUID | None = None
    version_number: int = 1
    reason: str | None = None
    extract_seconds: float = 0.0
    original: tuple[Path, str] | None = None  # the file it was read from and that file's name
    unkept: bool = False  # an unchanged version that has no original kept
    source: tuple[str, str, str] | None = None  # the kept original: its SHA-256, name and media type


@dataclass
class _RunState:
    run_id: uuid.UUID
    next_index: int = 0
    by_index: dict[int, ItemOutcome] = field(default_factory=dict)  # one outcome per item, even after a retry
    pending: list[tuple[int, ItemOutcome]] = field(default_factory=list)
    embedded: int = 0
    cache_hits: int = 0
    warnings: list[str] = field(default_factory=list)
    near_threshold: float = 1.0
    near_index: dedupe.RunIndex = field(default_factory=dedupe.RunIndex)
    near_decisions: list[dict[str, Any]] = field(default_factory=list)
    shared: bool = False  # a queued run's part: other jobs write the run's row; this one writes its items only
    part: Part | None = None
    sources: dict[Path, tuple[str, str]] = field(default_factory=dict)  # a file's SHA-256 and media type
    read_ahead: prefetch.Prefetch = field(default_factory=prefetch.Prefetch)

    def take_index(self) -> int:
        self.next_index += 1
        return self.next_index - 1

    @property
    def outcomes(self) -> list[ItemOutcome]:
        return [self.by_index[i] for i in sorted(self.by_index)]

    def stats(self, started: float) -> dict[str, Any]:
        counts: dict[str, int] = {}
        outcomes = self.outcomes
        for o in outcomes:
            counts[o.status] = counts.get(o.status, 0) + 1
        return {
            "items": len(outcomes),
            "counts": dict(sorted(counts.items())),
            "chunks": sum(o.chunks for o in outcomes if o.status in ("ingested", "updated")),
            "embedded": self.embedded,
            "cache_hits": self.cache_hits,
            "warnings": self.warnings[:100],
            "near_duplicates": self.near_decisions[:1000],
            "seconds": round(time.monotonic() - started, 3),
        }


# -- sources -----------------------------------------------------------------------------------------


def expand_paths(paths: Sequence[str | os.PathLike[str]], *,
                 follow_symlinks: bool = False) -> Iterator[Path | IngestError]:
    """Files in argument order; directories walked recursively in sorted order, hidden entries skipped.

    A link inside a folder that points outside it is not followed (an item skipped with the reason) unless
    follow_symlinks; a link to a folder is never walked twice."""
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_dir():
            yield from _walk(path, follow_symlinks)
        elif path.exists():
            yield path
        elif path.is_symlink():
            yield _target(path)  # a link that loops or leads nowhere: why
        else:
            yield IngestError(f"{raw}: no such file or directory")


def _walk(top: Path, follow_symlinks: bool) -> Iterator[Path | IngestError]:
    """Every link met is an item: followed, or skipped with the reason (one that loops or leads nowhere, one out of
    the folder unless follow_symlinks, one to a folder walked anyway)."""
    root = top.resolve()
    walked: set[Path] = set()
    for dirpath, dirs, files in os.walk(top, followlinks=follow_symlinks):
        here = Path(dirpath)
        walked.add(here.resolve())
        kept = []
        for name in sorted(d for d in dirs if not d.startswith(".")):
            entry = here / name
            if entry.is_symlink():
                target = _target(entry)
                if isinstance(target, Skipped):
                    yield target
                    continue
                if not follow_symlinks:
                    yield _outside(entry, target, top) if not target.is_relative_to(root) else _walked(entry, top)
                    continue  # a link within the folder: its target is walked where it is
                if target in walked or (target.is_relative_to(root) and root.is_relative_to(target)):
                    yield _walked(entry, top)  # a loop, or a folder already walked
                    continue
            kept.append(name)
        dirs[:] = kept
        # (a link that loops shows up among the files: os.walk cannot tell it is a folder)
        for name in sorted(f for f in files if not f.startswith(".")):
            entry = here / name
            if entry.is_symlink():
                target = _target(entry)
                if isinstance(target, Skipped):
                    yield target
                    continue
                if not follow_symlinks and not target.is_relative_to(root):
                    yield _outside(entry, target, top)
                    continue
            yield entry


def _target(link: Path) -> Path | Skipped:
    """Where a link leads, or why it leads nowhere."""
    try:
        return link.resolve(strict=True)
    except (RuntimeError, OSError) as exc:  # (RuntimeError: Python's own loop detection)
        if isinstance(exc, RuntimeError) or exc.errno == errno.ELOOP:
            return SymlinkLoop(f"{_display(link)}: a link that loops (it leads back to itself); skipped")
        return SymlinkDangling(f"{_display(link)}: a link to {_display(Path(os.readlink(link)))}, which does not "
                               "exist; skipped")


def _walked(link: Path, top: Path) -> SymlinkWalked:
    return SymlinkWalked(f"{_display(link)}: a link to a folder of {_display(top)} already ingested where it is; "
                         "not walked twice")


def _outside(link: Path, target: Path, top: Path) -> SymlinkOutside:
    return SymlinkOutside(f"{_display(link)}: a link to {_display(target)}, outside {_display(top)}; not followed "
                          "(ingest the target itself, or pass --follow-symlinks)")


def _display(path: Path) -> str:
    """A path as text that can always be printed and stored (undecodable bytes as \\xNN escapes)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def read_source(path: Path, max_bytes: int) -> Source:
    """The bytes of a regular file, at most max_bytes. Opened without blocking and checked before reading: a
    FIFO would block forever, a device (a link to /dev/zero) would never end."""
    resolved = path.resolve()
    fd = os.open(resolved, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise NotARegularFile(f"{path.name} is not a regular file ({_file_kind(info.st_mode)}); "
                                  "only regular files are read")
        if info.st_size > max_bytes:
            raise FileTooLarge(f"{path.name} is {info.st_size} bytes, over the {max_bytes}-byte limit "
                               "(RAGD_MAX_FILE_BYTES)")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise FileTooLarge(f"{path.name} grew past the {max_bytes}-byte limit while it was read (RAGD_MAX_FILE_BYTES)")
    return _source(path, data)


def _source(path: Path, data: bytes) -> Source:
    resolved = path.resolve()
    # a file name that is not valid UTF-8 keeps its bytes visible (and distinct) as \xNN escapes
    return Source(path=path, data=data, external_id=_display(resolved), source_uri=resolved.as_uri())


def _file_kind(mode: int) -> str:
    for test, kind in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return kind
    return "not a file"


def extract_path(path: Path, limits: Limits, options: ExtractOptions) -> Iterator[ExtractedDocument | Exception]:
    try:
        kind, source = _read_checked(path, limits)
        for doc in EXTRACTORS[kind].extract(source, options):  # (in the worker: a text too long is not sent back)
            yield too_long(doc, limits.max_document_chars) or doc if isinstance(doc, ExtractedDocument) else doc
    except Exception as exc:
        yield _extract_error(path, exc)


def too_long(doc: ExtractedDocument, max_chars: int) -> FileTooLarge | None:
    """The error of a document whose text is over max_chars characters, or None."""
    chars = sum(len(b.text) + sum(len(c or "") for row in b.rows for c in row) for b in doc.blocks)
    if chars <= max_chars:
        return None
    return FileTooLarge(f"{doc.external_id.rsplit('/', 1)[-1]}: its text is {chars:,} characters, over the "
                        f"{max_chars:,}-character limit of one document (RAGD_MAX_DOCUMENT_CHARS)")


def _read_checked(path: Path, limits: Limits) -> tuple[str, Source]:
    """The file's format and bytes, after the checks made before any parser runs."""
    source = read_source(path, limits.max_file_bytes)
    kind = detect(path, source.data)
    if not source.data.strip():
        raise EmptyDocument(f"{path.name} is empty")
    bounds.check(kind, path.name, source.data, limits)
    return kind, source


def _extract_error(path: Path, exc: Exception) -> Exception:
    """What an exception raised while extracting a file says in its report."""
    if isinstance(exc, RagdError):
        return exc
    if isinstance(exc, OSError):
        return IngestError(f"{_display(path)}: cannot read: {exc.strerror or exc}")
    if isinstance(exc, MemoryError):
        return FileTooLarge(f"{path.name}: extraction ran out of memory")
    # a parser library choking on a malformed file fails that file only
    return CorruptDocument(f"{path.name}: could not be extracted ({type(exc).__name__}: {exc})")


def extract_or_split(path: Path, limits: Limits, options: ExtractOptions,
                     split_pages: int = 0) -> list[ExtractedDocument | Exception] | PdfSplit:
    """A file's documents, or for a PDF of `split_pages` pages or more (when given) its page count, for the
    caller to have its pages read by several workers at once."""
    if not split_pages:
        return list(extract_path(path, limits, options))
    found: list[ExtractedDocument | Exception] = []
    try:
        kind, source = _read_checked(path, limits)
        if kind == "pdf" and (pages := pdf.page_count(source)) >= split_pages:
            return PdfSplit(pages)
        found.extend(EXTRACTORS[kind].extract(source, options))
    except Exception as exc:
        found.append(_extract_error(path, exc))
    return found


PDF_RANGE_PAGES = 16  # the fewest pages of a long PDF read by one worker at a time


@dataclass
class PdfPart:
    """Pages start..stop of a PDF read in a worker: what was read, and the pages' boxes as a spool's bytes."""

    read: pdf.PagesRead
    pages: int
    boxes: bytes


def read_pdf_pages(path: Path, limits: Limits, start: int, stop: int) -> PdfPart | list[Exception]:
    try:
        _, source = _read_checked(path, limits)
        with pdf.PageSpool() as spool:
            read = pdf.read_pages(source, spool, start, stop)
            return PdfPart(read, len(spool), spool.to_bytes())
    except Exception as exc:
        return [_extract_error(path, exc)]


def lay_out_pdf(path: Path, parts: list[PdfPart]) -> list[ExtractedDocument | Exception]:
    """The document of a PDF from its page ranges, in order."""
    try:
        read = pdf.PagesRead()
        for part in parts:
            read.extend(part.read)
        with pdf.PageSpool.from_bytes([(p.pages, p.boxes) for p in parts]) as spool:
            return list(pdf.lay_out(_source(path, b""), read, spool))
    except Exception as exc:
        return [_extract_error(path, exc)]


class _Extraction:
    """Extracts files, each in a worker process under the time and memory limits when isolation is on, up to
    `workers` files at once; results come back in the order of the files, whatever the number of workers, so
    item numbers, ids and chunks are the same for any N. With more than one worker, a PDF of `pdf_split_pages`
    pages or more has its pages read in ranges by the workers at once (each range under the limits), then laid
    out as one document: each page is read on its own, so the document is the same as one worker's."""

    def __init__(self, settings: Settings, options: ExtractOptions, workers: int = 1):
        self.limits = Limits.from_settings(settings)
        self.isolated = settings.extract_isolation
        self.options = options
        self.workers = max(1, workers) if self.isolated else 1  # in-process parsers hold the GIL: one at a time
        # workers reading at once share the cores: each one's OCR gets its share of them (one worker: all)
        self.ocr_threads = max(1, default_workers() // self.workers) if self.workers > 1 else None
        self.split_pages = settings.pdf_split_pages if self.workers > 1 else 0
        self._taken: list[Worker] = []
        self._local = threading.local()
        self._lock = threading.Lock()
        self._ranges = threading.BoundedSemaphore(self.workers)  # page ranges read at once, over all files

    def __call__(self, path: Path) -> list[ExtractedDocument | Exception]:
        if not self.isolated:
            return list(extract_path(path, self.limits, self.options))
        answer = self._worker().extract(path, self.options, self.split_pages, self.ocr_threads)
        return self._split(path, answer.pages) if isinstance(answer, PdfSplit) else answer

    def _worker(self) -> Worker:
        """This thread's worker, started (or taken from the idle pool) on first use or after it was killed."""
        worker: Worker | None = getattr(self._local, "worker", None)
        if worker is None or not worker.alive:
            worker = POOL.take(self.limits)
            self._local.worker = worker
            with self._lock:
                self._taken.append(worker)
        return worker

    def _split(self, path: Path, pages: int) -> list[ExtractedDocument | Exception]:
        """A long PDF read in page ranges by `workers` workers at once, then laid out by this thread's worker;
        the first range that fails fails the file."""
        size = max(PDF_RANGE_PAGES, -(-pages // (2 * self.workers)))
        ranges = [(start, min(start + size, pages)) for start in range(0, pages, size)]
        with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="ragd-pages") as pool:
            parts = list(pool.map(lambda r: self._read_range(path, *r), ranges))
        for part in parts:
            if isinstance(part, list):
                return list(part)
        answer: list[ExtractedDocument | Exception] = self._worker().ask(("pdf_layout", path, parts), path)
        return answer

    def _read_range(self, path: Path, start: int, stop: int) -> PdfPart | list[Exception]:
        with self._ranges:
            worker = POOL.take(self.limits)
            try:
                part: PdfPart | list[Exception] = worker.ask(("pdf_pages", path, self.ocr_threads, start, stop),
                                                             path)
                return part
            finally:
                POOL.give_back(worker)

    def timed(self, path: Path) -> tuple[list[ExtractedDocument | Exception], float]:
        """A file's documents or failures, and the seconds reading it took (a worker's start not counted)."""
        if self.isolated:
            self._worker()
        started = time.perf_counter()
        found = self(path)
        return found, time.perf_counter() - started

    def each(self, sources: Sequence[Path | IngestError]
             ) -> Iterator[tuple[Path | IngestError, list[Any], float]]:
        """(source, its documents or failures, the seconds reading it took), in the order of `sources`; a source
        that is already an error comes back with no documents."""
        if self.workers == 1 or len(sources) < 2:
            for src in sources:
                yield (src, [], 0.0) if isinstance(src, IngestError) else (src, *self.timed(src))
            return
        with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="ragd-extract") as pool:
            ahead: deque[tuple[Path | IngestError, Future[tuple[list[Any], float]] | None]] = deque()
            pending = iter(sources)
            try:
                for src in pending:
                    ahead.append((src, None if isinstance(src, IngestError) else pool.submit(self.timed, src)))
                    if len(ahead) >= 2 * self.workers:  # a bounded look-ahead: memory stays flat
                        first, future = ahead.popleft()
                        yield (first, *future.result()) if future is not None else (first, [], 0.0)
                while ahead:
                    first, future = ahead.popleft()
                    yield (first, *future.result()) if future is not None else (first, [], 0.0)
            finally:
                for _, future in ahead:
                    if future is not None:
                        future.cancel()

    def close(self) -> None:
        with self._lock:
            taken, self._taken = self._taken, []
        for worker in taken:
            POOL.give_back(worker)


def default_workers() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


# -- preparation -------------------------------------------------------------------------------------


def content_hash(doc: ExtractedDocument) -> str:
    canonical = [
        [b.type, b.text, b.level, list(b.header), [list(r) for r in b.rows]] for b in doc.blocks
    ]
    return sha256_text(json.dumps(canonical, ensure_ascii=False, separators=(",", ":")))


def prepare(col: Collection, doc: ExtractedDocument, index: int, tags: Sequence[str],
            metadata: dict[str, Any]) -> _Prepared:
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
    return _Prepared(
        item_index=index,
        doc=doc,
        doc_id=doc_id,
        content_hash=content_hash(doc),
        chunks=chunks,
        warnings=[*doc.warnings, *warnings],
        tags=all_tags,
        metadata={**doc.metadata, **metadata},
    )


# -- embedding with the cache ------------------------------------------------------------------------


class _Tally(Protocol):
    embedded: int
    cache_hits: int


@dataclass
class _Ahead:
    """A batch's vectors embedded before its commit (by content hash), and what that took."""
    vectors: dict[str, np.ndarray] = field(default_factory=dict)
    embedded: int = 0
    cache_hits: int = 0
    seconds: float = 0.0
    counted: bool = False  # added to the run's figures once, even when the commit is retried item by item


def embed_cached(col: Collection, texts: Sequence[str], tally: _Tally,
                 ahead: _Ahead | None = None) -> np.ndarray:
    """Vectors for texts in order; each distinct text is embedded at most once per model, ever. The model runs
    outside any transaction: the cache is read in one short transaction and written in another. Texts found in
    `ahead` are taken from it."""
    if not texts:
        return np.zeros((0, col.dims), dtype=np.float32)
    hashes = [sha256_text(t) for t in texts]
    found: dict[str, np.ndarray] = {}
    if ahead is not None:
        found = {h: ahead.vectors[h] for h in hashes if h in ahead.vectors}
    wanted = sorted(set(hashes) - set(found))
    if wanted:
        with col.store.tenant(col.tenant) as conn:
            rows = conn.execute(queries.CACHE_LOOKUP, {"embed_model": col.embed_model, "hashes": wanted}).fetchall()
        for h, vec in rows:
            found[h] = np.asarray(vec.to_numpy() if hasattr(vec, "to_numpy") else vec, dtype=np.float32)
        tally.cache_hits += len(rows)
    missing: dict[str, str] = {}
    for h, t in zip(hashes, texts):
        if h not in found and h not in missing:
            missing[h] = t
    if missing:
        vectors = col.embedder.embed_documents(list(missing.values()))
        col.check_dims(vectors.shape[1])
        with col.store.tenant(col.tenant) as conn:
            conn.execute(queries.CACHE_INSERT, {"tenant_id": col.tenant, "embed_model": col.embed_model,
                                                "hashes": list(missing), "embeddings": list(vectors)})
        found.update(zip(missing, vectors))
    tally.embedded += len(missing)
    return np.stack([found[h] for h in hashes])


def _ahead(col: Collection, batch: list[_Prepared], state: _RunState) -> _Ahead:
    """Embed a batch while the batch before it is written, with the rest of a new version's work that needs no
    decision: its MinHash signature and the stored signatures similar to it. Documents stored with this content
    already are left out; the commit plans again and does whatever it needs that is not done here (its artifact
    too: written for a version that turned out a duplicate, it would be kept for nothing)."""
    started = time.perf_counter()
    doc_ids = sorted({p.doc_id for p in batch}, key=str)
    with col.store.tenant(col.tenant) as conn:
        stored = {row[0]: row[5] for row in conn.execute(queries.BATCH_DOCUMENT_STATE, {"doc_ids": doc_ids})}
    fresh = [p for p in batch if stored.get(p.doc_id) != p.content_hash]
    for p in fresh:
        _sign(p)
        _serialize(p)  # its artifact's line (written only if the commit stores the version)
    if fresh and state.near_threshold < 1.0:  # the band lookups (at 1M chunks a tenth of a batch's server time),
        # off the writer's path; the batch before is not committed yet, but its documents are in the run's index
        with col.store.tenant(col.tenant) as conn:
            _similar_stored(conn, col, fresh, state.read_ahead)
    texts = [c.search_text for p in fresh for c in p.chunks]
    ahead = _Ahead()
    vectors = embed_cached(col, texts, ahead)
    ahead.vectors = {sha256_text(t): v for t, v in zip(texts, vectors)}
    if texts:  # the lexemes on this backend, beside the one writing the batch before (a quarter of a batch's server
        # time, taken off the writer's); a version without them has them made in its commit
        with col.store.tenant(col.tenant) as conn:
            lexemes = iter([r[0] for r in conn.execute(queries.LEXEMES, {"texts": texts})])
        for p in fresh:
            p.lexemes = [next(lexemes) for _ in p.chunks]
    ahead.seconds = time.perf_counter() - started
    return ahead


# -- planning and writing ----------------------------------------------------------------------------


def _plan(conn: psycopg.Connection[Any], col: Collection, batch: list[_Prepared], duplicates: Duplicates,
          state: _RunState) -> None:
    """Decide each document's action: unchanged, labels, duplicate (exact or near), reactivate or new."""
    doc_ids = sorted({p.doc_id for p in batch}, key=str)
    states = {row[0]: row for row in conn.execute(queries.BATCH_DOCUMENT_STATE, {"doc_ids": doc_ids})}
    active_by_hash: dict[str, list[tuple[uuid.UUID, str]]] = {}
    if duplicates == "skip":  # other documents with the same content: only looked for when they are skipped
        for h, doc, ext in conn.execute(queries.BATCH_ACTIVE_WITH_HASH, {
                "hashes": sorted({p.content_hash for p in batch}), "collection_id": col.collection_id}):
            active_by_hash.setdefault(h, []).append((doc, ext))
    known = {(d, h) for d, h in conn.execute(queries.BATCH_KNOWN_VERSIONS, {"doc_ids": doc_ids})}
    new_hashes: dict[str, str] = {}
    for p in batch:
        row = states.get(p.doc_id)
        if row is not None and row[5] == p.content_hash:
            changed = (list(row[1]) != list(p.tags) or row[2] != p.metadata or row[3] != p.doc.title)
            p.action, p.version_id = ("labels" if changed else "unchanged"), row[4]
            p.unkept = row[7] is None  # stored before originals were kept: this file is its original
            continue
        if duplicates == "skip":
            others = [ext for doc, ext in active_by_hash.get(p.content_hash, []) if doc != p.doc_id]
            other = others[0] if others else new_hashes.get(p.content_hash)
            if other is not None:
                p.action, p.reason = "duplicate", f"same content as {other}"
                continue
        new_hashes.setdefault(p.content_hash, p.doc.external_id)
        p.version_id = make_version_id(p.doc_id, p.content_hash)
        p.version_number = int(row[6]) + 1 if row is not None else 1
        p.action = "reactivate" if (p.doc_id, p.content_hash) in known else "new"
    _near_duplicates(conn, col, [p for p in batch if p.action == "new"], duplicates, state)


def _near_duplicates(conn: psycopg.Connection[Any], col: Collection, batch: list[_Prepared],
                     duplicates: Duplicates, state: _RunState) -> None:
    """Compare each new document with the stored active ones and with those accepted earlier in this run.
    At or above the threshold it is recorded as a duplicate (unless duplicates are kept); every pair found
    similar enough to be a candidate is recorded in the run with its score and the decision."""
    for p in batch:  # only documents planned as new need a signature (MinHash is a third of preparing one)
        _sign(p)
    if state.near_threshold >= 1.0:
        return  # the check is off: signatures are stored for later runs, nothing is compared
    stored = _stored_candidates(conn, col, batch, state.read_ahead)
    for i, p in enumerate(batch):
        assert p.signature is not None
        candidates = stored[i] + state.near_index.candidates(p.band_keys)
        match = dedupe.best_match(p.signature, p.doc_id, candidates)
        if match is not None and match[1] >= dedupe.RECORDED:
            other, score = match
            skip = score >= state.near_threshold and duplicates == "skip"
            state.near_decisions.append({"item": p.doc.external_id, "similar_to": other.external_id,
                                         "similarity": round(score, 4), "threshold": state.near_threshold,
                                         "decision": "duplicate" if skip else "kept"})
            if skip:
                p.action = "duplicate"
                p.reason = f"near-duplicate of {other.external_id} (similarity {score:.3f} >= {state.near_threshold})"
                continue
        state.near_index.add(dedupe.Known(p.doc_id, p.doc.external_id, p.signature), p.band_keys)


def _stored_candidates(conn: psycopg.Connection[Any], col: Collection, batch: list[_Prepared],
                       read_ahead: prefetch.Prefetch) -> list[list[dedupe.Known]]:
    """Each document's stored candidates similar enough to be recorded (those found ahead, else looked up now)
    that are active now, with their external ids: read here, in the plan's transaction, so a candidate retired
    since it was found is no match (one committed by another run since then is not seen: as one committed while
    this batch is written is not)."""
    unsearched = [p for p in batch if p.near_stored is None]
    if unsearched:
        _similar_stored(conn, col, unsearched, read_ahead)
    versions = sorted({version for p in batch for version, _, _ in p.near_stored or ()})
    active = dict(conn.execute(queries.ACTIVE_CANDIDATES, {"versions": versions}).fetchall()) if versions else {}
    return [[dedupe.Known(doc_id, active[version], signature)
             for version, doc_id, signature in p.near_stored or () if version in active] for p in batch]


def _similar_stored(conn: psycopg.Connection[Any], col: Collection, batch: list[_Prepared],
                    read_ahead: prefetch.Prefetch) -> None:
    """Each document's stored signatures (of any version of the collection) sharing an LSH band with it and
    similar enough to be recorded: a candidate below that can be no document's match. Each stored signature comes
    once with the batch's documents sharing a band with it, so each document tests its own (testing every
    candidate of the batch against every document was half of this process's time at 1M)."""
    docs = [i for i, p in enumerate(batch) for _ in p.band_keys]
    keys = [k for p in batch for k in p.band_keys]
    mine = [p.signature for p in batch if p.signature is not None]
    assert len(mine) == len(batch)
    rows = conn.execute(queries.NEAR_DUPLICATE_CANDIDATES, {
        "collection_id": col.collection_id, "docs": docs, "keys": keys}).fetchall() if keys else []
    read_ahead.signatures_read(len(batch), len(rows))
    found: list[list[tuple[uuid.UUID, uuid.UUID, np.ndarray]]] = [[] for _ in batch]
    for version, doc_id, sig, sharing in rows:
        signature = dedupe.from_bytes(sig)
        if signature is None:
            continue  # not a signature ragd wrote: no candidate
        for i in sharing:
            if dedupe.similarity(mine[i], signature) >= dedupe.RECORDED:
                found[i].append((version, doc_id, signature))
    for p, similar in zip(batch, found):
        p.near_stored = similar


def _sign(p: _Prepared) -> None:
    if p.signature is None:
        p.signature = dedupe.signature(dedupe.document_text(p.doc))
        p.band_keys = dedupe.band_keys(p.signature)


def _write_new(conn: psycopg.Connection[Any], col: Collection, new: list[_Prepared], vectors: np.ndarray) -> None:
    """New versions with their chunks and embeddings, a statement per table for the whole batch."""
    ids = {"tenant_id": col.tenant, "collection_id": col.collection_id}
    effective = [e if isinstance(e := p.metadata.get("effective_at"), str) else None for p in new]
    conn.execute(queries.INSERT_VERSIONS, {
        "tenant_id": col.tenant, "versions": [p.version_id for p in new], "doc_ids": [p.doc_id for p in new],
        "labels": [f"v{p.version_number}" for p in new], "hashes": [p.content_hash for p in new],
        "artifacts": [p.artifact_uri for p in new],
        "counts": [len(p.chunks) for p in new], "effective": effective,
        "sources": [p.source[0] if p.source else None for p in new],
        "source_names": [p.source[1] if p.source else None for p in new],
        "media_types": [p.source[2] if p.source else None for p in new]})
    tags = [json.dumps(list(p.tags), ensure_ascii=False) for p in new]
    rows = [(p, t, e, c) for p, t, e in zip(new, tags, effective) for c in p.chunks]  # a chunk with its document's
    chunk_ids = [make_chunk_id(_version(p), c.chunk_index) for p, _, _, c in rows]
    conn.execute(queries.INSERT_CHUNKS, {
        **ids, "chunk_ids": chunk_ids, "doc_ids": [p.doc_id for p, _, _, _ in rows],
        "versions": [p.version_id for p, _, _, _ in rows], "indexes": [c.chunk_index for *_, c in rows],
        "heading_paths": [json.dumps(list(c.heading_path), ensure_ascii=False) for *_, c in rows],
        "types": [c.chunk_type for *_, c in rows], "contents": [c.content for *_, c in rows],
        "hashes": [sha256_text(c.content) for *_, c in rows], "tokens": [c.token_count for *_, c in rows],
        "tags": [tags for _, tags, _, _ in rows],
        "metadata": [json.dumps(c.metadata, ensure_ascii=False, sort_keys=True) for *_, c in rows],
        "effective": [e for _, _, e, _ in rows], "search_texts": [c.search_text for *_, c in rows],
        "lexemes": [p.lexemes[c.chunk_index] if p.lexemes else None for p, _, _, c in rows]})
    conn.execute(queries.INSERT_EMBEDDINGS, {**ids, "embed_model": col.embed_model, "chunk_ids": chunk_ids,
                                             "embeddings": list(vectors)})


def _keep_originals(conn: psycopg.Connection[Any], col: Collection, state: _RunState, new: list[_Prepared]) -> None:
    """The files new versions were read from, kept (once per tenant and content) in this transaction. A file read
    for an earlier batch is not read again unless this transaction must keep it; a file gone since it was
    extracted leaves its version without an original."""
    keeper = original_files(col.settings)
    if not keeper.kept:
        return
    checked: set[str] = set()
    for p in new:
        if p.original is None:
            continue
        path, name = p.original
        known = state.sources.get(path)
        data = None
        if known is None:
            try:
                data = path.read_bytes()
            except OSError:
                continue
            known = state.sources[path] = (hashlib.sha256(data).hexdigest(), media_type(name, data[:16]))
        sha, kind = known
        if sha not in checked:
            checked.add(sha)
            if conn.execute(queries.ORIGINAL_KEPT, {"tenant_id": col.tenant, "sha256": sha}).fetchone() is None:
                try:
                    data = data if data is not None else path.read_bytes()
                except OSError:
                    continue
                if hashlib.sha256(data).hexdigest() != sha:
                    continue  # changed since it was read: this version keeps no original
                keeper.put(conn, col.tenant, sha, data)
        p.source = (sha, name, kind)


def _artifacts(col: Collection, new: list[_Prepared]) -> None:
    """The new versions' extracted blocks, one pack for them all (content-addressed by version id)."""
    versions = [make_version_id(p.doc_id, p.content_hash) for p in new]
    uris = col.write_artifacts([(v, _serialize(p)) for v, p in zip(versions, new)])
    for v, p in zip(versions, new):
        p.artifact_uri = uris[v]


def artifact_line(version: uuid.UUID, doc: ExtractedDocument) -> str:
    """A version's line of an artifact pack: its extracted document and blocks as one JSON object."""
    return json.dumps({"doc_version_id": str(version), "external_id": doc.external_id, "source_uri": doc.source_uri,
                       "source_type": doc.source_type, "title": doc.title,
                       "blocks": [vars(b) for b in doc.blocks]},  # (tuples are written as arrays, as asdict's)
                      ensure_ascii=False, sort_keys=True) + "\n"


def _serialize(p: _Prepared) -> str:
    """The version's artifact line, made once (ahead of the commit, or by it)."""
    if p.artifact_line is None:
        p.artifact_line = artifact_line(make_version_id(p.doc_id, p.content_hash), p.doc)
    return p.artifact_line


def _version(p: _Prepared) -> uuid.UUID:
    assert p.version_id is not None
    return p.version_id


def _outcome(p: _Prepared, store_seconds: float) -> ItemOutcome:
    status = {"new": "ingested", "reactivate": "updated", "labels": "updated", "unchanged": "unchanged",
              "duplicate": "duplicate"}[p.action]
    reason = p.reason
    if p.action == "reactivate":
        reason = "content matches an earlier version; re-activated"
    elif p.action == "labels":
        reason = "tags, metadata or title changed; content unchanged"
    elif p.warnings:
        reason = "; ".join(p.warnings)
    return ItemOutcome(source_uri=p.doc.source_uri, status=status, external_id=p.doc.external_id,  # type: ignore[arg-type]
                       doc_id=p.doc_id, doc_version_id=p.version_id,
                       chunks=len(p.chunks) if p.action != "duplicate" else 0, reason=reason,
                       extract_seconds=p.extract_seconds, store_seconds=store_seconds)


def write_items(conn: psycopg.Connection[Any], tenant: str, run_id: uuid.UUID,
                items: Sequence[tuple[int, ItemOutcome]]) -> None:
    """A run's items (index, outcome) in one statement."""
    if items:
        conn.execute(queries.INSERT_ITEMS, {
            "run_id": run_id, "tenant_id": tenant, "indexes": [i for i, _ in items],
            "source_uris": [o.source_uri for _, o in items], "external_ids": [o.external_id for _, o in items],
            "statuses": [o.status for _, o in items], "codes": [o.error_code for _, o in items],
            "reasons": [o.reason for _, o in items], "doc_ids": [o.doc_id for _, o in items],
            "versions": [o.doc_version_id for _, o in items], "chunks": [o.chunks for _, o in items],
            "extract_seconds": [o.extract_seconds for _, o in items],
            "store_seconds": [o.store_seconds for _, o in items]})


def _commit(col: Collection, state: _RunState, batch: list[_Prepared], duplicates: Duplicates,
            started: float, ahead: _Ahead | None = None) -> None:
    begun = time.perf_counter()
    with col.store.tenant(col.tenant) as conn:
        _plan(conn, col, batch, duplicates, state)
    embedded_ahead = 0.0
    if ahead is not None and not ahead.counted:
        ahead.counted = True
        state.embedded += ahead.embedded
        state.cache_hits += ahead.cache_hits
        embedded_ahead = ahead.seconds
    todo = [p for p in batch if p.action == "new"]
    vectors = embed_cached(col, [c.search_text for p in todo for c in p.chunks], state, ahead)
    _artifacts(col, [p for p in todo if p.artifact_uri is None])  # before the transaction, outside it
    with col.store.tenant(col.tenant) as conn, conn.pipeline():
        _hold_part(conn, state)
        stored = [p for p in batch if p.action not in ("unchanged", "duplicate")]
        if stored:  # (the upsert locks each document's row until commit, whether or not its WHERE let it update)
            conn.execute(queries.UPSERT_DOCUMENTS, {
                "tenant_id": col.tenant, "collection_id": col.collection_id, "doc_ids": [p.doc_id for p in stored],
                "external_ids": [p.doc.external_id for p in stored], "source_uris": [p.doc.source_uri for p in stored],
                "source_types": [p.doc.source_type for p in stored], "titles": [p.doc.title for p in stored],
                "tags": [json.dumps(list(p.tags), ensure_ascii=False) for p in stored],
                "metadata": [json.dumps(p.metadata, ensure_ascii=False, sort_keys=True) for p in stored]})
        for p in stored:
            if p.action == "labels":
                conn.execute(queries.UPDATE_CHUNK_TAGS, {"tags": list(p.tags), "doc_version_id": p.version_id})
        if todo:
            _keep_originals(conn, col, state, todo)
            _write_new(conn, col, todo, vectors)
        attach = [p for p in batch if p.original is not None and (p.unkept or p.action == "reactivate")]
        if attach:  # versions stored before originals were kept, read again from their file
            _keep_originals(conn, col, state, attach)
            found = [(p.version_id, p.source) for p in attach if p.source is not None]
            if found:
                conn.execute(queries.ATTACH_SOURCES, {
                    "versions": [v for v, _ in found], "sources": [s[0] for _, s in found],
                    "names": [s[1] for _, s in found], "types": [s[2] for _, s in found]})
        changing = [p.doc_id for p in stored if p.action != "labels"]
        activate = [_version(p) for p in stored if p.action != "labels"]
        signed = [p for p in batch if p.action == "new" and p.signature is not None]
        if signed:  # every new version's signature with its LSH band keys, in one statement for the batch
            conn.execute(queries.INSERT_MINHASH, {
                "tenant_id": col.tenant, "collection_id": col.collection_id,
                "versions": [p.version_id for p in signed], "doc_ids": [p.doc_id for p in signed],
                "signatures": [dedupe.to_bytes(p.signature) for p in signed if p.signature is not None],
                "bands": ["{" + ",".join(map(str, p.band_keys)) + "}" for p in signed]})
        written = sorted({p.doc_id for p in batch if p.action in ("new", "reactivate", "labels")}, key=str)
        if written:
            conn.execute(queries.CLEAR_FILTER_VALUES, {"doc_ids": written})
            conn.execute(queries.WRITE_FILTER_VALUES, {"doc_ids": written})
        retire = [r[0] for r in conn.execute(queries.ACTIVE_VERSIONS_OF_MANY, {"doc_ids": changing})]
        if retire:
            for statement in queries.RETIRE_VERSIONS:
                conn.execute(statement, {"versions": retire, "collection_id": col.collection_id})
        if activate:
            for statement in queries.ACTIVATE_VERSIONS:
                conn.execute(statement, {"versions": activate, "collection_id": col.collection_id})
        if retire or activate or any(p.action == "labels" for p in batch):
            conn.execute(queries.BUMP_GENERATION, {"collection_id": col.collection_id})
        shares = _shares(embedded_ahead + time.perf_counter() - begun, [len(p.chunks) + 1 for p in batch])
        outcomes = [(p.item_index, _outcome(p, share)) for p, share in zip(batch, shares)]
        write_items(conn, col.tenant, state.run_id, sorted(state.pending + outcomes, key=lambda x: x[0]))
        state.by_index.update(outcomes)
        for p in batch:
            state.warnings += [f"{p.doc.external_id}: {w}" for w in p.warnings]
        if not state.shared:
            conn.execute(queries.UPDATE_RUN, {"run_id": state.run_id, "stage": "store",
                                              "stats": json.dumps(state.stats(started))})
    state.pending = []


def _shares(seconds: float, weights: list[int]) -> list[float]:
    """Seconds shared in proportion to weights."""
    total = sum(weights) or 1
    return [seconds * w / total for w in weights]


def _commit_isolating(col: Collection, state: _RunState, batch: list[_Prepared], duplicates: Duplicates,
                      started: float, ahead: _Ahead | None = None) -> None:
    """Commit a batch; if it fails, commit each half of it the same way, so one bad item fails alone and the
    rest are committed in about 2 log2(n) transactions, not n (a batch of 512 documents with one that cannot be
    embedded took 512 transactions, each with its own embedder call). Committing part of a batch is the same as
    committing its documents one after another, so the outcome is the same whichever way it is split."""
    if not batch:
        return
    begun = time.perf_counter()
    try:
        _commit(col, state, batch, duplicates, started, ahead)
        return
    except Exception as exc:  # of any kind: isolate the item that caused it
        if len(batch) == 1:
            p = batch[0]
            code = exc.code if isinstance(exc, RagdError) else (
                "store_error" if isinstance(exc, psycopg.Error) else "unexpected_error")
            _fail(state, p.item_index, ItemOutcome(source_uri=p.doc.source_uri, status="failed",
                                                   external_id=p.doc.external_id, doc_id=p.doc_id,
                                                   reason=storable(f"store: {str(exc).strip()}"), error_code=code,
                                                   extract_seconds=p.extract_seconds,
                                                   store_seconds=time.perf_counter() - begun))
            return
        if isinstance(exc, RagdError) and exc.code in STOP_CODES:
            raise  # not the documents' fault: stop the run
    for p in batch:
        p.action, p.reason, p.version_id = "new", None, None
    half = (len(batch) + 1) // 2
    _commit_isolating(col, state, batch[:half], duplicates, started, ahead)
    _commit_isolating(col, state, batch[half:], duplicates, started, ahead)


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

    def commit(self, embed: Callable[[], _Ahead], write: Callable[[_Ahead | None], None]) -> None:
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


def _fail(state: _RunState, index: int, outcome: ItemOutcome) -> None:
    state.pending.append((index, outcome))
    state.by_index[index] = outcome


def failure_outcome(source_uri: str, exc: Exception) -> ItemOutcome:
    """A failed (or skipped) item's outcome: a code and a one-line reason, whatever the exception."""
    if isinstance(exc, RagdError):
        status: ItemStatus = "skipped" if isinstance(exc, Skipped) else "failed"
        return ItemOutcome(source_uri=storable(source_uri), status=status, reason=storable(str(exc)),
                           error_code=exc.code, external_id=getattr(exc, "external_id", None))
    return ItemOutcome(source_uri=storable(source_uri), status="failed", error_code="unexpected_error",
                       reason=storable(f"{type(exc).__name__}: {exc}"))


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
    state = _RunState(run_id=part.run_id if part else uuid.uuid4(), near_threshold=threshold,
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
    extraction = _Extraction(col.settings, options, workers or col.settings.ingest_workers or default_workers())
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
        batch: list[_Prepared] = []
        batch_chunks = 0
        limits = batch_limits()
        max_docs, max_chunks = next(limits)

        def commit(full: list[_Prepared]) -> None:
            stages.commit(lambda: _ahead(col, full, state),
                          lambda ahead: _commit_isolating(col, state, full, duplicates, started, ahead))
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
                stages.call(lambda: _fail(state, index, failure))
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
                stages.call(lambda: _fail(state, index, failure))
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
                        (src.resolve(), name[0] if name is not None else _display(src.resolve())))
                    if on_progress and count % PROGRESS_RECORDS == 0:  # a file of many records shows it moves
                        on_progress(done - 1, total, f"{_display(Path(src.name))}: {count} records")
            if on_progress:
                on_progress(done, total, _display(Path(src.name)) if isinstance(src, Path) else "")
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


def _vector_index(col: Collection, state: _RunState) -> None:
    """A new collection's HNSW index, built once its first run has written its rows (see ensure_vector_index);
    if that fails the data stays committed and searchable by exact scan, and the next run builds it."""
    try:
        col.ensure_vector_index()
    except Exception as exc:  # of any kind: the documents are stored; only the index is missing
        state.warnings.append(storable(f"vector index not built ({str(exc).strip()}): searches scan this "
                                       "collection's vectors exactly until the next ingest builds it"))


def _compact_if_due(col: Collection, state: _RunState) -> None:
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
    spooled, uri = _display(path), path.as_uri()
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


def _flush_pending(col: Collection, state: _RunState, started: float) -> None:
    with col.store.tenant(col.tenant) as conn:
        _hold_part(conn, state)
        write_items(conn, col.tenant, state.run_id, state.pending)
    state.pending = []


def _hold_part(conn: psycopg.Connection[Any], state: _RunState) -> None:
    """A queued file's writes go on only while this attempt of its job is the file's latest (the row held to the
    end of the transaction, so a newer claim waits for it); Superseded otherwise."""
    part = state.part
    if part is None or part.attempt is None:
        return
    ordinal = part.base // PART_ITEMS
    row = conn.execute(queries.HOLD_FILE, {"run_id": part.run_id, "ordinal": ordinal,
                                           "attempt": part.attempt}).fetchone()
    if row is None or row[0] is not True:
        raise Superseded(f"file {ordinal} of run {part.run_id}: attempt {part.attempt} was superseded by a newer "
                         "attempt of its job, which stores the file")


def _finish(col: Collection, state: _RunState, status: str, stage: str, error: str | None, started: float) -> None:
    try:
        if state.pending:
            _flush_pending(col, state, started)
        with col.store.tenant(col.tenant) as conn:
            conn.execute(queries.FINISH_RUN, {"run_id": state.run_id, "status": status, "stage": stage,
                                              "stats": json.dumps(state.stats(started)), "error": error})
    except RagdError:
        if status == "succeeded":
            raise
