"""BM25 postings of frequent terms kept in the process between searches, exact at every read.

At a million chunks a query of common words reads hundreds of thousands of postings: a frequent term's thousands of
blocks cost the server 20-40 ms to gather and send, every time, for arrays that change only when the collection is
written. So the decoded arrays of terms with many postings are kept, per (tenant, collection, term), with what the
read saw of the collection: its next ordinal (`upto`), the count of compactions' rewrites and when it was made.

What makes them exact (migration 27): between two reads with the same rewrites count and creation time, a term's
blocks only grew, and only at ordinals at or past the earlier read's next ordinal (ingest takes a batch's ordinals
from the counter in the transaction that writes its blocks; retiring leaves postings in place; only a compaction
rewrites blocks below the counter, and it counts each rewrite). So a search whose statistics read next ordinal N
  * uses a kept term whole when it was read at N, and its ordinals below N when it was read later (a replica
    behind, or a snapshot older than another search's): no posting at or past N exists in this search's state;
  * adds the blocks starting at or past the kept `upto` when it was read earlier, and keeps the result at N;
  * reads the term again when a compaction ran, or the collection was made again, since it was kept.
Postings of chunks retired since stay in the arrays, as they stay in the blocks until a compaction: the search
drops them when it maps ordinals back to active chunks.

Tenants never share an entry (the key starts with the tenant), and an entry is only used after the search's own
statistics read, in the tenant's session, found the collection. The cache is bounded in bytes and evicts the least
recently used terms; a term with fewer postings than `min_postings` is not kept (its blocks are few and cheap).
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np


@dataclass(frozen=True)
class Postings:
    """One term's postings: ordinals, term frequencies and chunk lengths, in native integers; and the last length
    normalisation computed from them (`normalised`), which every search repeats until the collection's average
    length changes."""

    ords: np.ndarray  # int32
    tfs: np.ndarray  # int16
    lens: np.ndarray  # int32
    _last: list[tuple[tuple[float, float, float], np.ndarray]] = field(default_factory=list, compare=False,
                                                                        repr=False)

    @property
    def nbytes(self) -> int:
        """Its bytes, the normalisation's (8 a posting) counted whether computed yet or not."""
        return int(self.ords.nbytes + self.tfs.nbytes + self.lens.nbytes) + 8 * len(self.ords)

    def normalised(self, avg_len: float, k1: float, b: float) -> np.ndarray:
        """tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avg_len)) per posting, in float64, evaluated in that
        order (so a BM25 part is this times the term's weight, bit for bit as when computed at once); the last one
        is kept with the postings (threads may compute it at once: each gets the same values)."""
        key = (avg_len, k1, b)
        last = self._last[:1]
        if last and last[0][0] == key:
            return last[0][1]
        tf = self.tfs.astype(np.float64)
        length = self.lens.astype(np.float64)
        length *= k1 * b / avg_len
        length += k1 * (1 - b)
        length += tf
        tf *= k1 + 1
        tf /= length
        self._last[:] = [(key, tf)]
        return tf

    def below(self, upto: int) -> Postings:
        """The postings of ordinals below `upto` (all of them when none is at or past it)."""
        if not len(self.ords) or int(self.ords.max()) < upto:
            return self
        keep = self.ords < upto
        return Postings(self.ords[keep], self.tfs[keep], self.lens[keep])

    def between(self, since: int, upto: int) -> Postings:
        """The postings of ordinals in [since, upto)."""
        keep = (self.ords >= since) & (self.ords < upto)
        return self if keep.all() else Postings(self.ords[keep], self.tfs[keep], self.lens[keep])

    def then(self, more: Postings) -> Postings:
        if not len(more.ords):
            return self
        return Postings(np.concatenate([self.ords, more.ords]), np.concatenate([self.tfs, more.tfs]),
                        np.concatenate([self.lens, more.lens]))


@dataclass(frozen=True)
class State:
    """What a read saw of a collection's blocks: when it was made, its compactions' rewrites, its next ordinal."""

    created: datetime
    rewrites: int
    upto: int

    def same_blocks(self, other: State) -> bool:
        return self.created == other.created and self.rewrites == other.rewrites


@dataclass
class PostingsInfo:
    hits: int = 0  # terms served whole from the cache
    grown: int = 0  # terms served from the cache plus the blocks written since
    misses: int = 0  # terms read whole (not kept, or no longer valid)
    bytes: int = 0
    terms: int = 0


Key = tuple[str, uuid.UUID, str]


class PostingsCache:
    def __init__(self, max_bytes: int, min_postings: int):
        self.max_bytes = max_bytes
        self.min_postings = min_postings
        self._data: OrderedDict[Key, tuple[State, Postings]] = OrderedDict()
        self._lock = threading.Lock()
        self.info = PostingsInfo()

    def keeps(self, posted: int) -> bool:
        """Whether a term with this many postings is worth keeping."""
        return self.max_bytes > 0 and posted >= self.min_postings

    def lookup(self, key: Key, state: State) -> tuple[Postings | None, int | None]:
        """(postings, None): the term's postings in `state`, whole; (kept, since): the kept postings, still valid,
        which lack the blocks starting at or past `since`; (None, None): nothing usable is kept."""
        with self._lock:
            entry = self._data.get(key)
            if entry is None or not entry[0].same_blocks(state):
                return None, None
            self._data.move_to_end(key)
        kept_state, kept = entry
        if kept_state.upto >= state.upto:
            return kept.below(state.upto), None
        return kept, kept_state.upto

    def put(self, key: Key, state: State, postings: Postings) -> None:
        """Keep a term's postings as of `state` (all of its postings below state.upto, and none at or past it)."""
        size = postings.nbytes
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self.info.bytes -= old[1].nbytes
            self._data[key] = (state, postings)
            self.info.bytes += size
            while self.info.bytes > self.max_bytes:
                _, (_, gone) = self._data.popitem(last=False)
                self.info.bytes -= gone.nbytes
            self.info.terms = len(self._data)

    def count(self, *, hits: int = 0, grown: int = 0, misses: int = 0) -> None:
        with self._lock:
            self.info.hits += hits
            self.info.grown += grown
            self.info.misses += misses
