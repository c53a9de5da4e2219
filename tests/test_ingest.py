"""Ingestion against the real database: idempotence, versions, delete, dedupe, bad input, BM25 statistics."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

import psycopg
import pytest

import ragd
from ragd.store import blocks


def live_postings(client: ragd.Ragd, col: ragd.Collection) -> tuple[dict[tuple[str, int], tuple[int, int]], int]:
    """The blocks' postings of active chunks, as (term, ordinal) -> (tf, length), and how many postings of chunks no
    longer active they still hold. A live posting written twice fails here."""
    from ragd.store.blocks import decode

    with client.store.tenant(col.tenant) as conn:
        active = {r[0] for r in conn.execute("SELECT lex_ord FROM chunks WHERE collection_id = %s AND is_active",
                                            (col.collection_id,))}
        live: dict[tuple[str, int], tuple[int, int]] = {}
        dead = 0
        with conn.cursor(binary=True) as cur:
            for term, o, t, n, first, last, max_tf, min_len in cur.execute(
                    "SELECT term, ords, tfs, lens, first_ord, last_ord, max_tf, min_len FROM lexical_blocks "
                    "WHERE collection_id = %s", (col.collection_id,)):
                ords, tfs, lens = decode(o, t, n)
                assert list(ords) == sorted(ords) and (ords[0], ords[-1]) == (first, last)
                assert (tfs.max(), lens.min()) == (max_tf, min_len)  # the block-max bound's inputs
                for ord_, tf, length in zip(ords.tolist(), tfs.tolist(), lens.tolist()):
                    if ord_ in active:
                        assert (term, ord_) not in live, (term, ord_)
                        live[(term, ord_)] = (int(tf), int(length))
                    else:
                        dead += 1
    return live, dead


def lexical_stats_consistent(client: ragd.Ragd, col: ragd.Collection) -> None:
    """The maintained BM25 statistics equal a recount over the active chunks' lexemes; the blocks hold each active
    chunk's postings exactly once; no LSH band key outlives its signature (no foreign key cleans up after it)."""
    with client.store.tenant(col.tenant) as conn:
        stats = conn.execute("SELECT n_chunks, total_len FROM lexical_stats WHERE collection_id = %s",
                             (col.collection_id,)).fetchone()
        expected: dict[tuple[str, int], tuple[int, int]] = {}
        lengths: dict[int, int] = {}
        for ord_, term, tf in conn.execute(
                "SELECT c.lex_ord, t.lexeme, COALESCE(cardinality(t.positions), 1) FROM chunks c "
                "CROSS JOIN LATERAL unnest(c.lexemes) t WHERE c.collection_id = %s AND c.is_active",
                (col.collection_id,)):
            expected[(term, ord_)] = (tf, 0)
            lengths[ord_] = lengths.get(ord_, 0) + tf
        expected = {k: (tf, lengths[k[1]]) for k, (tf, _) in expected.items()}
        dfs = dict(conn.execute("SELECT term, df FROM lexical_terms WHERE collection_id = %s AND df <> 0",
                                (col.collection_id,)).fetchall())
        orphans = conn.execute(  # every signature carries its 32 band keys
            "SELECT count(*) FROM document_minhash m WHERE m.collection_id = %(c)s "
            "AND (m.bands IS NULL OR cardinality(m.bands) <> 32)", {"c": col.collection_id}).fetchone()[0]
        miscounted = conn.execute(  # each term counts its blocks' postings and partial blocks (migration 25)
            "SELECT b.term, t.term, b.posted, t.posted, b.partial, t.partial "
            "FROM (SELECT term, sum(n)::int AS posted, (count(*) FILTER (WHERE n < %(block)s))::int AS partial "
            "      FROM lexical_blocks WHERE collection_id = %(c)s GROUP BY term) b "
            "FULL JOIN (SELECT term, posted, partial FROM lexical_terms WHERE collection_id = %(c)s) t "
            "ON t.term = b.term WHERE t.term IS NULL "
            "OR (COALESCE(b.posted, 0), COALESCE(b.partial, 0)) <> (t.posted, t.partial) LIMIT 5",
            {"c": col.collection_id, "block": blocks.BLOCK}).fetchall()
    live, _ = live_postings(client, col)
    assert orphans == 0
    assert miscounted == []
    assert tuple(stats) == (len(lengths), sum(lengths.values()))
    assert live == expected
    recount: dict[str, int] = {}
    for term, _ in expected:
        recount[term] = recount.get(term, 0) + 1
    assert dfs == recount


def ids_and_contents(col: ragd.Collection, query: str, **kw: Any) -> list[tuple[str, str]]:
    return [(str(h.chunk_id), h.content) for h in col.search(query, **kw)]


