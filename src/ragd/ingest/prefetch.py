"""Reading the indexes an ingest run will probe in order, before the run probes them at random.

Every document of a run looks its keys up in indexes that grow with the store (its 32 LSH band keys in the
signatures' GIN index, its external id, its content hash, its chunks' hashes in the embedding cache), and inserts
rows into every index of the tables it writes (each chunk's insert walks the collection's HNSW graph). The keys are
ids and hashes, so a batch's lookups land on pages all over each index, and a run of 20k documents into a million
touches most pages of them. When those pages are not in memory (after a server start, or after searches pushed
them out), each costs a random read: on this machine 0.22 ms a page against 7 us a page read in order (1.1 GB/s),
so the first run after a start at 1.27M documents spent 43 s of its 127 s of statements on band lookups that take
13 s with the index in memory.

So a run first estimates, for each of those indexes, the share of its pages its lookups will touch (n random probes
into p pages touch 1 - e^(-n/p) of them) and has the server read those where that share is at least `SHARE` in
order (pg_prewarm's `read` mode, into the system's cache), in a thread beside the run, which goes on meanwhile.
The stored signatures' table too, once the run's first batches show how many stored signatures a document reads
(how many share a band with it depends on the collection). A small run into a large store touches few pages and
reads nothing ahead; neither does a run whose indexes are small (`ingest_prefetch_min_pages` in all). What was
read is logged (logger `ragd.ingest`, for the operator: the indexes are shared by every tenant, so their sizes are
not a tenant's to see, and the run's stats do not carry them). Nothing depends on it but time: a server without
pg_prewarm, or a read that fails, leaves the run as it was."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from ..store import queries
from . import dedupe

log = logging.getLogger("ragd.ingest")

SHARE = 0.25  # read an index in order once a run's lookups will touch this share of its pages (see module doc)
HNSW_PAGES_PER_CHUNK = 64  # an insert's search visits about ef_construction elements, each on its own page
SIGNATURES = "document_minhash"  # the stored signatures (each candidate's row is read from the table)
BANDS_INDEX = "document_minhash_bands"  # their LSH band keys' GIN index


def expected_share(probes: int, pages: int) -> float:
    """The expected share of an index's pages touched by `probes` lookups of random keys (each page equally likely:
    the keys are hashes)."""
    if pages <= 0:
        return 0.0
    return 1.0 - math.exp(-probes / pages)


# The tables a run writes a row of for each of its documents or chunks (the rows' keys are ids and hashes, so each
# row's insert, and each lookup before it, lands on a page anywhere in each of their indexes).
WRITTEN = ("chunk_embeddings", "chunks", "document_filter_values", "document_minhash", "document_versions",
           "documents", "embedding_cache")


def probes(documents: int, indexes: Sequence[tuple[str, str]], *, near_duplicates: bool,
           hnsw: str) -> dict[str, int]:
    """The lookups a run of `documents` documents makes in each of the written tables' indexes (name, access
    method): one a document (a document has at least one chunk: a low estimate), its band keys in the bands' GIN
    index (when the near-duplicate check is on), a graph's worth in the collection's HNSW index; none in the other
    collections' HNSW indexes (partial: a row of this collection is in none of them)."""
    out: dict[str, int] = {}
    for name, method in indexes:
        if method == "hnsw":
            if name == hnsw:
                out[name] = documents * HNSW_PAGES_PER_CHUNK
        elif name == BANDS_INDEX:
            if near_duplicates:
                out[name] = documents * dedupe.BANDS
        else:
            out[name] = documents
    return out


def chosen(pages: Mapping[str, int], lookups: Mapping[str, int], min_pages: int) -> list[str]:
    """The indexes worth reading in order: those whose touched share reaches SHARE, when together they hold at
    least `min_pages` pages (below that, random reads of all of them cost a fraction of a second). Listed as they
    are to be read: those the run probes most often a page first (each page read ahead of them spares the most
    random reads while the run's first batches go on beside the reading), then by name."""
    picked = [r for r, n in lookups.items() if expected_share(n, pages.get(r, 0)) >= SHARE]
    picked.sort(key=lambda r: (-lookups[r] / pages[r], r))
    return picked if picked and sum(pages[r] for r in picked) >= min_pages else []


