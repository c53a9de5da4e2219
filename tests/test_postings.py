"""BM25 postings kept in the process between searches (retrieve/postings.py): the same scores as reading the blocks,
through every way a collection's blocks change, and a cache bounded in bytes."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

import ragd
from ragd.retrieve.postings import Postings, PostingsCache, State

WORDS = "amber basalt cobalt dune ember fjord garnet harbor indigo jasper kelp lichen".split()
ASKED = ["amber basalt note3", "cobalt fjord note1 amber amber", "lichen kelp dune", "revised garnet harbor"]


def _docs(start: int, stop: int, extra: str = "") -> list[dict[str, Any]]:
    return [{"id": f"d{i:03d}", "text": " ".join(WORDS[(i * k) % 12] for k in range(1, 9)) + f" note{i % 7} item{i}"
             + extra + "."} for i in range(start, stop)]


@pytest.fixture
def kept_and_plain(settings: Any) -> Iterator[tuple[ragd.Ragd, ragd.Ragd]]:
    """Two clients of one database: one keeping every term's postings, one reading the blocks every time; no result
    cache, and compaction only when asked."""
    quiet = {"cache_ttl_s": 0, "compact_after_blocks": 0}
    kept = ragd.connect(settings=settings.model_copy(update={**quiet, "lexical_cache_min_postings": 1}))
    plain = ragd.connect(settings=settings.model_copy(update={**quiet, "lexical_cache_mb": 0}))
    try:
        yield kept, plain
    finally:
        kept.close()
        plain.close()


def test_kept_postings_score_as_the_blocks_do_as_the_collection_changes(
        kept_and_plain: tuple[ragd.Ragd, ragd.Ragd], name: str) -> None:
    """Searches through kept postings return the same chunks with bit-identical scores as searches reading every
    block, after each change of the blocks: new runs (the kept terms grow by the blocks written since), replaced
    and deleted documents (their postings stay, dropped when mapped back), a compaction after runs no search saw
    (its blocks merge postings from before and after what was kept: read again whole), another tenant's
    collection of the same name (never served from this one's)."""
    kept, plain = kept_and_plain
    cols = (kept.collection(name), plain.collection(name))
    other = kept.collection(name, tenant="other-" + name)
    other.ingest(documents=[{"id": "o1", "text": "amber basalt cobalt of the other tenant."}])

    def same() -> None:
        for q in ASKED:
            got, expected = ([(h.chunk_id, h.lexical_score) for h in c.search(q, k=20, fusion="lexical")]
                             for c in cols)
            assert got == expected and got, q
        assert [h.external_id for h in other.search("amber basalt", k=5, fusion="lexical")] == ["o1"]

    def info() -> tuple[int, int, int]:
        return kept.postings.info.hits, kept.postings.info.grown, kept.postings.info.misses

    cols[0].ingest(documents=_docs(0, 50))
    cols[0].ingest(documents=_docs(50, 100))
    same()
    first = info()
    assert first[2] > 0 and kept.postings.info.bytes > 0  # read whole, then kept
    same()
    assert info()[0] > first[0] and info()[2] == first[2]  # served whole from what was kept
    cols[0].ingest(documents=_docs(100, 150))
    before = info()
    same()
    assert info()[1] > before[1] and info()[2] == before[2]  # grown by the run's blocks, nothing read whole
    cols[0].ingest(documents=_docs(0, 30, " revised amber"))  # replaced: new ordinals
    for i in range(140, 150):
        cols[0].delete(f"d{i:03d}")
    same()
    cols[0].ingest(documents=_docs(150, 200))  # runs no search sees before the compaction merges them
    cols[0].ingest(documents=_docs(200, 230))
    before = info()
    done = cols[0].compact()
    assert done["rows_after"] < done["rows_before"] and done["postings_dropped"] > 0
    same()
    assert info()[2] > before[2]  # a compaction rewrote the blocks: read again whole
    cols[0].ingest(documents=_docs(230, 260))
    same()


def _postings(ords: list[int]) -> Postings:
    return Postings(np.array(ords, dtype=np.int32), np.ones(len(ords), dtype=np.int16),
                    np.full(len(ords), 7, dtype=np.int32))


def test_the_cache_answers_by_the_state_it_kept_and_stays_within_its_bytes() -> None:
    """A term kept at next ordinal 10 serves a read at 10 whole, a read at 6 (an older snapshot, a replica behind)
    with its ordinals below 6, a read at 14 as what it has plus the blocks from 10; nothing after a compaction or
    for another creation; the least recently used terms go once the bytes are over the bound."""
    made = datetime(2026, 1, 1, tzinfo=UTC)
    cache = PostingsCache(max_bytes=3 * 18 * 5, min_postings=2)  # three terms of five postings, 18 bytes each
    col = uuid.uuid4()
    at10 = State(made, 0, 10)
    cache.put(("t", col, "a"), at10, _postings([0, 2, 5, 8, 9]))
    whole, since = cache.lookup(("t", col, "a"), at10)
    assert since is None and whole is not None and whole.ords.tolist() == [0, 2, 5, 8, 9]
    older, since = cache.lookup(("t", col, "a"), State(made, 0, 6))
    assert since is None and older is not None and older.ords.tolist() == [0, 2, 5]
    part, since = cache.lookup(("t", col, "a"), State(made, 0, 14))
    assert since == 10 and part is not None and part.ords.tolist() == [0, 2, 5, 8, 9]
    assert cache.lookup(("t", col, "a"), State(made, 1, 10)) == (None, None)  # compacted since
    assert cache.lookup(("t", col, "a"), State(datetime(2026, 2, 1, tzinfo=UTC), 0, 10)) == (None, None)
    assert cache.lookup(("u", col, "a"), at10) == (None, None)  # another tenant's key
    assert not cache.keeps(1) and cache.keeps(2) and not PostingsCache(0, 1).keeps(10)
    for term in "bcd":
        cache.put(("t", col, term), at10, _postings([1, 3, 4, 6, 7]))
    assert cache.info.terms == 3 and cache.info.bytes == 270
    assert cache.lookup(("t", col, "a"), at10) == (None, None)  # the least recently used went
    cache.lookup(("t", col, "b"), at10)  # used: now the most recent
    cache.put(("t", col, "e"), at10, _postings([1, 2, 3, 4, 5]))
    assert cache.lookup(("t", col, "c"), at10) == (None, None)
    assert cache.lookup(("t", col, "b"), at10)[0] is not None
    cache.put(("t", col, "huge"), at10, _postings(list(range(40))))  # larger than the bound: not kept
    assert cache.lookup(("t", col, "huge"), at10) == (None, None) and cache.info.bytes <= 270
    assert _postings([3, 9, 12]).between(5, 12).ords.tolist() == [9]
    normalised = _postings([1, 2]).normalised(50.0, 1.2, 0.75)
    assert normalised.tolist() == pytest.approx([2.2 / (1 + 1.2 * (1 - 0.75 + 0.75 * 7 / 50.0))] * 2, abs=1e-12)


def test_scores_are_the_formula_over_every_block_bit_for_bit_read_or_kept(
        kept_and_plain: tuple[ragd.Ragd, ragd.Ragd], name: str) -> None:
    """The sums bm25_scores gives, from postings read or kept (with their normalisation kept), are bit for bit the
    BM25 expression evaluated at once over every block of the query's terms, rarest term first: a term's part is
    its normalised tf times its weight in the same order of operations, so keeping either changes no score."""
    from ragd.retrieve import legs
    from ragd.store import blocks, queries
    from ragd.types import Filters

    kept, _ = kept_and_plain
    col = kept.collection(name)
    col.ingest(documents=_docs(0, 120))
    col.ingest(documents=_docs(0, 40, " revised amber"))
    for rnd in range(2):  # read, then kept
        for q in ASKED:
            with kept.store.tenant(col.tenant) as conn:
                plan = legs.plan_lexical(conn, collection_id=col.collection_id, query=q, limit=10,
                                         filters=Filters())
                _, sums = legs.bm25_scores(conn, plan, kept.postings, col.tenant)
                p = plan.params
                rank = {t: i for i, t in enumerate(p["terms"])}
                with conn.cursor(binary=True) as cur:
                    rows = sorted(cur.execute(queries.LEXICAL_BLOCKS, {"collection_id": col.collection_id,
                                                                       "terms": p["terms"]}),
                                  key=lambda r: rank[r[0]])
            ords, tfs, lens = blocks.decode(b"".join(r[1] for r in rows), b"".join(r[2] for r in rows),
                                            b"".join(r[3] for r in rows))
            tf, length = tfs.astype(np.float64), lens.astype(np.float64)
            length *= legs.BM25_K1 * legs.BM25_B / p["avg_len"]
            length += legs.BM25_K1 * (1 - legs.BM25_B)
            length += tf
            parts = tf * (legs.BM25_K1 + 1)
            parts /= length
            parts *= np.repeat(np.array([p["idfs"][rank[r[0]]] for r in rows]), [len(r[1]) // 4 for r in rows])
            assert sums is not None and np.array_equal(sums, np.bincount(ords, weights=parts)), (rnd, q)
    assert kept.postings.info.hits > 0
