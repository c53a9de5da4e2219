"""The same request gives identical ids and order: twice in a row, and on a freshly built database."""

from __future__ import annotations

from pathlib import Path

import ragd
from ragd.config import Settings

from .conftest import SAMPLES

QUERIES = ["parental leave Germany", "per diem London hotel", "lost laptop", "learning budget", "sick"]


def snapshot(col: ragd.Collection) -> list[list[tuple[str, str, int, float]]]:
    out = []
    for q in QUERIES:
        for fusion in ("rrf", "weighted", "vector", "lexical"):
            out.append([(str(h.chunk_id), str(h.doc_id), h.chunk_index, round(h.score, 9))
                        for h in col.search(q, k=8, fusion=fusion)])
    return out


def build(settings: Settings, url: str, name: str) -> list[list[tuple[str, str, int, float]]]:
    client = ragd.connect(url, settings=settings.model_copy(update={"cache_ttl_s": 0}))  # compute every time
    try:
        col = client.collection(name)
        report = col.ingest([SAMPLES])
        assert not report.failed
        first = snapshot(col)
        assert snapshot(col) == first  # the same request twice
        return first
    finally:
        client.close()


def test_fresh_database_gives_identical_ids_and_order(settings: Settings, base_url: str,
                                                      fresh_database: str, name: str) -> None:
    one = build(settings, base_url, name)
    two = build(settings, fresh_database, name)
    assert one == two
    assert all(len(r) > 0 for r in one)


def test_chunking_is_stable(tmp_path: Path) -> None:
    text = (SAMPLES / "parental-leave.md").read_text()
    assert ragd.chunk(text) == ragd.chunk(text)


def test_minhash_signatures_are_pinned_and_equal_the_plain_shingle_computation() -> None:
    """Stored signatures are compared with new ones run after run, so they must not move: fixed values for one
    text, and on texts with accents, CJK, ligatures, fewer than five words and more shingles than one block, the
    same values as datasketch's MinHash (affine32) over the plain five-words-joined shingles."""
    from datasketch import MinHash

    from ragd.ingest import dedupe

    sig = dedupe.signature("The quick brown fox jumps over the lazy dog, twice: the quick brown fox jumps again.")
    assert [int(v) for v in sig[:6]] == [126542272, 158935461, 112788019, 729940982, 1265035740, 208335525]
    assert dedupe.band_keys(sig)[:2] == [-9014675978610371440, 7635462042783292457]
    # stored 4 bytes a value; stores written before hold 8 bytes a value, read as the same values
    stored = dedupe.to_bytes(sig)
    assert stored[:8] == (126542272).to_bytes(4, "little") + (158935461).to_bytes(4, "little")
    assert len(stored) == 4 * dedupe.NUM_PERM and (dedupe.from_bytes(stored) == sig).all()
    assert (dedupe.from_bytes(sig.astype("<u8").tobytes()) == sig).all()
    assert dedupe.from_bytes(stored[:-1]) is None and dedupe.from_bytes(b"") is None

    def plain(text: str) -> list[int]:
        words = [w.lower() for w in dedupe._WORD.findall(text)]
        n = dedupe.SHINGLE
        shingles = {" ".join(words[i : i + n]).encode() for i in range(max(1, len(words) - n + 1))}
        m = MinHash(num_perm=dedupe.NUM_PERM, seed=dedupe.SEED, scheme="affine32")  # a test dependency only
        m.update_batch(sorted(shingles))
        return [int(v) for v in m.hashvalues]

    texts = ["", "one", "one two three four five", "one two three four five six",
             "Straße ÉCOLE naïve café résumé über 北京 大学 x y z", "İstanbul ǅ ﬁnance   spaced\twords\nand lines",
             (SAMPLES / "parental-leave.md").read_text(encoding="utf-8"),
             " ".join(f"word{i % 9000} w{i % 7}" for i in range(12000))]  # > one block of shingles
    for text in texts:
        assert [int(v) for v in dedupe.signature(text)] == plain(text), text
