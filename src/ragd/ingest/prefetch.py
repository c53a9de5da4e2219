"""Reading the indexes an ingest run will probe in order, before the run probes them at random.

Every document of a run looks its keys up in indexes that grow with the store: its 32 LSH band keys in the
signatures' GIN index, its external id, its content hash, its chunks' hashes in the embedding cache, and each chunk's
insert walks the collection's HNSW graph. The keys are hashes, so a batch's lookups land on pages all over each
index, and a run of 20k documents into a million touches nearly every page of them. When those pages are not in
memory (after a server start, or after searches pushed them out), each costs a random read: on this machine 0.22 ms
a page against 7 us a page read in order (1.1 GB/s), so the first run after a start at 1.27M documents spent 43 s of
its 127 s of statements on band lookups that take 13 s with the index in memory.

So a run first estimates, for each of those indexes, the share of its pages its lookups will touch (n random probes
into p pages touch 1 - e^(-n/p) of them) and asks the server to read the indexes where that share is at least
`SHARE` in order (pg_prewarm's `prefetch` mode: the kernel reads them ahead while the run extracts and embeds its
first batch; pages already in shared buffers are skipped). A small run into a large store touches few pages and
reads nothing ahead; neither does a run whose indexes are small (`ingest_prefetch_min_pages` in all). Nothing
depends on it but time: a server without pg_prewarm, or a prefetch that fails, leaves the run as it was."""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..store import queries
from . import dedupe

log = logging.getLogger("ragd.ingest")

SHARE = 0.25  # read an index in order once a run's lookups will touch this share of its pages (see module doc)
HNSW_PAGES_PER_CHUNK = 64  # an insert's search visits about ef_construction elements, each on its own page
SIGNATURES = "document_minhash"  # the stored signatures (each candidate's row is read from the table)


def expected_share(probes: int, pages: int) -> float:
    """The expected share of an index's pages touched by `probes` lookups of random keys (each page equally likely:
    the keys are hashes)."""
    if pages <= 0:
        return 0.0
    return 1.0 - math.exp(-probes / pages)


def probes(documents: int, *, near_duplicates: bool, hnsw: str | None) -> dict[str, int]:
    """The lookups a run of `documents` documents makes in each index it probes at random (a document has at least
    one chunk: chunks are counted as documents, a low estimate)."""
    out = {"documents_external_id": documents, "document_versions_content_hash": documents,
           "embedding_cache_pkey": documents}
    if near_duplicates:
        out["document_minhash_bands"] = documents * dedupe.BANDS
    if hnsw is not None:
        out[hnsw] = documents * HNSW_PAGES_PER_CHUNK
    return out


def chosen(pages: Mapping[str, int], lookups: Mapping[str, int], min_pages: int) -> list[str]:
    """The indexes worth reading in order (sorted by name): those whose touched share reaches SHARE, when together
    they hold at least `min_pages` pages (below that, random reads of all of them cost a fraction of a second)."""
    picked = sorted(r for r, n in lookups.items() if expected_share(n, pages.get(r, 0)) >= SHARE)
    return picked if picked and sum(pages[r] for r in picked) >= min_pages else []


@dataclass
class Prefetch:
    """A run's read-ahead: indexes asked for in a thread before the run's first batch; the signatures' table once
    the run's first batches show its near-duplicate check will read a quarter of it (`signatures_read`); each
    read joined (or cancelled) at the run's end. `pages`: the pages of each relation asked for."""
    pages: dict[str, int] = field(default_factory=dict)
    _store: Any = None
    _sizes: dict[str, int] = field(default_factory=dict)
    _min_pages: int = 0
    _documents: int = 0
    _checked: int = 0
    _signatures: int = 0
    _threads: list[threading.Thread] = field(default_factory=list)
    _conns: list[Any] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stopped: bool = False

    @classmethod
    def start(cls, col: Any, documents: int, near_threshold: float, conn: Any) -> Prefetch:
        """Decide on `conn` (the run's opening transaction) and start reading ahead on a connection of the store's
        own (the schema owner's: pg_prewarm needs the indexes' owner)."""
        self = cls()
        settings = col.settings
        if not settings.ingest_prefetch or documents <= 0:
            return self
        lookups = probes(documents, near_duplicates=near_threshold < 1.0,
                         hnsw=queries.hnsw_index_name(col.collection_id))
        self._sizes = dict(conn.execute(queries.RELATION_PAGES, {"names": sorted([*lookups, SIGNATURES])}).fetchall())
        self._store, self._min_pages, self._documents = col.store, settings.ingest_prefetch_min_pages, documents
        self._spawn(chosen(self._sizes, lookups, self._min_pages))
        return self

    def signatures_read(self, documents: int, rows: int) -> None:
        """A batch of `documents` documents read `rows` stored signatures (those sharing a band with one of them:
        how many depends on the collection, so it is measured). Once the run's documents left, at the rate seen so
        far, will read a quarter of the signatures' table, it is read ahead."""
        self._checked += documents
        self._signatures += rows
        if self._store is None or SIGNATURES in self.pages or not 0 < self._checked < self._documents:
            return
        expected = (self._documents - self._checked) * self._signatures // self._checked
        self._spawn(chosen(self._sizes, {SIGNATURES: expected}, self._min_pages))

    def _spawn(self, relations: list[str]) -> None:
        if not relations:
            return
        with self._lock:
            if self._stopped:
                return
            self.pages.update(dict.fromkeys(relations, 0))  # (asked for: not asked again)
            thread = threading.Thread(target=self._read, args=(relations,), name="ragd-prefetch", daemon=True)
            self._threads.append(thread)
        thread.start()

    def _read(self, relations: list[str]) -> None:
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
            with self._lock:
                self.pages.update(read)
        except Exception as exc:  # of any kind: only time depends on it
            log.debug("not read ahead: %s (%s)", ", ".join(relations), exc)

    def close(self) -> None:
        """Wait for the reads (those still going cancelled: the run is over). Relations whose read did not finish
        are left out of `pages`."""
        with self._lock:
            self._stopped = True
            for conn in self._conns:
                try:
                    conn.cancel_safe(timeout=5)
                except Exception as exc:  # of any kind: the read ends with its connection either way
                    log.debug("read-ahead not cancelled: %s", exc)
        for thread in self._threads:
            thread.join()
        with self._lock:
            self.pages = {r: n for r, n in self.pages.items() if n}