@dataclass
class Prefetch:
    """A run's read-ahead: indexes asked for in a thread before the run's first batch; the signatures' table once
    the run's first batches show its near-duplicate check will read a quarter of it (`signatures_read`); each
    read joined (or cancelled) at the run's end; what each read is logged."""
    _store: Any = None
    _sizes: dict[str, int] = field(default_factory=dict)
    _min_pages: int = 0
    _documents: int = 0
    _checked: int = 0
    _signatures: int = 0
    _asked: set[str] = field(default_factory=set)  # relations asked for (not asked again)
    _threads: list[threading.Thread] = field(default_factory=list)
    _conns: list[Any] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stopped: bool = False

    @classmethod
    def start(cls, col: Any, documents: int, near_threshold: float) -> Prefetch:
        """Decide (the sizes read in a tenant session) and start reading ahead on a connection of the store's own
        (the schema owner's: pg_prewarm needs the indexes' owner)."""
        self = cls()
        settings = col.settings
        if not settings.ingest_prefetch or documents <= 0:
            return self
        try:
            with col.store.tenant(col.tenant) as conn:
                indexes = conn.execute(queries.TABLE_INDEXES, {"tables": list(WRITTEN)}).fetchall()
                self._sizes = dict(conn.execute(queries.RELATION_PAGES, {"names": [SIGNATURES]}).fetchall())
        except psycopg.Error as exc:  # a server that will not say the sizes leaves the run as it was
            log.debug("nothing read ahead: the indexes' sizes are not to be had (%s)", exc)
            return self
        self._sizes.update({name: pages for name, _, pages in indexes})
        lookups = probes(documents, [(name, method) for name, method, _ in indexes],
                         near_duplicates=near_threshold < 1.0, hnsw=queries.hnsw_index_name(col.collection_id))
        self._store, self._min_pages, self._documents = col.store, settings.ingest_prefetch_min_pages, documents
        self._spawn(chosen(self._sizes, lookups, self._min_pages))
        return self

    def signatures_read(self, documents: int, rows: int) -> None:
        """A batch of `documents` documents read `rows` stored signatures (those sharing a band with one of them:
        how many depends on the collection, so it is measured). Once the run's documents left, at the rate seen so
        far, will read a quarter of the signatures' table, it is read ahead."""
        with self._lock:  # (called by the thread embedding ahead, and by the writer for what that one did not)
            self._checked += documents
            self._signatures += rows
            checked, signatures = self._checked, self._signatures
        if self._store is None or SIGNATURES in self._asked or not 0 < checked < self._documents:
            return
        expected = (self._documents - checked) * signatures // checked
        self._spawn(chosen(self._sizes, {SIGNATURES: expected}, self._min_pages))

    def _spawn(self, relations: list[str]) -> None:
        if not relations:
            return
        with self._lock:
            if self._stopped:
                return
            self._asked.update(relations)
            thread = threading.Thread(target=self._read, args=(relations,), name="ragd-prefetch", daemon=True)
            self._threads.append(thread)
        thread.start()

    def _read(self, relations: list[str]) -> None:
        began = time.monotonic()
        try:
            with self._store.maintenance() as conn:
                with self._lock:
                    if self._stopped:
                        return
                    self._conns.append(conn)
                try:
                    read = self._store.prefetch(conn, relations)
                finally:
                    with self._lock:
                        self._conns.remove(conn)
            if read:
                log.info("read ahead of an ingest run of %d documents: %s in %.1f s", self._documents,
                         ", ".join(f"{r} ({n} pages)" for r, n in sorted(read.items())), time.monotonic() - began,
                         extra={"read_ahead": read})
        except Exception as exc:  # of any kind: only time depends on it
            log.debug("not read ahead: %s (%s)", ", ".join(relations), exc)

    def close(self) -> None:
        """Wait for the reads (those still going cancelled: the run is over)."""
        with self._lock:
            self._stopped = True
            for conn in self._conns:
                try:
                    conn.cancel_safe(timeout=5)
                except Exception as exc:  # of any kind: the read ends with its connection either way
                    log.debug("read-ahead not cancelled: %s", exc)
        for thread in self._threads:
            thread.join()