def test_reingest_unchanged_is_a_noop(client: ragd.Ragd, name: str, tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Title\n\nAlpha beta gamma.\n\n## Part\n\nDelta epsilon.\n")
    (tmp_path / "b.txt").write_text("Zeta eta theta.\n")
    col = client.collection(name)
    first = col.ingest([tmp_path])
    assert first.count("ingested") == 2 and not first.failed
    before = ids_and_contents(col, "alpha delta zeta", k=10)
    second = col.ingest([tmp_path])
    assert second.count("unchanged") == 2 and second.count("ingested") == 0
    assert ids_and_contents(col, "alpha delta zeta", k=10) == before
    with client.store.tenant(col.tenant) as conn:
        versions = conn.execute("SELECT count(*) FROM document_versions v JOIN documents d USING (doc_id) "
                                "WHERE d.collection_id = %s", (col.collection_id,)).fetchone()[0]
        runs = conn.execute("SELECT status FROM ingestion_runs WHERE collection_id = %s",
                            (col.collection_id,)).fetchall()
    assert versions == 2
    assert [r[0] for r in runs] == ["succeeded", "succeeded"]
    lexical_stats_consistent(client, col)


def test_new_version_hides_the_old_one(client: ragd.Ragd, name: str) -> None:
    col = client.collection(name)
    col.ingest(documents=[{"id": "policy", "text": "Travel budget is 100 euros per night."},
                          {"id": "other", "text": "Unrelated cafeteria menu."}])
    report = col.ingest(documents=[{"id": "policy", "text": "Travel budget is 150 euros per night."}])
    assert report.count("ingested") == 1
    contents = [h.content for h in col.search("travel budget euros night", k=10)]
    assert any("150 euros" in c for c in contents)
    assert not any("100 euros" in c for c in contents)
    lexical_only = [h.content for h in col.search("100", k=10, fusion="lexical")]
    assert not any("100 euros" in c for c in lexical_only)
    doc = col.document("policy")
    assert [(v["version_label"], v["is_active"]) for v in doc["versions"]] == [("v1", False), ("v2", True)]
    # going back to the first content re-activates the stored version without embedding again
    back = col.ingest(documents=[{"id": "policy", "text": "Travel budget is 100 euros per night."}])
    assert back.count("updated") == 1
    assert any("100 euros" in h.content for h in col.search("travel budget", k=5))
    lexical_stats_consistent(client, col)


def test_replaced_deleted_and_reactivated_chunks_score_exactly_before_and_after_compaction(
        client: ragd.Ragd, name: str) -> None:
    """Postings of replaced and deleted documents stay in their blocks until compaction; search drops them (a chunk
    re-activated gets a new ordinal, so its old postings never count twice) and equals a reference BM25 over the
    active chunks before and after `compact`, which leaves full blocks of live postings only."""
    from .test_retrieve import _active_lexemes, _query_terms, _reference_bm25

    words = "amber basalt cobalt dune ember fjord garnet harbor indigo jasper kelp lichen".split()
    docs = [{"id": f"d{i:03d}", "text": " ".join(words[(i * k) % 12] for k in range(1, 9)) + f" note{i % 7} item{i}."}
            for i in range(300)]
    col = client.collection(name)
    for start in range(0, 300, 50):  # six runs: six blocks per common term
        col.ingest(documents=docs[start:start + 50])
    col.ingest(documents=[{**d, "text": d["text"] + " revised amber"} for d in docs[:60]])  # 60 replaced
    col.ingest(documents=docs[:20])  # 20 of them back to their first version: re-activated, new ordinals
    for d in docs[280:]:
        col.delete(str(d["id"]))
    live, dead = live_postings(client, col)
    assert dead > 0  # the replaced and deleted versions' postings are still there
    lexical_stats_consistent(client, col)

    def top(query: str) -> list[tuple[object, float]]:
        return [(h.chunk_id, h.lexical_score) for h in col.search(query, k=20, fusion="lexical")]

    asked = ["amber revised note3", "cobalt fjord note1 amber amber", "lichen kelp"]
    before = {q: top(q) for q in asked}
    for q in asked:
        expected = _reference_bm25(_active_lexemes(client, col), _query_terms(client, col, q))[:20]
        assert [s for _, s in before[q]] == pytest.approx([s for _, s in expected], abs=1e-6), q
        cut = expected[-1][1]
        assert {c for c, s in before[q] if s > cut + 1e-6} == {c for c, s in expected if s > cut + 1e-6}, q
    with client.store.tenant(col.tenant) as conn:
        rows = conn.execute("SELECT count(*) FROM lexical_blocks WHERE collection_id = %s",
                            (col.collection_id,)).fetchone()[0]
    done = col.compact()
    assert done["postings_dropped"] == dead and done["rows_before"] <= rows
    assert done["rows_after"] < done["rows_before"]
    after_live, after_dead = live_postings(client, col)
    assert after_dead == 0 and after_live == live
    with client.store.tenant(col.tenant) as conn:
        dfs = dict(conn.execute("SELECT term, df FROM lexical_terms WHERE collection_id = %s",
                                (col.collection_id,)).fetchall())
        blocks = conn.execute("SELECT term, count(*), sum(n), max(n) FROM lexical_blocks WHERE collection_id = %s "
                              "GROUP BY term", (col.collection_id,)).fetchall()
    assert min(dfs.values()) > 0  # terms no active chunk holds are gone
    for term, count, total, largest in blocks:  # full blocks: no more rows than the postings need
        assert total == dfs[term] and count == -(-total // 128) and largest <= 128, term
    assert {q: top(q) for q in asked} == before
    lexical_stats_consistent(client, col)
    again = col.compact()  # (whether the blocks' shared index is rebuilt depends on every collection's blocks)
    assert [again[k] for k in ("terms", "rows_before", "rows_after", "postings_dropped")] == [0, 0, 0, 0]


def test_a_long_run_compacts_as_it_goes_not_only_at_its_end(settings: Any, name: str) -> None:
    """One run of many batches, past `compact_after_blocks` after each: the partial blocks of a term in a tenth of
    the documents (each batch adds one of fewer than 128 postings) are merged while the run goes on, so searches
    during a long load read a few blocks a term, not one per batch. Seen from the progress callback as the run
    reads its last document: with five batches or more committed, the term has at most three partial blocks (the
    writer may be a batch or two past its last compaction)."""
    from ragd.ingest.pipeline import batch_limits

    client = ragd.connect(settings=settings.model_copy(update={"compact_after_blocks": 50}))
    try:
        col = client.collection(name)
        sizes = batch_limits()
        total = sum(next(sizes)[0] for _ in range(8))  # eight batches' documents
        seen: list[tuple[int, int]] = []

        def partial_and_stored() -> tuple[int, int]:
            with client.store.tenant(col.tenant) as conn:
                return conn.execute(
                    "SELECT (SELECT count(*) FROM lexical_blocks WHERE collection_id = %(c)s AND term = 'basalt' "
                    "AND n < 128), (SELECT count(*) FROM documents WHERE collection_id = %(c)s)",
                    {"c": col.collection_id}).fetchone()

        def progress(done: int, of: int, what: str) -> None:  # called as the run reads each document
            if done == total:
                seen.append(partial_and_stored())

        report = col.ingest(documents=[{"id": f"d{i}", "text": f"amber {'basalt ' if i % 10 == 0 else ''}item{i}."}
                                       for i in range(total)], on_progress=progress)
        assert report.status == "succeeded" and len(report.items) == total
        sizes = batch_limits()
        five = sum(next(sizes)[0] for _ in range(5))
        (partial, stored), = seen
        assert stored >= five, seen  # five batches were committed by then
        assert partial <= 3, seen  # not one partial block per batch committed (5 or more before)
        final, _ = partial_and_stored()
        assert final == 1
        lexical_stats_consistent(client, col)
        assert [h.external_id for h in col.search("item170 basalt", k=1, fusion="lexical")] == ["d170"]
    finally:
        client.close()


def test_an_ingest_run_compacts_once_ingest_has_written_enough_blocks(settings: Any, name: str) -> None:
    """Past `compact_after_blocks` blocks written since the last compaction, a run ends by compacting: each term
    left with at most one partial block, the counter back to 0; below it, the blocks stay as written."""
    client = ragd.connect(settings=settings.model_copy(update={"compact_after_blocks": 400}))
    try:
        col = client.collection(name)
        words = "amber basalt cobalt dune ember fjord garnet harbor".split()

        def blocks() -> tuple[int, int, int]:
            with client.store.tenant(col.tenant) as conn:
                return conn.execute(
                    "SELECT (SELECT max(k) FROM (SELECT count(*) FILTER (WHERE n < 128) AS k FROM lexical_blocks "
                    "WHERE collection_id = %(c)s GROUP BY term) x), count(*), "
                    "(SELECT blocks_written FROM lexical_stats WHERE collection_id = %(c)s) "
                    "FROM lexical_blocks WHERE collection_id = %(c)s", {"c": col.collection_id}).fetchone()

        col.ingest(documents=[{"id": f"a{i}", "text": f"{words[i % 8]} {words[(i + 3) % 8]} item{i}."}
                              for i in range(50)])
        partial, rows, written = blocks()
        assert written == rows < 400 and partial == 1  # one run, one batch: one block per term, not compacted
        counts = []
        for run in range(20):  # each run a batch of its own: another partial block for the common words
            col.ingest(documents=[{"id": f"r{run}-{i}", "text": f"{words[i % 8]} {words[(i + run) % 8]} x{run}y{i}."}
                                  for i in range(40)])
            partial, rows, now = blocks()
            counts.append((partial, now))
            if now < written:
                break
            written = now
        assert 2 <= len(counts) < 20, counts  # partial blocks piled up, then a run crossed the bound
        assert counts[-2][0] >= 2 and counts[-2][1] < 400 and counts[-1] == (1, 0), counts
        lexical_stats_consistent(client, col)
    finally:
        client.close()


def test_delete_removes_from_retrieval_at_once(client: ragd.Ragd, name: str) -> None:
    col = client.collection(name)
    col.ingest(documents=[{"id": "keep", "text": "Quarterly revenue grew strongly."},
                          {"id": "gone", "text": "Quarterly revenue target was missed in France."}])
    col.ingest(documents=[{"id": "gone", "text": "Quarterly revenue target was missed in Spain."}])
    assert {h.external_id for h in col.search("quarterly revenue", k=5)} == {"keep", "gone"}
    with client.store.tenant(col.tenant) as conn:
        bands = "SELECT coalesce(sum(cardinality(bands)), 0) FROM document_minhash WHERE collection_id = %s"
        assert conn.execute(bands, (col.collection_id,)).fetchone()[0] == 3 * 32  # 32 bands per version
    col.delete("gone")  # both versions' band keys go with it
    with client.store.tenant(col.tenant) as conn:
        assert conn.execute(bands, (col.collection_id,)).fetchone()[0] == 32
    assert {h.external_id for h in col.search("quarterly revenue spain", k=5)} == {"keep"}
    assert [d["external_id"] for d in col.documents()] == ["keep"]
    lexical_stats_consistent(client, col)


def test_labels_change_updates_tags_without_new_version(client: ragd.Ragd, name: str) -> None:
    col = client.collection(name)
    col.ingest(documents=[{"id": "x", "text": "Badge access after seven.", "tags": ["a"]}])
    report = col.ingest(documents=[{"id": "x", "text": "Badge access after seven.", "tags": ["b"]}])
    assert report.count("updated") == 1
    assert [h.tags for h in col.search("badge", k=1, filters={"tags_any": ["b"]})] == [("b",)]
    assert col.search("badge", k=1, filters={"tags_any": ["a"]}) == []
    assert len(col.document("x")["versions"]) == 1


def test_exact_duplicate_under_another_id_is_recorded(client: ragd.Ragd, name: str) -> None:
    col = client.collection(name)
    report = col.ingest(documents=[{"id": "one", "text": "Same words here."},
                                   {"id": "two", "text": "Same words here."}])
    statuses = {i.external_id: (i.status, i.reason) for i in report.items}
    assert statuses["one"][0] == "ingested"
    assert statuses["two"] == ("duplicate", "same content as one")
    kept = col.ingest(documents=[{"id": "three", "text": "Same words here."}], duplicates="keep")
    assert kept.count("ingested") == 1


def test_bad_inputs_fail_alone_and_keep_stored_data(client: ragd.Ragd, name: str, tmp_path: Path) -> None:
    col = client.collection(name)
    col.ingest(documents=[{"id": "safe", "text": "Existing knowledge about compliance audits."}])
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "blank.md").write_text("   \n\n  ")
    (tmp_path / "garbage.bin").write_bytes(bytes(range(256)) * 40)
    (tmp_path / "fake.pdf").write_bytes(b"%PDF-1.7\n" + b"\x00" * 100)
    (tmp_path / "good.md").write_text("# Good\n\nCompliance audits happen yearly.\n")
    (tmp_path / "records.jsonl").write_text(
        '{"_id": "r1", "text": "Audit record one."}\n{not json}\n{"_id": "r3"}\n{"text": "no id"}\n')
    report = col.ingest([tmp_path, tmp_path / "missing.txt"])
    by_uri = {(i.external_id or i.source_uri): i for i in report.items}
    failed = {Path(i.source_uri.split("#")[0]).name: (i.error_code, i.reason) for i in report.failed}
    assert failed["empty.txt"][1].endswith("is empty")
    assert failed["blank.md"][1].endswith("is empty")
    assert failed["garbage.bin"][0] == "unsupported_format" and "binary" in failed["garbage.bin"][1]
    assert failed["fake.pdf"][0] == "corrupt_document" and "damaged PDF" in failed["fake.pdf"][1]
    assert "missing.txt" in failed and "no such file" in failed["missing.txt"][1]
    reasons = " | ".join(i.reason or "" for i in report.failed)
    assert "line 2 is not valid JSON" in reasons
    assert "line 3 (id r3): empty text" in reasons
    assert by_uri["r1"].status == "ingested"
    no_id = [i for i in report.items if (i.external_id or "").startswith("sha256:")]
    assert [i.status for i in no_id] == ["ingested"]  # a record without an id gets one from its content
    assert report.count("ingested") == 3  # good.md, r1 and the record without an id
    assert report.status == "succeeded"
    assert {h.external_id for h in col.search("compliance audits", k=10)} >= {"safe"}
    run = col.run(str(report.run_id))
    assert len(run["items"]) == len(report.items)
    assert [i["item_index"] for i in run["items"]] == list(range(len(report.items)))


def test_in_memory_documents_are_checked_before_the_run_and_stored_across_growing_batches(
        client: ragd.Ragd, name: str) -> None:
    """Documents given in memory are read into blocks as the run reaches them, but a bad one anywhere in the list
    refuses the whole call before a run starts or anything is stored. Batches grow from a small first one: a run
    spanning several stores every document once, its items numbered in the order given."""
    from ragd.errors import InvalidRequest
    from ragd.ingest.pipeline import batch_limits

    col = client.collection(name)
    limits = batch_limits()
    sizes = [next(limits)[0] for _ in range(3)]
    assert sizes[0] < sizes[1] < sizes[2]
    n = sizes[0] + sizes[1] + 5  # three batches, the last one partial
    docs = ({"id": f"m{i:04d}", "text": f"Memo {i} on topic {i % 11}."} for i in range(n))  # a generator
    bad = [*({"id": f"b{i}", "text": "Fine."} for i in range(n)), {"id": "b-last", "text": None}]
    with pytest.raises(InvalidRequest, match="non-empty 'id' and a 'text' string"):
        col.ingest(documents=bad)
    assert col.documents(limit=10) == [] and col.runs(10) == []
    report = col.ingest(documents=docs)
    assert report.count("ingested") == n
    assert [i.external_id for i in report.items] == [f"m{i:04d}" for i in range(n)]
    assert {d["external_id"] for d in col.documents(limit=1000)} == {f"m{i:04d}" for i in range(n)}
    lexical_stats_consistent(client, col)


def test_each_chunk_holds_the_servers_lexemes_of_its_search_text_made_ahead_or_in_its_commit(
        settings: Any, name: str) -> None:
    """A batch's lexemes are made on another connection while the batch before is written; a batch whose work
    ahead failed (here the embedder's first call: the commit embeds for itself) has them made in its commit. Either
    way every chunk holds exactly PostgreSQL's to_tsvector('english', ...) of its search text (heading path, then
    content) and its BM25 length, and the collection's statistics agree with its postings."""
    from ragd.embed import HashingEmbedder
    from ragd.ingest.pipeline import batch_limits

    class FailsOnce(HashingEmbedder):
        calls = 0

        def embed_documents(self, texts: Any) -> Any:
            FailsOnce.calls += 1
            if FailsOnce.calls == 1:
                raise ValueError("a hiccup ahead of the commit")
            return super().embed_documents(texts)

    client = ragd.connect(settings=settings, embedder=FailsOnce(384))
    try:
        col = client.collection(name)
        n = next(batch_limits())[0] + 20  # the first batch's lexemes made in its commit, the second's ahead
        docs = [{"id": f"h{i:03d}", "source_type": "markdown",
                 "text": f"# Guide {i % 5}\n\n## Running {i}\n\nThe runners' shoes ran {i} miles; CAFÉ naïve x{i}."}
                for i in range(n)]
        report = col.ingest(documents=docs)
        assert report.count("ingested") == n and FailsOnce.calls > 2
        with client.store.admin() as conn:
            differ, total = conn.execute("""
                SELECT count(*) FILTER (WHERE c.lexemes IS DISTINCT FROM to_tsvector('english', st.t)
                                           OR c.lex_len <> (SELECT COALESCE(sum(COALESCE(cardinality(u.positions), 1)),
                                                                            0) FROM unnest(c.lexemes) u)),
                       count(*)
                FROM chunks c CROSS JOIN LATERAL (
                    SELECT CASE WHEN jsonb_array_length(c.heading_path) = 0 THEN c.content
                           ELSE (SELECT string_agg(h, ' > ' ORDER BY k)
                                 FROM jsonb_array_elements_text(c.heading_path) WITH ORDINALITY AS x(h, k))
                                || E'\\n\\n' || c.content END AS t) st
                WHERE c.collection_id = %s""", (col.collection_id,)).fetchone()
        assert total == n and differ == 0
        lexical_stats_consistent(client, col)
    finally:
        client.close()


def test_one_document_the_embedder_refuses_fails_alone_and_the_rest_commit_in_few_transactions(
        settings: Any, name: str) -> None:
    """A batch whose commit fails is split in halves until the bad document is alone: it fails with the
    embedder's reason, every other document is stored, in order, and the batch took about 2 log2(n) attempts
    (one per document before: a 64-document batch called the embedder 66 times)."""
    from ragd.embed import HashingEmbedder
    from ragd.ingest.pipeline import batch_limits

    class Refuses(HashingEmbedder):
        calls = 0

        def embed_documents(self, texts: Any) -> Any:
            Refuses.calls += 1
            if any("POISON" in t for t in texts):
                raise ValueError("the provider refused one input")
            return super().embed_documents(texts)

    client = ragd.connect(settings=settings, embedder=Refuses(384))
    try:
        col = client.collection(name)
        n = next(batch_limits())[0]
        docs = [{"id": f"r{i:03d}", "text": f"Record {i}: valve {i} opens at {i * 3} bar." + (" POISON" if i == 37
                                                                                             else "")}
                for i in range(n)]
        report = col.ingest(documents=docs)
        assert [item.external_id for item in report.items] == [d["id"] for d in docs]
        assert [item.status for item in report.items] == ["failed" if i == 37 else "ingested" for i in range(n)]
        assert "the provider refused one input" in (report.items[37].reason or "")
        assert Refuses.calls <= 2 * math.ceil(math.log2(n)) + 4, Refuses.calls
        stored = sorted(d["external_id"] for d in col.documents(limit=1000))
        assert stored == [d["id"] for d in docs if d["id"] != "r037"]
        assert col.search("valve 12 opens", k=1, fusion="lexical")[0].external_id == "r012"
        lexical_stats_consistent(client, col)
    finally:
        client.close()


def test_jsonl_records_without_ids_get_stable_ids_from_content_and_position(client: ragd.Ragd, name: str,
                                                                              tmp_path: Path) -> None:
    records = [{"text": "Alpha record about pumps."}, {"text": "Beta record about valves."},
               {"text": "Alpha record about pumps."}]
    path = tmp_path / "noids.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    col = client.collection(name)
    first = col.ingest([path])
    ids = [i.external_id for i in first.items]
    assert len(set(ids)) == 3 and all(i.startswith("sha256:") for i in ids)
    assert ids[2] == f"{ids[0]}-2"  # the same content again: told apart by its place among equals
    assert [i.status for i in first.items] == ["ingested", "ingested", "duplicate"]
    # a record added at the top moves every line, but not the ids: nothing is re-ingested
    path.write_text("".join(json.dumps(r) + "\n" for r in [{"text": "Gamma, new."}, *records]), encoding="utf-8")
    again = col.ingest([path])
    assert again.count("ingested") == 1 and again.count("unchanged") == 2
    assert {i.external_id for i in again.items} >= set(ids)


def test_beir_corpus_format_ingests_as_is(client: ragd.Ragd, name: str, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        '{"_id": "4983", "title": "Microstructural development of human brain", "text": "Alterations of the '
        'architecture of cerebral white matter in the developing human brain can affect cortical development.", '
        '"metadata": {}}\n'
        '{"_id": "5836", "title": "Induction of myelodysplasia", "text": "Myelodysplastic syndromes (MDS) are '
        'age-dependent stem cell malignancies.", "metadata": {}}\n')
    col = client.collection(name)
    report = col.ingest([corpus])
    assert report.count("ingested") == 2
    top = col.search("white matter brain development", k=1)[0]
    assert top.external_id == "4983"
    assert top.heading_path == ("Microstructural development of human brain",)
    assert top.title == "Microstructural development of human brain"


def test_index_and_chunk_blocks_compose(client: ragd.Ragd, name: str) -> None:
    chunks = ragd.chunk("First paragraph about solar panels.\n\nSecond paragraph about wind.", doc_id="energy")
    assert [c.chunk_index for c in chunks] == [0]
    col = client.collection(name)
    counts = ragd.index(chunks, col)
    assert counts["counts"]["ingested"] == 1
    again = ragd.index(chunks, col)
    assert again["counts"]["unchanged"] == 1
    assert col.search("solar", k=1)[0].external_id == "energy"


def test_parallel_extraction_gives_the_same_result_as_one_worker(client: ragd.Ragd, tmp_path: Path) -> None:
    """Files extracted several at once (each in its own worker process) come back in the order of the files:
    the same items, in the same order, with the same chunks as one worker; a broken file still fails alone."""
    from ragd.ingest.worker import POOL

    from .conftest import DATA

    folder = tmp_path / "mixed"
    folder.mkdir()
    synthetic = DATA / "docs" / "synthetic"
    for name in ("report.pdf", "report.docx", "review.pptx", "article.html", "sales.csv", "long_table.docx"):
        (folder / name).write_bytes((synthetic / name).read_bytes())
    (folder / "broken.pdf").write_bytes(b"%PDF-1.7\n not a PDF body")
    for i in range(6):
        (folder / f"note{i}.md").write_text(f"# Note {i}\n\nHeat pump service interval number {i}.\n")

    def outcome(workers: int) -> tuple[list[tuple[str, str, str | None]], dict[str, list[tuple[int, str]]]]:
        col = client.collection(f"parallel{workers}")
        report = col.ingest([folder], workers=workers)
        items = [(Path(i.source_uri).name, i.status, i.error_code) for i in report.items]
        with client.store.tenant(col.tenant) as conn:
            rows = conn.execute(
                "SELECT d.external_id, c.chunk_index, c.content_hash FROM chunks c JOIN documents d USING (doc_id) "
                "WHERE c.collection_id = %s AND c.is_active ORDER BY d.external_id, c.chunk_index",
                (col.collection_id,)).fetchall()
        chunks: dict[str, list[tuple[int, str]]] = {}
        for external_id, index, digest in rows:
            chunks.setdefault(external_id, []).append((index, digest))
        return items, chunks

    one = outcome(1)
    before = len(POOL._idle)
    three = outcome(3)
    assert three == one
    assert ("broken.pdf", "failed", "corrupt_document") in one[0] and len(one[1]) >= 10
    assert len(POOL._idle) >= min(before, 1) + 2  # three workers ran and were given back for the next run


def _pdf_of_pages(path: Path, sources: list[tuple[str, list[int]]]) -> None:
    """A PDF made of real pages of the shared PDFs, in the order given."""
    import pypdfium2 as pdfium

    from .conftest import DATA

    out = pdfium.PdfDocument.new()
    for name, pages in sources:
        out.import_pages(pdfium.PdfDocument(DATA / "docs" / name), pages)
    out.save(path)


def test_long_pdf_read_in_page_ranges_by_several_workers_is_the_same_document(client: ragd.Ragd, tmp_path: Path,
                                                                            name: str) -> None:
    """With two workers, a PDF of `pdf_split_pages` pages or more has its pages read in ranges by both at once,
    then laid out as one document: the same chunks (text, order, pages, boxes) as one worker reading it whole
    (running headers found across the ranges, the page read by OCR in its range, the tables), and a PDF that
    overruns its time limit fails alone, with the timeout's code."""
    from ragd.config import Settings

    long_pdf = tmp_path / "long.pdf"
    _pdf_of_pages(long_pdf, [("pdfplumber/federal-register-2020-17221.pdf", list(range(15))),
                             ("docling/pdf/sources/redp5110_sampled.pdf", [2, 3, 4]),  # page 3: read by OCR
                             ("tables/icdar2013/us-001.pdf", [0, 1])])
    note = tmp_path / "note.md"
    note.write_text("# Note\n\nHeat pump service interval.\n")

    def chunks(label: str, settings: Settings,
               workers: int) -> tuple[list[tuple[str, str, str | None]], list[tuple[Any, ...]]]:
        col = ragd.Ragd(client.store, settings).collection(name + label)
        report = col.ingest([long_pdf, note], workers=workers)
        with client.store.tenant(col.tenant) as conn:
            rows = conn.execute(
                "SELECT d.external_id, c.chunk_index, c.content_hash, c.metadata "
                "FROM chunks c JOIN documents d USING (doc_id) "
                "WHERE c.collection_id = %s ORDER BY d.external_id, c.chunk_index", (col.collection_id,)).fetchall()
        return [(Path(i.source_uri).name, i.status, i.error_code) for i in report.items], rows

    whole = chunks("whole", client.settings, 1)
    split = chunks("split", client.settings.model_copy(update={"pdf_split_pages": 8}), 2)
    assert split == whole
    items, rows = whole
    assert items == [("long.pdf", "ingested", None), ("note.md", "ingested", None)]
    pages = {p for r in rows if r[0].endswith("long.pdf") for p in r[3].get("pages", [])}
    assert pages >= {1, 8, 15, 17, 19, 20}  # from every range
    slow = client.settings.model_copy(update={"pdf_split_pages": 8, "extract_timeout_s": 0.5})
    items, rows = chunks("slow", slow, 2)
    assert items == [("long.pdf", "failed", "timeout"), ("note.md", "ingested", None)]
    assert [r[0] for r in rows] == [str(note.resolve())]


def test_a_provider_that_dies_mid_run_stops_it_and_keeps_what_was_committed(settings: Any, name: str) -> None:
    """Batches are embedded ahead on one thread while another writes: the provider failing there still stops the
    run with its own error, the run is closed as failed, and every batch committed before stays whole."""
    import http.server
    import threading

    import numpy as np

    from ragd.embed import OpenAIEmbedder
    from ragd.embed.openai import MAX_BATCH
    from ragd.errors import ProviderError
    from ragd.ingest.pipeline import BATCH_DOCS, batch_limits
    from ragd.store import queries

    served = {"requests": 0}
    limits = batch_limits()
    first_two = [next(limits)[0] for _ in range(2)]  # documents in the run's first two batches (one chunk each)

    class Dying(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            served["requests"] += 1
            if served["requests"] > sum(-(-n // MAX_BATCH) for n in first_two):  # two batches embed, then it is gone
                self.send_response(503)
                self.end_headers()
                return
            data = [{"index": i, "embedding": (np.ones(4) / 2).tolist()} for i, _ in enumerate(body["input"])]
            payload = json.dumps({"data": data}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Dying)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    embedder = OpenAIEmbedder("dying", base_url=f"http://127.0.0.1:{server.server_port}/v1", dims=4,
                              max_retries=0, backoff_s=0.01, timeout_s=5)
    client = ragd.connect(settings=settings, embedder=embedder)
    try:
        col = client.collection(name)
        docs = [{"id": f"d{i:03d}", "text": f"Document {i} is about topic {i % 7} and nothing else."}
                for i in range(BATCH_DOCS * 5)]
        with pytest.raises(ProviderError, match="HTTP 503"):
            col.ingest(documents=docs)
        stored = {d["external_id"] for d in col.documents(limit=5000)}
        assert stored == {f"d{i:03d}" for i in range(sum(first_two))}  # the two batches embedded before, whole
        assert all(d["chunk_count"] == 1 for d in col.documents(limit=5000))
        found = {h.external_id for h in col.search("topic 3", k=50, fusion="lexical")}
        assert found and found <= stored
        run = next(r for r in col.runs(100) if r["collection"] == name)
        assert run["status"] == "failed" and "503" in run["error"]
        with client.store.admin() as conn:  # the failed first run still built the index over what it committed
            index = queries.hnsw_index_name(col.collection_id)
            assert conn.execute(queries.HNSW_INDEX_VALID, {"name": index}).fetchone() == (True,)
    finally:
        client.close()
        server.shutdown()


def test_near_duplicate_candidates_are_found_from_the_batchs_band_keys_once(client: ragd.Ragd, name: str) -> None:
    """A batch's near-duplicate candidates are looked up by its band keys: the band keys' GIN index is searched
    once per document of the batch, however many documents the collection holds, and the stored signatures are
    not scanned. (Planned from the stored versions, on statistics not yet gathered after a bulk load, the band
    index was searched once per active document: SciFact ingested with the default check took 39 s instead of
    11, and each batch longer than the last.)"""
    import random
    import re

    from psycopg import sql

    from ragd.ingest import dedupe
    from ragd.store import queries
    from ragd.store.schema import migrations

    rng = random.Random(5)
    vocabulary = [f"w{i}" for i in range(3000)]
    col = client.collection(name)
    texts = [" ".join(rng.choice(vocabulary) for _ in range(60)) for _ in range(400)]
    report = col.ingest(documents=[{"id": f"d{i}", "text": text} for i, text in enumerate(texts)])
    assert [o.status for o in report.items] == ["ingested"] * 400
    batch = [dedupe.band_keys(dedupe.signature(" ".join(rng.choice(vocabulary) for _ in range(60))))
             for _ in range(3)]
    batch.append(dedupe.band_keys(dedupe.signature(texts[7])))  # a stored document's words
    batch.append(dedupe.band_keys(dedupe.signature(texts[7] + " " + texts[7][:20])))  # and nearly its words
    with client.store.tenant(col.tenant) as conn:
        found = conn.execute(queries.NEAR_DUPLICATE_CANDIDATES, {
            "collection_id": col.collection_id, "docs": [i for i, keys in enumerate(batch) for _ in keys],
            "keys": [k for keys in batch for k in keys]}).fetchall()
        named = dict(conn.execute(queries.ACTIVE_CANDIDATES, {"versions": [r[0] for r in found]}).fetchall())
    # the stored document, once, with the batch's documents sharing a band with it
    assert [(named[r[0]], r[3]) for r in found] == [("d7", [3, 4])]
    stored = dedupe.from_bytes(found[0][2])  # its signature comes with it
    assert stored is not None and dedupe.similarity(stored, dedupe.signature(texts[7])) == 1.0
    # the lookup function's own statement (as migration 26 wrote it), planned for this tenant and batch: the GIN
    # index searched once per document of the batch, the stored signatures never scanned (nor visited again)
    body = next(text for version, _, text in migrations() if version == 26)
    body = body.split("LANGUAGE sql STABLE SECURITY DEFINER")[1].split(" AS $$")[1].split("$$;")[0]
    body = re.sub(r"\bcollection\b", "%(collection)s", body.replace("ragd_session_tenant()", "%(tenant)s")
                  .replace("unnest(docs, keys)", "unnest(%(docs)s::integer[], %(keys)s::bigint[])"))

    def scans(node: dict[str, Any]) -> list[dict[str, Any]]:
        found = [node] if node.get("Relation Name") == "document_minhash" or \
            node.get("Index Name") == "document_minhash_bands" else []
        return found + [s for child in node.get("Plans", []) for s in scans(child)]

    with client.store.admin() as conn:  # with the function's own settings, on statistics as ingest left them
        for setting in conn.execute("SELECT unnest(proconfig) FROM pg_proc WHERE proname = 'ragd_band_candidates'"):
            name, value = setting[0].split("=", 1)
            conn.execute(sql.SQL("SELECT set_config({}, {}, true)").format(sql.Literal(name), sql.Literal(value)))
        plan = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + body, {
            "tenant": col.tenant, "collection": col.collection_id,
            "docs": [i for i, keys in enumerate(batch) for _ in keys],
            "keys": [k for keys in batch for k in keys]}).fetchone()[0][0]["Plan"]
    nodes = scans(plan)
    assert [n["Actual Loops"] for n in nodes if n.get("Index Name") == "document_minhash_bands"] == [len(batch)], plan
    assert not [n for n in nodes if n["Node Type"] == "Seq Scan"], plan
    assert [n["Node Type"] for n in nodes if n.get("Relation Name") == "document_minhash"] == ["Bitmap Heap Scan"], plan


def test_near_duplicates_are_found_among_the_stored_documents_active_versions_only(
        client: ragd.Ragd, name: str) -> None:
    """A new document is compared with the stored documents' active versions: a near-copy of the active one is a
    duplicate of it, a near-copy of a replaced version's words is not (that version is retired), and a document's
    new version is not a near-duplicate of its own older one."""
    col = client.collection(name)
    a, b_old, b_new = (" ".join(f"{w}{i}" for i in range(80)) for w in ("alpha", "beta", "gamma"))
    col.ingest(documents=[{"id": "a", "text": a}, {"id": "b", "text": b_old}])
    col.ingest(documents=[{"id": "b", "text": b_new}])
    report = col.ingest(documents=[{"id": "near-a", "text": f"{a} tail"}, {"id": "near-old-b", "text": f"{b_old} tail"},
                                   {"id": "a", "text": f"{a} and two more"}], near_duplicates=0.8)
    assert {i.external_id: i.status for i in report.items} == {
        "near-a": "duplicate", "near-old-b": "ingested", "a": "ingested"}
    decisions = col.run(str(report.run_id))["stats"]["near_duplicates"]
    assert [(d["item"], d["similar_to"], d["decision"]) for d in decisions] == [("near-a", "a", "duplicate")]
    assert decisions[0]["similarity"] >= 0.9


def test_near_duplicates_found_ahead_of_a_batch_are_checked_when_it_is_planned(client: ragd.Ragd, name: str) -> None:
    """A batch's stored candidates are looked up while the batch before it is written (not yet committed): a
    near-copy of a document that batch stores is still found (through the run's own index), a near-copy of a
    stored document's version that batch retires is no duplicate (whether a candidate is active is read when the
    batch is planned, after the batch before committed), and a near-copy of a stored active one is."""
    import random

    from ragd.ingest.pipeline import FIRST_BATCH_DOCS

    rng = random.Random(11)
    vocabulary = [f"w{i}" for i in range(5000)]
    col = client.collection(name)
    a, b_old, b_new = (" ".join(f"{w}{i}" for i in range(80)) for w in ("alpha", "beta", "gamma"))
    col.ingest(documents=[{"id": "a", "text": a}, {"id": "b", "text": b_old}])
    filler = [{"id": f"f{i:03d}", "text": " ".join(rng.choice(vocabulary) for _ in range(80))}
              for i in range(FIRST_BATCH_DOCS - 1)]
    second = [{"id": "near-f003", "text": f"{filler[3]['text']} tail"}, {"id": "near-old-b", "text": f"{b_old} tail"},
              {"id": "near-a", "text": f"{a} tail"}]
    report = col.ingest(documents=[*filler, {"id": "b", "text": b_new}, *second], near_duplicates=0.8)
    status = {i.external_id: i.status for i in report.items}
    assert {k: status[k] for k in ("b", "near-f003", "near-old-b", "near-a")} == {
        "b": "ingested", "near-f003": "duplicate", "near-old-b": "ingested", "near-a": "duplicate"}
    assert sum(v == "ingested" for v in status.values()) == len(filler) + 2
    decisions = col.run(str(report.run_id))["stats"]["near_duplicates"]
    assert [(d["item"], d["similar_to"], d["decision"]) for d in decisions] == [
        ("near-f003", "f003", "duplicate"), ("near-a", "a", "duplicate")]


def test_signatures_are_stored_in_4_bytes_a_value_and_those_stored_in_8_still_match(
        client: ragd.Ragd, name: str) -> None:
    """New signatures take 4 bytes a value (512 bytes); a signature stored before, 8 bytes a value, is read as the
    same values, so a near-copy of its document is still its duplicate; a signature row of any other length (written
    by hand in the tenant's own SQL session) is no candidate and fails nothing."""
    from ragd.ingest import dedupe

    col = client.collection(name)
    a, b = (" ".join(f"{w}{i}" for i in range(80)) for w in ("alpha", "beta"))
    col.ingest(documents=[{"id": "a", "text": a}, {"id": "b", "text": b}])
    with client.store.tenant(col.tenant) as conn:
        rows = dict(conn.execute("SELECT d.external_id, m.signature FROM document_minhash m "
                                 "JOIN documents d USING (doc_id) WHERE m.collection_id = %s", (col.collection_id,)))
        assert sorted(len(v) for v in rows.values()) == [512, 512]
        old = dedupe.from_bytes(rows["a"])
        assert old is not None
        conn.execute("UPDATE document_minhash m SET signature = %s FROM documents d "
                     "WHERE d.doc_id = m.doc_id AND d.external_id = 'a' AND m.collection_id = %s",
                     (old.astype("<u8").tobytes(), col.collection_id))
        conn.execute("UPDATE document_minhash m SET signature = '\\x0102' FROM documents d "
                     "WHERE d.doc_id = m.doc_id AND d.external_id = 'b' AND m.collection_id = %s",
                     (col.collection_id,))
        assert sorted(len(r[0]) for r in conn.execute("SELECT signature FROM document_minhash WHERE collection_id = %s",
                                                      (col.collection_id,))) == [2, 1024]
    report = col.ingest(documents=[{"id": "near-a", "text": f"{a} tail"}, {"id": "near-b", "text": f"{b} tail"}],
                        near_duplicates=0.9)
    assert {i.external_id: i.status for i in report.items} == {"near-a": "duplicate", "near-b": "ingested"}
    assert "near-duplicate of a" in (report.items[0].reason or "")


def test_near_duplicate_threshold_one_turns_the_check_off_but_keeps_signatures(client: ragd.Ragd, name: str) -> None:
    """1.0 is documented as off: a document whose words equal another's (signature similarity 1.0) is ingested,
    no pair is compared or recorded; its signature is still stored, so a later run with the check on finds it."""
    col = client.collection(name)
    words = " ".join(f"word{i}" for i in range(60))
    first = col.ingest(documents=[{"id": "a", "text": f"{words}."}], near_duplicates=1.0)
    same_words = col.ingest(documents=[{"id": "b", "text": f"{words.upper()}!"}], near_duplicates=1.0)
    assert [i.status for i in first.items + same_words.items] == ["ingested", "ingested"]
    assert col.run(str(same_words.run_id))["stats"]["near_duplicates"] == []
    checked = col.ingest(documents=[{"id": "c", "text": f"{words}?"}], near_duplicates=0.9)
    assert checked.items[0].status == "duplicate" and "near-duplicate of a" in (checked.items[0].reason or "")
    decision = col.run(str(checked.run_id))["stats"]["near_duplicates"][0]
    assert decision["similar_to"] == "a" and decision["similarity"] == 1.0 and decision["decision"] == "duplicate"


def test_each_version_keeps_its_blocks_as_a_json_artifact(client: ragd.Ragd, name: str) -> None:
    """artifact_uri is a file:// URI under RAGD_HOME naming the version's extracted blocks: a line of its batch's
    JSON Lines pack, the fragment its version id (one file per batch, not per document); if the folder is removed
    while the process runs, the next ingest makes it again."""
    import shutil
    from urllib.parse import unquote, urlparse

    from ragd.store.artifacts import load_artifact

    col = client.collection(name)

    def artifact(ref: str) -> dict[str, Any]:
        version = col.document(ref)["versions"][0]
        uri = version["artifact_uri"]
        path = Path(unquote(urlparse(uri).path))
        assert uri.startswith("file://") and path.is_relative_to(client.settings.artifacts.resolve())
        assert urlparse(uri).fragment == str(version["doc_version_id"])
        return load_artifact(uri)

    col.ingest(documents=[{"id": "a", "title": "Badges", "text": "Badges open doors.\n\nVisitors sign in."},
                          {"id": "c", "text": "Printers are on every floor."}])
    first = artifact("a")
    assert (first["external_id"], first["title"]) == ("a", "Badges")
    assert [b["text"] for b in first["blocks"]] == ["Badges", "Badges open doors.", "Visitors sign in."]
    assert [b["text"] for b in artifact("c")["blocks"]] == ["Printers are on every floor."]
    packs = list((client.settings.artifacts / str(col.collection_id)).iterdir())
    assert len(packs) == 1 and len(packs[0].read_text(encoding="utf-8").splitlines()) == 2  # one batch, one file
    shutil.rmtree(client.settings.artifacts / str(col.collection_id))
    with pytest.raises(ragd.errors.NotFound, match="does not exist"):  # a pack removed by hand: one line, no traceback
        artifact("a")
    report = col.ingest(documents=[{"id": "b", "text": "Lost laptops go to the help desk."}])
    assert report.count("ingested") == 1
    assert [b["text"] for b in artifact("b")["blocks"]] == ["Lost laptops go to the help desk."]


def test_no_artifact_is_kept_for_a_version_that_was_not_stored(client: ragd.Ragd, name: str) -> None:
    """Documents found to be duplicates (exact, or near at the threshold) or unchanged are not stored: no pack
    holds their blocks; every line of every pack is a version the store refers to."""
    col = client.collection(name)
    words = " ".join(f"w{i}" for i in range(300))
    col.ingest(documents=[{"id": "a", "text": f"{words}."}, {"id": "kept", "text": "Printers are on every floor."}])
    report = col.ingest(documents=[{"id": "a", "text": f"{words}."}, {"id": "copy", "text": f"{words}."},
                                   {"id": "near", "text": f"{words}?"}, {"id": "new", "text": "Badges open doors."}],
                        near_duplicates=0.9)
    assert [i.status for i in report.items] == ["unchanged", "duplicate", "duplicate", "ingested"]
    with client.store.tenant(col.tenant) as conn:
        stored = {str(v) for (v,) in conn.execute("SELECT doc_version_id FROM document_versions")}
    lines = [json.loads(line) for pack in (client.settings.artifacts / str(col.collection_id)).iterdir()
             for line in pack.read_text(encoding="utf-8").splitlines()]
    assert sorted(line["external_id"] for line in lines) == ["a", "kept", "new"]
    assert {line["doc_version_id"] for line in lines} <= stored


def test_a_run_has_the_indexes_it_will_touch_much_of_read_ahead_and_logs_it(settings: Any, fresh_database: str,
                                                                            name: str,
                                                                            caplog: pytest.LogCaptureFixture) -> None:
    """A run whose lookups will touch a quarter or more of an index's pages asks the server to read it ahead
    (pg_prewarm), and logs each index with the pages read (not in the run's stats: a tenant may not learn the
    shared indexes' sizes): a new collection's first run the four
    indexes its documents are looked up in and those of every table it writes (its HNSW graph is built at the
    run's end), a run of near copies the
    stored signatures too (seen from its first batch: each document reads those sharing a band with it), the
    next one the graph;
    not the LSH bands' index when the near-duplicate check is off; nothing below `ingest_prefetch_min_pages` (the
    default 1,024: these indexes are far smaller), or with `ingest_prefetch` off. What is stored does not depend
    on it. A database of its own, so the indexes' sizes are this test's alone."""
    from ragd.store import queries

    def run(update: dict[str, Any], docs: list[dict[str, str]], **kw: Any) -> tuple[dict[str, int], dict[str, int]]:
        client = ragd.connect(fresh_database, settings=settings.model_copy(update=update))
        try:
            col = client.collection(name)
            caplog.clear()
            with caplog.at_level(logging.INFO, logger="ragd.ingest"):
                report = col.ingest(documents=docs, **kw)
            assert report.count("ingested") == len(docs), report.items[:3]
            stats = col.run(str(report.run_id))["stats"]
            assert "read_ahead" not in json.dumps(stats) and "pages" not in json.dumps(stats)
            read = {r: n for rec in caplog.records for r, n in getattr(rec, "read_ahead", {}).items()}
            with client.store.tenant(col.tenant) as conn:
                names = ["documents_external_id", "document_versions_content_hash", "embedding_cache_pkey",
                         "document_minhash_bands", queries.hnsw_index_name(col.collection_id)]
                pages = dict(conn.execute(queries.RELATION_PAGES, {"names": names}).fetchall())
            return read, pages
        finally:
            client.close()

    def docs(prefix: str, n: int) -> list[dict[str, str]]:
        return [{"id": f"{prefix}{i}", "text": f"Notes on {prefix} topic {i}: item{i} of the {prefix} series, "
                                                f"filed under {prefix}{i % 7} and {prefix}{i % 11}."} for i in range(n)]

    four = {"documents_external_id", "document_versions_content_hash", "embedding_cache_pkey", "document_minhash_bands"}
    anywhere = {"ingest_prefetch_min_pages": 0}
    first, pages = run(anywhere, docs("a", 300))
    assert four <= set(first) and {"chunks_pkey", "documents_pkey"} <= set(first), first  # every written table's
    assert all(0 < first[r] <= pages[r] for r in four) and all(n > 0 for n in first.values()), (first, pages)
    assert not any(r.startswith("chunk_embeddings_hnsw") for r in first)
    # the stored signatures' table: read ahead once the first batch found its documents read stored signatures
    copies = [{**d, "id": f"copy-{d['id']}", "text": d["text"] + " Again."} for d in docs("a", 300)]
    assert "document_minhash" in run(anywhere, copies, duplicates="keep")[0]
    second, pages = run(anywhere, docs("b", 300))
    graph = [r for r in pages if r.startswith("chunk_embeddings_hnsw")]
    assert len(graph) == 1 and set(second) == set(first) | set(graph), second  # the graph too, once it exists
    assert all(0 < second[r] <= pages[r] for r in pages) and second != first, (second, pages)
    unchecked, _ = run(anywhere, docs("c", 300), near_duplicates=1.0)
    assert "document_minhash_bands" not in unchecked and "documents_external_id" in unchecked, unchecked
    assert sum(pages.values()) < 1024
    assert run({}, docs("d", 300))[0] == {}  # the default floor: not worth a call
    assert run({**anywhere, "ingest_prefetch": False}, docs("e", 300))[0] == {}
    # the extension ragd created is the session user's alone: a tenant's SQL cannot load tables into the buffers
    client = ragd.connect(fresh_database, settings=settings)
    try:
        with client.store.admin() as conn:
            schema = conn.execute(queries.PREWARM_SCHEMA).fetchone()[0]
        for call in (f"{schema}.pg_prewarm('chunks'::regclass)", f"{schema}.autoprewarm_dump_now()"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege), \
                    client.store.tenant(client.collection(name).tenant) as conn:
                conn.execute(f"SELECT {call}")
    finally:
        client.close()


def test_the_read_ahead_rule_reads_an_index_once_a_run_will_touch_a_quarter_of_it() -> None:
    """The share of an index's pages n random lookups touch is 1 - e^(-n/p); an index is read ahead from a quarter
    up, when the chosen ones hold `min_pages` pages together. A document is one lookup in each written table's
    btree index, 32 in the band keys' index, 64 in its collection's graph, none in another collection's. With the
    sizes of a 1.27M-document store: a run of 20k documents reads every index ahead (640k lookups of band keys into
    195k pages); 1,000 documents the graph only (64k lookups into 184k pages touch 30% of it; 32k into the bands'
    195k pages 15%). The most probed a page are read first."""
    from ragd.ingest import prefetch

    assert prefetch.expected_share(0, 100) == 0.0 and prefetch.expected_share(5, 0) == 0.0
    assert abs(prefetch.expected_share(100, 100) - (1 - math.exp(-1))) < 1e-12
    indexes = [("chunk_embeddings_hnsw_x", "hnsw"), ("chunk_embeddings_hnsw_y", "hnsw"),
               ("document_minhash_bands", "gin"), ("documents_external_id", "btree"),
               ("document_versions_content_hash", "btree"), ("embedding_cache_pkey", "btree")]
    store = {"document_minhash_bands": 195_039, "chunk_embeddings_hnsw_x": 183_858, "documents_external_id": 15_646,
             "document_versions_content_hash": 19_360, "embedding_cache_pkey": 25_256,
             "chunk_embeddings_hnsw_y": 1_000}
    big = prefetch.probes(20_000, indexes, near_duplicates=True, hnsw="chunk_embeddings_hnsw_x")
    assert big["document_minhash_bands"] == 640_000 and big["chunk_embeddings_hnsw_x"] == 1_280_000
    assert big["documents_external_id"] == 20_000 and "chunk_embeddings_hnsw_y" not in big  # another collection's
    # even 20k lookups into 25k pages: 55%; the most probed a page first (64k a page of the graph, 3.3 of the bands)
    mine = ["chunk_embeddings_hnsw_x", "document_minhash_bands", "documents_external_id",
            "document_versions_content_hash", "embedding_cache_pkey"]
    assert prefetch.chosen(store, big, 1024) == mine
    small = prefetch.probes(1_000, indexes, near_duplicates=True, hnsw="chunk_embeddings_hnsw_x")
    assert prefetch.chosen(store, small, 1024) == ["chunk_embeddings_hnsw_x"]
    assert prefetch.chosen(store, prefetch.probes(1_000, indexes, near_duplicates=True, hnsw="none"), 1024) == []
    assert "document_minhash_bands" not in prefetch.probes(20_000, indexes, near_duplicates=False, hnsw="none")
    tiny = {r: 10 for r in store}  # touched whole, but 50 pages in all: below the floor
    assert prefetch.chosen(tiny, big, 1024) == []
    assert prefetch.chosen(tiny, big, 50) == [*mine[:2], *sorted(mine[2:])]  # as often a page: by name
    assert prefetch.chosen({}, big, 0) == []  # indexes that do not exist (yet): nothing
