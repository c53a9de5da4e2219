"""BM25 postings in blocks (migration 21): how a block's packed arrays are read and written, and compaction.

A lexical_blocks row holds one term's postings for many chunks: their ordinals (big-endian int4, ascending), term
frequencies (int2) and lengths (int4). Ingest writes one row per term per batch; a retired chunk's postings stay
until compaction rewrites the term's rows into full blocks of live postings, as Lucene's segment merges do.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg

from . import queries

BLOCK = 128  # postings per compacted block: a row of ~1.3 kB stays in its heap page (no TOAST lookup)
COMPACT_PAGE = 2_000  # terms rewritten per transaction

_ORD = np.dtype(">i4")
_TF = np.dtype(">i2")
_LEN = np.dtype(">i4")


def decode(ords: bytes, tfs: bytes, lens: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A block's (or several concatenated blocks') ordinals, term frequencies and lengths, as int32, int16 and int32
    in the machine's byte order (10 bytes a posting, as search keeps them)."""
    return (np.frombuffer(ords, _ORD).astype(np.int32), np.frombuffer(tfs, _TF).astype(np.int16),
            np.frombuffer(lens, _LEN).astype(np.int32))


@dataclass(frozen=True)
class Compacted:
    terms: int  # terms rewritten
    rows_before: int
    rows_after: int
    postings_dropped: int  # postings of chunks no longer active


def _blocks(term: str, ords: np.ndarray, tfs: np.ndarray, lens: np.ndarray) -> Iterator[tuple[Any, ...]]:
    for at in range(0, len(ords), BLOCK):
        o, t, n = ords[at:at + BLOCK], tfs[at:at + BLOCK], lens[at:at + BLOCK]
        yield (term, int(o[0]), int(o[-1]), len(o), int(t.max()), int(n.min()),
               o.astype(_ORD).tobytes(), t.astype(_TF).tobytes(), n.astype(_LEN).tobytes())


def _dead(ords: np.ndarray, alive: np.ndarray) -> np.ndarray:
    """Which ordinals are known dead: below the mask's end and not active in it (or negative: written by hand).
    Ordinals at or past its end were handed out after it was read: kept."""
    dead: np.ndarray = ords < 0
    if len(alive):
        dead |= (ords < len(alive)) & ~alive[np.clip(ords, 0, len(alive) - 1)]
    return dead


def _alive(conn: psycopg.Connection[Any], collection_id: uuid.UUID, *, next_ord: int, counted: int) -> np.ndarray:
    """Which ordinals below next_ord are of active chunks. When as many chunks with postings are active as
    ordinals were ever handed out (`counted`, the statistics' chunk count, equals next_ord), every ordinal is
    live and no posting can be dead: an empty mask says so without reading every active chunk's ordinal (a
    sequential scan of the chunks, seconds at a million, once per compaction)."""
    if counted >= next_ord:
        return np.zeros(0, dtype=bool)
    alive = np.zeros(next_ord, dtype=bool)
    live = np.array([r[0] for r in conn.execute(queries.ACTIVE_ORDS, {"collection_id": collection_id})],
                    dtype=np.int64)
    alive[live[(live >= 0) & (live < len(alive))]] = True
    return alive


def compact(session: Callable[[], AbstractContextManager[psycopg.Connection[Any]]], collection_id: uuid.UUID, *,
            page: int = COMPACT_PAGE) -> Compacted:
    """Rewrite the blocks of every term that needs it: its partial blocks and the blocks holding postings of chunks
    no longer active become full blocks of live postings in ordinal order; its full blocks of live postings stay as
    they are (so a compaction writes about what ingest wrote since the last one). A page of terms per transaction
    (`session()` opens one in the tenant's session), each holding the collection's statistics row: one compaction
    at a time, and no version activated or retired while a page is rewritten."""
    terms = rows_before = rows_after = dropped = 0
    after = ""
    alive: np.ndarray | None = None
    while True:
        with session() as conn:
            row = conn.execute(queries.COMPACT_LOCK, {"collection_id": collection_id}).fetchone()
            if row is None:
                break
            if alive is None:  # once: ordinals are never reused, so one found dead here stays dead
                alive = _alive(conn, collection_id, next_ord=int(row[0]), counted=int(row[1]))
            # (term, postings its blocks hold, its live ones): a term with none dead has only its partial blocks
            # read, as its full blocks stay whatever happens (a frequent term has thousands)
            found = conn.execute(queries.TERMS_TO_COMPACT, {"collection_id": collection_id, "after": after,
                                                            "limit": page}).fetchall()
            if not found:
                conn.execute(queries.COMPACTED, {"collection_id": collection_id})
                break
            todo = [r[0] for r in found]
            posted = {r[0]: int(r[1]) for r in found}
            after = todo[-1]
            read: dict[str, list[tuple[int, bytes, bytes, bytes]]] = {}
            with conn.cursor(binary=True) as cur:
                for term, first, o, t, n in cur.execute(queries.BLOCKS_OF_TERMS, {
                        "collection_id": collection_id, "terms": todo, "block": BLOCK,
                        "whole": [r[0] for r in found if r[1] > r[2]]}):
                    read.setdefault(term, []).append((first, bytes(o), bytes(t), bytes(n)))
            old_terms: list[str] = []
            old_firsts: list[int] = []
            new: list[tuple[Any, ...]] = []
            # each term's count of postings and of partial blocks as the page leaves its blocks (migration 25)
            counts = {term: (posted[term], 0) for term in todo}
            for term in sorted(read):
                pool, gone = [], 0
                for first, o, t, n in read[term]:
                    ords, tfs, lens = decode(o, t, n)
                    dead = _dead(ords, alive)
                    if len(ords) >= BLOCK and not dead.any():
                        continue  # a full block of live postings stays
                    gone += int(dead.sum())
                    pool.append((first, ords[~dead], tfs[~dead], lens[~dead]))
                if len(pool) < 2 and not gone:
                    counts[term] = (posted[term], len(pool))
                    continue
                old_terms += [term] * len(pool)
                old_firsts += [p[0] for p in pool]
                ords, tfs, lens = (np.concatenate([p[i] for p in pool]) for i in (1, 2, 3))
                order = np.argsort(ords, kind="stable")
                rewritten = list(_blocks(term, ords[order], tfs[order], lens[order]))
                counts[term] = (posted[term] - gone, sum(1 for b in rewritten if b[3] < BLOCK))
                new += rewritten
                dropped += gone
                terms += 1
            conn.execute(queries.REPLACE_BLOCKS, {
                "collection_id": collection_id, "terms": old_terms, "firsts": old_firsts,
                "new_terms": [b[0] for b in new], "new_firsts": [b[1] for b in new], "new_lasts": [b[2] for b in new],
                "new_ns": [b[3] for b in new], "new_max_tfs": [b[4] for b in new],
                "new_min_lens": [b[5] for b in new], "new_ords": [b[6] for b in new],
                "new_tfs": [b[7] for b in new], "new_lens": [b[8] for b in new], "checked": list(counts),
                "posted": [c[0] for c in counts.values()], "partial": [c[1] for c in counts.values()]})
            rows_before += len(old_terms)
            rows_after += len(new)
    return Compacted(terms, rows_before, rows_after, dropped)
