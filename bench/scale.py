"""Scale: ingest rate as a collection grows to a million chunks, table sizes, memory, and search latency per plan.

    python bench/scale.py [--sizes 100000,300000,1000000] [--home DIR] [--queries 200] [--step 20000] [--sample N]

Corpus: documents of real sentences (SciFact abstracts and SQuAD paragraphs, split into sentences and drawn again
with a seeded generator per document: a sentence and 1 to 8 of its 32 nearest, so each document is about one
thing, and the vocabulary and lengths follow real text; each document is about one chunk; the sentences of the
documents SciFact's judged queries find relevant are not drawn), the SciFact corpus itself first (so its judged
queries measure quality at each size).

Vectors are given, so the embedder is not the bottleneck. `--vectors bge-mix` (the default): every pool sentence,
every SciFact chunk and every query is embedded once with the default model (bge-small-en; kept under
bench/results/scale), and a drawn chunk's vector is the normalised mean of its sentences' vectors. So the vectors
have the neighbourhood structure of real embeddings (HNSW recall means something) at the cost of a lookup.
`--vectors hash`: the hashing embedder (no neighbourhood structure; recall is low by nature).
Document i is the same on every run: with --home the database is kept and a later run resumes the build where it
stopped (or skips it). `--bulk` loads a new collection in one run, as a user loading a corpus would (the HNSW graph
built once at its end), and measures the rate of adding --step documents to it at each size, --steps times
(2: the first step after a server start reads what the buffers lack, the next one is the steady rate).

Printed per size: the ingest rate of each 100k documents added, and the WAL each ingest call wrote (bytes and
whole-page images: a page's first change after a checkpoint logs it whole); with `--sample N`, the N statements
(and wait events) the server's backends spent each call on, sampled from pg_stat_activity; the sizes of the
chunks, embeddings and postings tables with their indexes; peak memory of this process and of the PostgreSQL
server; search p50/p95/p99 per plan (vector, lexical, weighted, weighted+rerank), cold (each query's first run
after the build) and warm (its second); HNSW recall@10 against exact search per ef_search, the one the plans use
at that size among them (with --compare, also for an index of the other vector type built beside it over the
same rows, and both sizes); and SciFact's nDCG@10 (lexical, weighted) on the judged queries, which must hold as
the collection grows around them.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import gc
import json
import random
import re
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psutil
import psycopg
from _common import DATA, SCIFACT, cached, chunk_texts, embed_once, pct, private_ragd, scifact_docs
from _results import Results

import ragd
from ragd.eval import metrics
from ragd.retrieve.legs import ef_search_at, vector_leg
from ragd.store import embedded
from ragd.store import queries as sql_text
from ragd.types import Filters

SPLIT = re.compile(r"(?<=[.!?])\s+")
REAL = 5183  # SciFact's corpus, first
CACHE = Path(__file__).resolve().parent / "results" / "scale"


class SentenceMix:
    """The default model's vectors, looked up: a text embedded once (a SciFact chunk, a query) has its own; any
    other chunk the normalised mean of its sentences'. A chunk's text is cut into pool sentences where the split
    finds them, else by the sentences it starts with (a sentence with no end mark runs into the next one, and a
    chunk may end mid-sentence: that sentence counts); its title line and a piece cut at the chunk's start count
    for nothing. A chunk with no sentence found at all (none in 2,000 here) gets the pool's mean direction.

    A mean of sentences leans towards what all sentences share (the pool's mean direction): such chunks sit closer
    to each other than real documents do (for means of unrelated sentences: cosine to the mean direction 0.91
    against 0.76 for SciFact's chunks, pairwise 0.83 against 0.63). So that share is taken out: alpha times the mean
    direction is subtracted before normalising, alpha set so the chunks' average cosine to it is SciFact's."""

    name = "bge-small-en-mix"
    dims = 384
    KEY = 16  # characters of a sentence's start it is found by

    def __init__(self, whole: dict[str, np.ndarray], sentences: dict[str, np.ndarray], real: np.ndarray,
                 sample: list[str]):
        self._whole, self._sentences = whole, sentences
        self._starts: dict[str, list[str]] = {}
        for text in sorted(sentences):
            self._starts.setdefault(text[:self.KEY], []).append(text)
        mean = np.mean([sentences[t] for t in sorted(sentences)], axis=0)
        self._centre = mean / np.linalg.norm(mean)
        self.target = float(np.mean(real @ self._centre))
        means = np.stack([m for m in (self._mean(t) for t in sample) if m is not None])
        low, high = 0.0, 1.0  # the average cosine to the centre falls as alpha grows
        for _ in range(40):
            self.alpha = (low + high) / 2
            low, high = (self.alpha, high) if self._cosines(means).mean() > self.target else (low, self.alpha)

    def _cosines(self, means: np.ndarray) -> np.ndarray:
        moved = means - self.alpha * self._centre
        return (moved @ self._centre) / np.linalg.norm(moved, axis=1)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return np.stack([self._vector(t) for t in texts]).astype(np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self._whole[text].astype(np.float32)

    def _vector(self, text: str) -> np.ndarray:
        if text in self._whole:
            return self._whole[text]
        mean = self._mean(text)
        if mean is None:
            return self._centre
        moved = mean - self.alpha * self._centre
        return moved / np.linalg.norm(moved)

    def _mean(self, text: str) -> np.ndarray | None:
        found = [self._sentences[s] for piece in SPLIT.split(text.split("\n\n", 1)[-1])
                 for s in self._parts(piece)]
        return np.mean(found, axis=0) if found else None

    def _parts(self, piece: str) -> list[str]:
        if piece in self._sentences:
            return [piece]
        out = []
        while piece:
            starting = self._starts.get(piece[:self.KEY], [])
            whole = [s for s in starting if piece.startswith(s)]
            if not whole:
                out += [s for s in starting if s.startswith(piece)][:1]  # the chunk ends inside it
                break
            out.append(max(whole, key=len))
            piece = piece[len(out[-1]):].lstrip()
        return out


def sentence_pool() -> list[str]:
    """Sentences to draw documents from: SciFact's and SQuAD's, except those of the documents SciFact's judged
    queries find relevant (a drawn document holding such a sentence would be a relevant document nobody judged,
    and the quality check would count it as a miss)."""
    judged = {d for rels in _judged()[1].values() for d in rels}
    pool = [s for d in scifact_docs() if f"scifact-{d['id']}" not in judged
            for s in SPLIT.split(str(d["text"])) if len(s.split()) >= 4]
    squad = DATA / "qa" / "squad2" / "dev-v2.0-first16.json"
    if squad.exists():
        for article in json.loads(squad.read_text(encoding="utf-8"))["data"]:
            for paragraph in article["paragraphs"]:
                pool += [s for s in SPLIT.split(paragraph["context"]) if len(s.split()) >= 4]
    return pool


class Pool:
    """The sentences documents are drawn from (sorted, each once) and each one's nearest sentences by the default
    model's vectors (NEAREST of them; computed once and kept under bench/results/scale beside the vectors)."""

    NEAREST = 32

    def __init__(self, sentences: list[str], vectors: dict[str, np.ndarray]):
        self.sentences = sentences
        self.vectors = vectors
        matrix = np.stack([vectors[t] for t in sentences]).astype(np.float32)
        path = cached(CACHE, f"nearest-{self.NEAREST}", sentences)
        if path.exists():
            self.nearest = np.load(path)
        else:
            t = time.perf_counter()
            self.nearest = np.zeros((len(sentences), self.NEAREST), dtype=np.int32)
            for at in range(0, len(sentences), 2048):
                sims = matrix[at:at + 2048] @ matrix.T
                sims[np.arange(sims.shape[0]), np.arange(at, at + sims.shape[0])] = -np.inf  # not itself
                top = np.argpartition(-sims, self.NEAREST, axis=1)[:, :self.NEAREST]
                order = np.lexsort((top, -np.take_along_axis(sims, top, axis=1)), axis=1)  # by similarity, then index
                self.nearest[at:at + sims.shape[0]] = np.take_along_axis(top, order, axis=1)
            np.save(path, self.nearest)
            print(f"nearest sentences of {len(sentences)} found once: {time.perf_counter() - t:.0f} s", flush=True)


def documents(pool: Pool, start: int, stop: int) -> list[dict[str, object]]:
    """Documents start..stop-1 (the same on every run). A drawn document is about one thing, as a real one is: a
    sentence drawn at random, then 1 to 8 of its NEAREST nearest sentences (a document of unrelated sentences has a
    vector near the centre of everything, and a million of them are a crowd with no neighbourhoods, as random
    vectors are: HNSW recall@10 at 100k was 0.63 on those against 0.95 on these and on the sentences themselves)."""
    real = scifact_docs() if start < REAL else []
    out: list[dict[str, object]] = []
    for i in range(start, stop):
        if i < REAL:
            d = real[i]
            out.append({"id": f"scifact-{d['id']}", "title": d["title"], "text": d["text"]})
            continue
        rng = random.Random(i)
        seed = rng.randrange(len(pool.sentences))
        picked = [seed, *rng.sample(sorted(pool.nearest[seed].tolist()), rng.randint(1, 8))]
        sentences = [pool.sentences[k] for k in picked]
        out.append({"id": f"gen-{i}", "title": " ".join(sentences[0].split()[:6]), "text": " ".join(sentences),
                    "tags": [f"t{i % 100}"]})
    return out


def queries(pool: Pool, n: int) -> list[str]:
    rng = random.Random(7)
    out = []
    for _ in range(n):
        words = pool.sentences[rng.randrange(len(pool.sentences))].split()
        take = rng.randint(3, 8)
        at = rng.randrange(max(1, len(words) - take))
        out.append(" ".join(words[at:at + take]))
    return out


def server_rss_mb(pgdata: Path) -> float:
    """The server's memory, its shared memory counted once: the sum of its processes' proportional set sizes (a
    shared page divided among the processes that map it), plus its shared memory on huge pages, which no set size
    counts (the largest any one process maps). Summing resident sets counted the shared buffers once per process
    that touched them (30 GB at 1M on a 24 GB machine)."""
    try:
        pid = int((pgdata / "postmaster.pid").read_text().split()[0])
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
        pss = sum(p.memory_full_info().pss for p in procs)
        return (pss + max(_hugetlb(p.pid) for p in procs)) / 2**20
    except (OSError, psutil.Error, ValueError):
        return 0.0


def _hugetlb(pid: int) -> int:
    """Bytes of huge pages the process maps (Linux's smaps_rollup; 0 elsewhere)."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    return sum(int(line.split()[1]) << 10 for line in text.splitlines() if line.endswith("kB")
               and line.split(":")[0] in ("Shared_Hugetlb", "Private_Hugetlb"))


RESULTS = Results("scale")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100000,300000,1000000")
    parser.add_argument("--home", type=Path, help="keep the database here; a later run resumes or skips the build")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--step", type=int, default=20000, help="documents per ingest call")
    parser.add_argument("--bulk", action="store_true",
                        help="load all but the last --step documents of each size in one ingest run (a new "
                             "collection's first run writes its rows and builds the HNSW graph once at its end), "
                             "then add the last --steps steps as later runs do: the rate of adding to that size")
    parser.add_argument("--steps", type=int, default=2,
                        help="with --bulk, how many steps of --step documents end each size (the first after a "
                             "server start reads what its buffers lack; the next is the steady rate)")
    parser.add_argument("--ef", default="40,100,200,400", help="HNSW ef_search values to measure recall@10 at")
    parser.add_argument("--vectors", choices=("bge-mix", "hash"), default="bge-mix")
    parser.add_argument("--vector-type", choices=("halfvec", "vector"), default="halfvec",
                        help="the collection's vector type (halfvec is ragd's default for new collections)")
    parser.add_argument("--sample", type=int, default=0, metavar="N",
                        help="sample what the server's backends run during each ingest step (pg_stat_activity every "
                             "20 ms) and print the N statements and wait events that took most of it")
    parser.add_argument("--compare", action="store_true",
                        help="also build an HNSW index of the other vector type over the same rows and measure it")
    args = parser.parse_args()
    sentences = sorted(set(sentence_pool()))
    pool = Pool(sentences, embed_once(sentences, "sentences", CACHE))
    asked = queries(pool, args.queries)
    judged = _judged()
    with private_ragd("hash", args.home, vector_type=args.vector_type) as client, \
            contextlib.ExitStack() as stack:
        if args.vectors == "bge-mix":
            real = embed_once(sorted(set(chunk_texts(documents(pool, 0, REAL)))), "scifact-chunks", CACHE)
            whole = real | embed_once(sorted(set(asked) | set(judged[0].values())), "queries", CACHE, query=True)
            mix = SentenceMix(whole, pool.vectors,
                              np.stack([real[t] for t in sorted(real)]),
                              chunk_texts(documents(pool, REAL, REAL + 3000)))
            print(f"vectors: SciFact's chunks' own; the others the mean of their sentences' less {mix.alpha:.3f} "
                  f"of the mean direction (average cosine to it {mix.target:.3f}, as SciFact's chunks)")
            client = stack.enter_context(contextlib.closing(ragd.connect(settings=client.settings, embedder=mix)))
        # v2: the judged documents' sentences are not drawn (v1 drew them); v3: the vectors named; v4: documents
        # of near sentences
        col = client.collection(f"scale-v4-{args.vectors}-{args.vector_type}")
        pgdata = client.settings.pgdata
        server_peak = 0.0
        print(f"sentence pool {len(pool.sentences)}; {len(asked)} queries; {len(judged[0])} judged SciFact queries; "
              f"ef_search {client.settings.hnsw_ef_search}, growing from "
              f"{client.settings.hnsw_ef_search_grow_from} chunks")
        with psycopg.connect(client.store.url, autocommit=True) as conn:
            memory = embedded.shared_memory(conn)  # (huge pages or not: a third of the HNSW inserts' time at 1M)
        print(f"server: shared buffers {memory.buffers_mb} MB, huge pages {memory.huge_pages}")
        for size in [int(s) for s in args.sizes.split(",")]:
            have = drawn(client, col)
            marks = []
            began, at = time.perf_counter(), have
            while have < size:
                stop = min(size, have + args.step)
                if args.bulk and have < size - args.steps * args.step:
                    stop = size - args.steps * args.step
                with wal_written(client.store.url) as wal, sampled(client.store.url, args.sample) as running:
                    t = time.perf_counter()
                    report = col.ingest(documents=documents(pool, have, stop))
                    seconds = time.perf_counter() - t
                server_peak = max(server_peak, server_rss_mb(pgdata))
                written = f"WAL {wal[0] / 2**30:.2f} GB, {wal[1]} page images"
                if stop - have > args.step:  # a bulk load: its own line, not a step of the growth curve
                    print(f"  bulk load of {stop - have} documents ({report.chunks} chunks) in one run: "
                          f"{seconds:.0f} s, {(stop - have) / seconds:.0f} documents/s; {written}", flush=True)
                else:
                    marks.append((stop, (stop - have) / seconds, report.chunks))
                    print(f"  built {stop:>8} documents: {marks[-1][1]:7.0f} documents/s this step; {written}",
                          flush=True)
                running.print(seconds, args.sample)
                have = stop
            if marks:
                per_100k = _per_100k(marks)
                print(f"build to {size}: {have - at} documents in {time.perf_counter() - began:.0f} s; "
                      "documents/s per 100k: " + ", ".join(f"{k // 1000}k {v:.0f}" for k, v in per_100k))
            gc.collect()
            gc.freeze()
            t = time.perf_counter()
            done = col.compact()
            print(f"compact: {time.perf_counter() - t:.1f} s, {done['terms']} terms, blocks {done['rows_before']} -> "
                  f"{done['rows_after']}, {done['postings_dropped']} postings of retired chunks dropped")
            with psycopg.connect(client.store.url, autocommit=True) as conn:
                conn.execute("VACUUM (ANALYZE)")
            measure(client, col, size, asked, judged, pgdata, [int(e) for e in args.ef.split(",")], args.compare)
            server_peak = max(server_peak, server_rss_mb(pgdata))
            print(f"peak memory: client RSS {psutil.Process().memory_info().rss / 2**20:.0f} MB (now), server "
                  f"{server_peak:.0f} MB (its processes' PSS, shared memory once)")


@contextlib.contextmanager
def wal_written(url: str) -> Iterator[list[int]]:
    """[bytes, full-page images] of WAL the server wrote while the block ran (the whole server's: nothing else
    writes during a step). A page's first change after a checkpoint logs it whole, so this shows what a step at
    a size pays for touching pages all over its indexes."""
    query = "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn, wal_fpi FROM pg_stat_wal"
    with psycopg.connect(url, autocommit=True) as conn:
        before = conn.execute(query).fetchone()
    out = [0, 0]
    yield out
    with psycopg.connect(url, autocommit=True) as conn:
        after = conn.execute(query).fetchone()
    if before and after:
        out[:] = [int(after[0] - before[0]), int(after[1] - before[1])]


class Sampled:
    """What the server's client backends ran during a step: samples taken, and how many of them found each
    (statement's start, wait event; "cpu" when waiting on nothing) running."""

    def __init__(self) -> None:
        self.samples = 0
        self.running: collections.Counter[tuple[str, str]] = collections.Counter()

    def print(self, seconds: float, top: int) -> None:
        """The top pairs, each as its share of the samples times the step's seconds."""
        for (text, event), n in self.running.most_common(top) if self.samples else []:
            print(f"      {n / self.samples * seconds:6.1f} s  {event:<22} {text}")


@contextlib.contextmanager
def sampled(url: str, wanted: int) -> Iterator[Sampled]:
    """Sampled while the block runs (nothing when `wanted` is 0): pg_stat_activity every 20 ms on a connection of
    its own. Needs no extension: a statement's share of the samples is its share of the step's time."""
    found = Sampled()
    if not wanted:
        yield found
        return
    done = threading.Event()

    def sample() -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            me = conn.info.backend_pid
            while not done.is_set():
                for text, kind, event in conn.execute(
                        "SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 80), wait_event_type, wait_event "
                        "FROM pg_stat_activity WHERE state = 'active' AND backend_type = 'client backend' "
                        "AND pid <> %s", (me,)):
                    found.running[(text, f"{kind}:{event}" if kind else "cpu")] += 1
                found.samples += 1
                time.sleep(0.02)

    thread = threading.Thread(target=sample, name="scale-sampler", daemon=True)
    thread.start()
    try:
        yield found
    finally:
        done.set()
        thread.join()


def drawn(client, col) -> int:  # type: ignore[no-untyped-def]
    """How many documents of the sequence the collection was given: the highest drawn one's number plus one (a
    document found to be a near-duplicate is not stored, so counting the stored documents falls behind and the
    next run would draw those again; any skipped after the highest stored one are drawn again, and skipped again)."""
    with client.store.admin() as conn:
        top, real = conn.execute(
            "SELECT max(substr(external_id, 5)::int) FILTER (WHERE external_id LIKE 'gen-%%'), "
            "count(*) FILTER (WHERE external_id LIKE 'scifact-%%') FROM documents WHERE collection_id = %s",
            (col.collection_id,)).fetchone()
    return int(top) + 1 if top is not None else int(real)


def _per_100k(marks: list[tuple[int, float, int]]) -> list[tuple[int, float]]:
    out: dict[int, list[float]] = {}
    for stop, rate, _ in marks:
        out.setdefault((stop - 1) // 100_000 * 100_000 + 100_000, []).append(rate)
    return [(k, sum(v) / len(v)) for k, v in sorted(out.items())]


def _judged() -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """SciFact's judged test queries (id -> text) and their qrels (ids as this collection names them)."""
    texts = {}
    with open(SCIFACT / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            texts[rec["_id"]] = rec["text"]
    qrels: dict[str, dict[str, int]] = {}
    with open(SCIFACT / "qrels" / "test.tsv", encoding="utf-8") as fh:
        next(fh)
        for line in fh:
            q, d, score = line.rstrip("\n").split("\t")
            qrels.setdefault(q, {})[f"scifact-{d}"] = int(score)
    return {q: texts[q] for q in sorted(qrels) if q in texts}, qrels


def measure(client, col, size: int, asked: list[str], judged, pgdata: Path,  # type: ignore[no-untyped-def]
            efs: list[int], compare: bool) -> None:
    with client.store.admin() as conn:
        chunks = conn.execute("SELECT count(*) FROM chunks WHERE collection_id = %s AND is_active",
                              (col.collection_id,)).fetchone()[0]
        sizes = conn.execute(
            "SELECT c.relname, pg_table_size(c.oid), pg_indexes_size(c.oid) FROM pg_class c "
            "WHERE c.relname IN ('chunks', 'chunk_embeddings', 'lexical_blocks', 'lexical_terms') "
            "ORDER BY c.relname").fetchall()
    ef = ef_search_at(client.settings.hnsw_ef_search, chunks, client.settings.hnsw_ef_search_grow_from)
    print(f"\n== {size} documents, {chunks} active chunks; the plans search HNSW at ef_search {ef} at this size")
    print("sizes: " + "; ".join(f"{name} {t / 2**20:.0f} MB + indexes {i / 2**20:.0f} MB" for name, t, i in sizes))
    plans = [("vector", {"fusion": "vector"}), ("lexical", {"fusion": "lexical"}),
             ("weighted", {"fusion": "weighted"}), ("weighted+rerank", {"fusion": "weighted", "rerank": True})]
    print(f"{'plan':<16} {'cold p50':>9} {'p95':>8} {'p99':>8} | {'warm p50':>9} {'p95':>8} {'p99':>8}  (ms)")
    for name, plan in plans:
        cold, warm = [], []
        for sink in (cold, warm):
            for q in asked if name != "weighted+rerank" else asked[:50]:
                t = time.perf_counter()
                col.search(q, k=10, **plan)
                sink.append((time.perf_counter() - t) * 1000)
        print(f"{name:<16} {pct(cold, 50):9.1f} {pct(cold, 95):8.1f} {pct(cold, 99):8.1f} | "
              f"{pct(warm, 50):9.1f} {pct(warm, 95):8.1f} {pct(warm, 99):8.1f}")
        RESULTS.row("latency", documents=size, chunks=chunks, plan=name, cold_p50_ms=pct(cold, 50),
                    cold_p95_ms=pct(cold, 95), warm_p50_ms=pct(warm, 50), warm_p95_ms=pct(warm, 95),
                    warm_p99_ms=pct(warm, 99))
    kept = col.client.postings.info
    print(f"postings kept in the process (RAGD_LEXICAL_CACHE_MB {client.settings.lexical_cache_mb}): {kept.terms} "
          f"terms, {kept.bytes / 2**20:.0f} MB; terms served whole {kept.hits}, grown {kept.grown}, read {kept.misses}")
    texts, qrels = judged
    recall_sets = {"drawn": asked, "judged": sorted(texts.values())[:len(asked)]}
    qvecs = {q: col.embedder.embed_query(q) for qs in recall_sets.values() for q in qs}
    exact = {q: _vector_top(client, col, qvecs[q], col.vector_type, 0)[0] for q in qvecs}
    efs = sorted({*efs, ef})  # and at the default's ef_search for this size
    sweep(client, col, recall_sets, exact, qvecs, efs, col.vector_type)
    for name in ("lexical", "weighted"):
        runs: dict[str, list[str]] = {}
        for qid, text in texts.items():  # documents in rank order (a document of several chunks once)
            ranked = [str(h.external_id) for h in col.search(text, k=20, fusion=name)]
            runs[qid] = list(dict.fromkeys(ranked))[:10]
        score = metrics.evaluate(runs, qrels)["ndcg@10"]
        print(f"SciFact nDCG@10 {name}: {score:.4f} ({len(texts)} judged queries)", flush=True)
        RESULTS.row("quality", documents=size, plan=name, scifact_ndcg_at_10=score, judged_queries=len(texts))
    RESULTS.save()  # after each size: a run stopped at 1M keeps the sizes measured
    if compare:  # a second index over the same rows of the other type (its own name; queries cast to match it),
        # last: at 1M its build is the longest step of the measurement
        other = "vector" if col.vector_type == "halfvec" else "halfvec"
        name = f"scale_{other}_{col.collection_id.hex[:16]}"
        t = time.perf_counter()
        with psycopg.connect(client.store.url, autocommit=True) as conn:
            index = sql_text.create_hnsw_index(col.collection_id, col.embed_model, col.dims, other)
            conn.execute(index.as_string(conn).replace(sql_text.hnsw_index_name(col.collection_id), name, 1))
            built = time.perf_counter() - t
            both = conn.execute("SELECT relname, pg_relation_size(oid) FROM pg_class WHERE relname IN (%s, %s) "
                                "ORDER BY 1", (sql_text.hnsw_index_name(col.collection_id), name)).fetchall()
        print(f"{other} index built in {built:.0f} s; HNSW index sizes: "
              + ", ".join(f"{other if n == name else col.vector_type} {b / 2**20:.0f} MB" for n, b in both),
              flush=True)
        try:
            sweep(client, col, recall_sets, exact, qvecs, efs, other)
        finally:  # gone again: every later insert would update both graphs
            with psycopg.connect(client.store.url, autocommit=True) as conn:
                conn.execute(f"DROP INDEX IF EXISTS {name}")


def _vector_top(client, col, qvec: np.ndarray, vector_type: str,  # type: ignore[no-untyped-def]
                ef: int) -> tuple[list[tuple[uuid.UUID, float]], float]:
    """The vector leg's top 10 (chunk, cosine similarity) and the milliseconds the leg took (the session's checkout
    not counted): exact search when ef is 0, else HNSW at that ef_search."""
    with client.store.tenant(col.tenant) as conn:
        t = time.perf_counter()
        found = vector_leg(conn, collection_id=col.collection_id, embed_model=col.embed_model, dims=col.dims,
                           qvec=qvec, limit=10, filters=Filters(), ef_search=max(ef, 1),
                           exact_threshold=client.settings.exact_scan_threshold, vector_type=vector_type,
                           force_exact=ef == 0)
        took = (time.perf_counter() - t) * 1000
    return [(c.chunk_id, c.score) for c in found], took


TIE = 1e-3  # a result within this cosine of the exact 10th is as near as it (ann-benchmarks counts it a hit)


def sweep(client, col, recall_sets: dict[str, list[str]], exact, qvecs,  # type: ignore[no-untyped-def]
          efs: list[int], vector_type: str) -> None:
    """The vector leg's recall/latency curve per ef_search (the leg alone, warm: each query run once before), for
    the drawn queries and for SciFact's judged ones: recall@10 against exact search, strictly (the same chunks) and
    with ties (a chunk as near as the exact 10th, within TIE, counts)."""
    for ef in efs:
        figures = []
        for name, asked in recall_sets.items():
            strict, tied, took = [], [], []
            for q in asked:
                _vector_top(client, col, qvecs[q], vector_type, ef)
                found, ms = _vector_top(client, col, qvecs[q], vector_type, ef)
                took.append(ms)
                truth = exact[q]
                tenth = truth[-1][1] if truth else 1.0
                strict.append(len({c for c, _ in found} & {c for c, _ in truth}) / max(1, len(truth)))
                tied.append(min(1.0, sum(score >= tenth - TIE for _, score in found) / max(1, len(truth))))
            figures.append(f"{name} {sum(strict) / len(strict):.3f} (with ties {sum(tied) / len(tied):.3f}), "
                           f"p50 {pct(took, 50):.1f} p95 {pct(took, 95):.1f} ms")
        print(f"HNSW {vector_type:<7} ef_search {ef:>4}: recall@10 against exact search: " + "; ".join(figures),
              flush=True)
        RESULTS.row("hnsw recall", vector_type=vector_type, ef_search=ef, recall=" ; ".join(figures))


if __name__ == "__main__":
    main()
