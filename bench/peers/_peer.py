"""One framework's side of bench/peers: ingest the given texts and vectors, then search. Runs in bench/.venv-peers.

    python _peer.py SYSTEM DATABASE_URL DATA_DIR DEPTH K

DATA_DIR holds docs.jsonl ({"id", "text"} a line), doc_vectors.npy, queries.jsonl ({"id", "text"}) and
query_vectors.npy, rows in the same order. Prints one JSON object: ingest seconds (from an empty table to
searchable, indexes built), and for each mode (keyword, vector, hybrid) the ranked document ids at DEPTH and the
milliseconds of each query at K. Each system is used the way its documentation shows, with HNSW m=16,
ef_construction=64 (pgvector's defaults, ragd's too) and ef_search=100 everywhere.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

EF_SEARCH = 100
DIMS = 384


def _load(data: Path) -> tuple[list[dict[str, str]], np.ndarray, list[dict[str, str]], np.ndarray]:
    def lines(name: str) -> list[dict[str, str]]:
        return [json.loads(line) for line in (data / name).read_text(encoding="utf-8").splitlines()]

    return (lines("docs.jsonl"), np.load(data / "doc_vectors.npy"),
            lines("queries.jsonl"), np.load(data / "query_vectors.npy"))


Modes = dict[str, Callable[[str, np.ndarray, int], list[str]]]


def _sqlalchemy(url: str, driver: str) -> str:
    return url.replace("postgresql://", f"postgresql+{driver}://", 1)


def llamaindex(url: str, docs: list[dict[str, str]], vectors: np.ndarray) -> tuple[float, Modes]:
    """llama-index-vector-stores-postgres: PGVectorStore(hybrid_search=True): a generated tsvector column with a GIN
    index, ts_rank over to_tsquery of the words joined by |; HYBRID mode returns the dense hits then the sparse
    ones (deduplicated, no fusion)."""
    from llama_index.core.schema import TextNode
    from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryMode
    from llama_index.vector_stores.postgres import PGVectorStore

    started = time.perf_counter()
    store = PGVectorStore.from_params(
        connection_string=_sqlalchemy(url, "psycopg2"), async_connection_string=_sqlalchemy(url, "asyncpg"),
        table_name="scifact", embed_dim=DIMS, hybrid_search=True, text_search_config="english",
        hnsw_kwargs={"hnsw_m": 16, "hnsw_ef_construction": 64, "hnsw_ef_search": EF_SEARCH,
                     "hnsw_dist_method": "vector_cosine_ops"})
    nodes = [TextNode(id_=d["id"], text=d["text"], embedding=v.tolist()) for d, v in zip(docs, vectors)]
    for start in range(0, len(nodes), 2048):  # VectorStoreIndex's insert_batch_size
        store.add(nodes[start:start + 2048])
    seconds = time.perf_counter() - started

    def search(mode: VectorStoreQueryMode) -> Callable[[str, np.ndarray, int], list[str]]:
        def run(text: str, vector: np.ndarray, k: int) -> list[str]:
            query = VectorStoreQuery(query_embedding=vector.tolist(), query_str=text, similarity_top_k=k,
                                     sparse_top_k=k, mode=mode)
            return list(store.query(query).ids or [])
        return run

    return seconds, {"keyword": search(VectorStoreQueryMode.TEXT_SEARCH),
                     "vector": search(VectorStoreQueryMode.DEFAULT),
                     "hybrid": search(VectorStoreQueryMode.HYBRID)}


def langchain(url: str, docs: list[dict[str, str]], vectors: np.ndarray) -> tuple[float, Modes]:
    """langchain-postgres PGVectorStore with a HybridSearchConfig: a tsvector column, ts_rank_cd over plainto_tsquery
    (all words must match), fused with the dense hits by its default weighted_sum_ranking (min-max normalised
    scores, 0.5 each). Upstream keeps the first query's words in a shared config (`fts_query` is set once and
    reused), so each query gets a fresh config here."""
    from langchain_core.embeddings import Embeddings
    from langchain_postgres import PGEngine, PGVectorStore
    from langchain_postgres.v2.hybrid_search_config import HybridSearchConfig
    from langchain_postgres.v2.indexes import HNSWIndex, HNSWQueryOptions

    class Given(Embeddings):
        query: list[float] = []

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            raise AssertionError("documents come with their vectors")

        def embed_query(self, text: str) -> list[float]:
            return self.query

    def config(k: int, weights: tuple[float, float] = (0.5, 0.5), dense: bool = True) -> HybridSearchConfig:
        return HybridSearchConfig(tsv_column="content_tsv", primary_top_k=k if dense else 0, secondary_top_k=k,
                                  fusion_function_parameters={"primary_results_weight": weights[0],
                                                              "secondary_results_weight": weights[1]})

    given = Given()
    started = time.perf_counter()
    engine = PGEngine.from_connection_string(url=_sqlalchemy(url, "psycopg"))
    engine.init_vectorstore_table(table_name="scifact", vector_size=DIMS, hybrid_search_config=config(10),
                                  overwrite_existing=True)
    store = PGVectorStore.create_sync(engine=engine, table_name="scifact", embedding_service=given,
                                      hybrid_search_config=config(10),
                                      index_query_options=HNSWQueryOptions(ef_search=EF_SEARCH))
    ids = {str(uuid.uuid5(uuid.NAMESPACE_URL, d["id"])): d["id"] for d in docs}
    store.add_embeddings([d["text"] for d in docs], [v.tolist() for v in vectors],
                         metadatas=[{"doc": d["id"]} for d in docs], ids=list(ids))
    store.apply_vector_index(HNSWIndex(m=16, ef_construction=64))
    store.apply_hybrid_search_index()
    seconds = time.perf_counter() - started

    def names(found: list[Any]) -> list[str]:
        return [ids[str(doc.id)] for doc in found]

    def keyword(text: str, vector: np.ndarray, k: int) -> list[str]:
        given.query = vector.tolist()  # no dense hits (LIMIT 0): the sparse leg alone, by its own score
        return names(store.similarity_search(text, k=k, hybrid_search_config=config(k, (0.0, 1.0), dense=False)))

    def dense(text: str, vector: np.ndarray, k: int) -> list[str]:
        return names(store.similarity_search_by_vector(vector.tolist(), k=k, hybrid_search_config=None))

    def hybrid(text: str, vector: np.ndarray, k: int) -> list[str]:
        given.query = vector.tolist()
        return names(store.similarity_search(text, k=k, hybrid_search_config=config(k)))

    return seconds, {"keyword": keyword, "vector": dense, "hybrid": hybrid}


def haystack(url: str, docs: list[dict[str, str]], vectors: np.ndarray) -> tuple[float, Modes]:
    """pgvector-haystack: PgvectorDocumentStore (HNSW at creation, GIN on to_tsvector(content)), the keyword
    retriever ranks by ts_rank_cd over plainto_tsquery (all words must match); hybrid is the documented pipeline:
    embedding + keyword retrievers joined by DocumentJoiner's reciprocal rank fusion."""
    from haystack import Document
    from haystack.components.joiners import DocumentJoiner
    from haystack.utils import Secret
    from haystack_integrations.components.retrievers.pgvector import (
        PgvectorEmbeddingRetriever,
        PgvectorKeywordRetriever,
    )
    from haystack_integrations.document_stores.pgvector import PgvectorDocumentStore

    started = time.perf_counter()
    store = PgvectorDocumentStore(
        connection_string=Secret.from_token(url), table_name="scifact", embedding_dimension=DIMS,
        vector_function="cosine_similarity", recreate_table=True, search_strategy="hnsw",
        hnsw_index_creation_kwargs={"m": 16, "ef_construction": 64}, hnsw_ef_search=EF_SEARCH, language="english")
    store.write_documents([Document(id=d["id"], content=d["text"], embedding=v.tolist())
                           for d, v in zip(docs, vectors)])
    seconds = time.perf_counter() - started
    embedding = PgvectorEmbeddingRetriever(document_store=store)
    keyword = PgvectorKeywordRetriever(document_store=store)
    joiner = DocumentJoiner(join_mode="reciprocal_rank_fusion")

    def sparse(text: str, vector: np.ndarray, k: int) -> list[str]:
        return [d.id for d in keyword.run(query=text, top_k=k)["documents"]]

    def dense(text: str, vector: np.ndarray, k: int) -> list[str]:
        return [d.id for d in embedding.run(query_embedding=vector.tolist(), top_k=k)["documents"]]

    def hybrid(text: str, vector: np.ndarray, k: int) -> list[str]:
        both = [embedding.run(query_embedding=vector.tolist(), top_k=k)["documents"],
                keyword.run(query=text, top_k=k)["documents"]]
        return [d.id for d in joiner.run(documents=both, top_k=k)["documents"]]

    return seconds, {"keyword": sparse, "vector": dense, "hybrid": hybrid}


