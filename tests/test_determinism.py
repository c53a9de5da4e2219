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
