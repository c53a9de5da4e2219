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
COMPACT_SLACK = 1  # a term is rewritten when it holds more rows than full blocks would take plus this many

_ORD = np.dtype(">i4")
_TF = np.dtype(">i2")
_LEN = np.dtype(">i4")


def decode(ords: bytes, tfs: bytes, lens: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A block's (or several concatenated blocks') ordinals, term frequencies and lengths, as native integers."""
    return (np.frombuffer(ords, _ORD).astype(np.int64), np.frombuffer(tfs, _TF).astype(np.float64),
            np.frombuffer(lens, _LEN).astype(np.float64))


@dataclass(frozen=True)
class Compacted:
    terms: int  # terms rewritten
    rows_before: int
    rows_after: int
    postings_dropped: int  # postings of chunks no longer active

    def as_dict(self) -> dict[str, int]:
        return {"terms": self.terms, "rows_before": self.rows_before, "rows_after": self.rows_after,
                "postings_dropped": self.postings_dropped}


def _blocks(term: str, ords: np.ndarray, tfs: np.ndarray, lens: np.ndarray) -> Iterator[tuple[Any, ...]]:
    for at in range(0, len(ords), BLOCK):
        o, t, n = ords[at:at + BLOCK], tfs[at:at + BLOCK], lens[at:at + BLOCK]
        yield (term, int(o[0]), int(o[-1]), len(o), int(t.max()), int(n.min()),
               o.astype(_ORD).tobytes(), t.astype(_TF).tobytes(), n.astype(_LEN).tobytes())


def compact(session: Callable[[], AbstractContextManager[psycopg.Connection[Any]]], collection_id: uuid.UUID, *,
            page: int = COMPACT_PAGE) -> Compacted:
    """Rewrite the blocks of every term that needs it: postings of chunks no longer active dropped, the rest in
    ordinal order in full blocks. A page of terms per transaction (`session()` opens one in the tenant's session);
    rows written meanwhile by ingest are left as they are (only the rows read are replaced)."""
    with session() as conn:
        live = np.array([r[0] for r in conn.execute(queries.ACTIVE_ORDS, {"collection_id": collection_id})],
                        dtype=np.int64)
    # ordinals are never reused: one found dead now stays dead, so the snapshot above may only keep too many
    alive = np.zeros(int(live.max()) + 1 if len(live) else 0, dtype=bool)
    alive[live] = True
    terms = rows_before = rows_after = dropped = 0
    after = ""
    while True:
        with session() as conn:
            todo = [r[0] for r in conn.execute(queries.TERMS_TO_COMPACT, {
                "collection_id": collection_id, "after": after, "block": BLOCK, "slack": COMPACT_SLACK,
                "limit": page})]
            if not todo:
                break
            after = todo[-1]
            read: dict[str, list[tuple[int, bytes, bytes, bytes]]] = {}
            with conn.cursor(binary=True) as cur:
                for term, first, o, t, n in cur.execute(queries.BLOCKS_OF_TERMS,
                                                        {"collection_id": collection_id, "terms": todo}):
                    read.setdefault(term, []).append((first, bytes(o), bytes(t), bytes(n)))
            old_terms: list[str] = []
            old_firsts: list[int] = []
            new: list[tuple[Any, ...]] = []
            for term in sorted(read):
                rows = read[term]
                old_terms += [term] * len(rows)
                old_firsts += [first for first, *_ in rows]
                ords, tfs, lens = decode(b"".join(r[1] for r in rows), b"".join(r[2] for r in rows),
                                         b"".join(r[3] for r in rows))
                keep = (ords < len(alive)) & alive[np.minimum(ords, max(len(alive) - 1, 0))] if len(alive) else \
                    np.zeros(len(ords), dtype=bool)
                dropped += int(len(ords) - keep.sum())
                order = np.argsort(ords[keep], kind="stable")
                new += list(_blocks(term, ords[keep][order], tfs[keep][order], lens[keep][order]))
            conn.execute(queries.REPLACE_BLOCKS, {
                "collection_id": collection_id, "terms": old_terms, "firsts": old_firsts,
                "new_terms": [b[0] for b in new], "new_firsts": [b[1] for b in new], "new_lasts": [b[2] for b in new],
                "new_ns": [b[3] for b in new], "new_max_tfs": [b[4] for b in new],
                "new_min_lens": [b[5] for b in new], "new_ords": [b[6] for b in new],
                "new_tfs": [b[7] for b in new], "new_lens": [b[8] for b in new]})
            terms += len(read)
            rows_before += len(old_terms)
            rows_after += len(new)
    return Compacted(terms, rows_before, rows_after, dropped)