def floor(url: str, docs: list[dict[str, str]], vectors: np.ndarray) -> tuple[float, Modes]:
    """No framework: the least a store searchable by keyword and by vector does, for a reference time. One table
    (id primary key, text, a generated tsvector, the vector) written by one binary COPY, then a GIN index on the
    tsvector and the HNSW index. Keyword: ts_rank_cd over the query's words joined by |; vector: HNSW; hybrid:
    reciprocal rank fusion (k=60) of the two. A system that keeps texts, vectors and a keyword index cannot
    ingest much faster than this on the same server."""
    import psycopg
    from pgvector.psycopg import register_vector

    started = time.perf_counter()
    conn = psycopg.connect(url, autocommit=True)
    register_vector(conn)
    conn.execute("CREATE TABLE scifact (id text PRIMARY KEY, content text NOT NULL, embedding vector(384) NOT NULL, "
                 "tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED)")
    with conn.cursor().copy("COPY scifact (id, content, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["text", "text", "vector"])
        for d, v in zip(docs, vectors):
            copy.write_row((d["id"], d["text"], v.astype(np.float32)))
    conn.execute("CREATE INDEX ON scifact USING gin (tsv)")
    conn.execute("CREATE INDEX ON scifact USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)")
    seconds = time.perf_counter() - started
    conn.execute(f"SET hnsw.ef_search = {EF_SEARCH}")

    def keyword(text: str, vector: np.ndarray, k: int) -> list[str]:
        rows = conn.execute(
            "SELECT id FROM scifact, to_tsquery('simple', replace(plainto_tsquery('english', %s)::text, '&', '|')) q "
            "WHERE tsv @@ q ORDER BY ts_rank_cd(tsv, q) DESC, id LIMIT %s", (text, k)).fetchall()
        return [r[0] for r in rows]

    def dense(text: str, vector: np.ndarray, k: int) -> list[str]:
        rows = conn.execute("SELECT id FROM scifact ORDER BY embedding <=> %s LIMIT %s",
                            (vector.astype(np.float32), k)).fetchall()
        return [r[0] for r in rows]

    def hybrid(text: str, vector: np.ndarray, k: int) -> list[str]:
        fused: dict[str, float] = {}
        for ranked in (dense(text, vector, k), keyword(text, vector, k)):
            for rank, doc in enumerate(ranked):
                fused[doc] = fused.get(doc, 0.0) + 1.0 / (60 + rank + 1)
        return sorted(fused, key=lambda d: (-fused[d], d))[:k]

    return seconds, {"keyword": keyword, "vector": dense, "hybrid": hybrid}


SYSTEMS = {"llamaindex": llamaindex, "langchain": langchain, "haystack": haystack, "floor": floor}


def main() -> None:
    system, url, data, depth, k = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    docs, doc_vectors, queries, query_vectors = _load(data)
    seconds, modes = SYSTEMS[system](url, docs, doc_vectors)
    out: dict[str, Any] = {"system": system, "ingest_s": seconds, "runs": {}, "latency_ms": {}}
    for mode, search in modes.items():
        for q, v in list(zip(queries, query_vectors))[:10]:  # warm up, as ragd's runs are
            search(q["text"], v, k)
        out["runs"][mode] = {q["id"]: search(q["text"], v, depth) for q, v in zip(queries, query_vectors)}
        timings = []
        for q, v in zip(queries, query_vectors):
            t0 = time.perf_counter()
            search(q["text"], v, k)
            timings.append((time.perf_counter() - t0) * 1000)
        out["latency_ms"][mode] = timings
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
