"""The library's rows outside ingestion, read and written in a tenant's session: collections, documents and
their versions, chunks, a version's source, deletions, ingestion runs with their progress, evaluations and
answers' reproducibility records. Each function takes the session's connection; values are checked by the caller."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from typing import Any

from ..errors import DocumentNotFound, InvalidRequest, NotFound, RunNotFound
from . import queries
from .originals import Originals


def rows_as_dicts(cur: Any) -> list[dict[str, Any]]:
    names = [d.name for d in cur.description or ()]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def _one(cur: Any) -> dict[str, Any] | None:
    row = cur.fetchone()
    return None if row is None else dict(zip([d.name for d in cur.description or ()], row))


# -- collections ---------------------------------------------------------------------------------------------


def collection(conn: Any, name: str) -> dict[str, Any] | None:
    """The collection's row, or None."""
    return _one(conn.execute(queries.GET_COLLECTION, {"name": name}))


def create_collection(conn: Any, collection_id: uuid.UUID, tenant: str, name: str, embed_model: str, dims: int,
                      policy: Mapping[str, Any], vector_type: str, ef_construction: int) -> None:
    """A collection's row (its model, dims, chunk policy and index precision pinned) and its BM25 statistics."""
    conn.execute(queries.CREATE_COLLECTION, {
        "collection_id": collection_id, "tenant_id": tenant, "name": name, "embed_model": embed_model,
        "embed_dims": dims, "chunk_policy": json.dumps(dict(policy)), "vector_type": vector_type,
        "hnsw_ef_construction": ef_construction})
    conn.execute(queries.INIT_LEXICAL_STATS, {"collection_id": collection_id, "tenant_id": tenant})


def collections(conn: Any) -> list[dict[str, Any]]:
    return rows_as_dicts(conn.execute(queries.LIST_COLLECTIONS))


# -- documents, chunks and sources ---------------------------------------------------------------------------


def documents_page(conn: Any, collection_id: uuid.UUID, limit: int, offset: int, find: str | None, tag: str | None,
                   source_type: str | None) -> tuple[list[dict[str, Any]], int]:
    """A page of the collection's documents by external id, and how many match in all."""
    args = {"collection_id": collection_id, "limit": limit, "offset": offset, "find": find or None,
            "tag": tag or None, "source_type": source_type or None}
    rows = rows_as_dicts(conn.execute(queries.LIST_DOCUMENTS, args))
    total = conn.execute(queries.COUNT_DOCUMENTS, args).fetchone()
    return rows, int(total[0] if total else 0)


def chunk(conn: Any, collection_id: uuid.UUID, name: str, chunk_id: str) -> dict[str, Any]:
    """One chunk of the collection (any version of its document) with its document's id, title and version, its
    pages and boxes (where extraction knew them) and whether its original file is kept."""
    try:
        key = uuid.UUID(str(chunk_id))
    except ValueError:
        raise InvalidRequest(f"{chunk_id!r} is not a chunk id (a UUID)") from None
    rows = rows_as_dicts(conn.execute(queries.GET_CHUNK, {"chunk_id": key, "collection_id": collection_id}))
    if not rows:
        raise NotFound(f"no chunk {chunk_id} in collection {name!r}")
    row = rows[0]
    meta = row["metadata"] or {}
    row["boxes"] = [b for b in meta.get("boxes", []) if isinstance(b, dict) and "bbox" in b]
    row["pages"] = sorted({int(p) for p in meta.get("pages", [])} | {int(b["page"]) for b in row["boxes"]
                                                                     if b.get("page") is not None})
    return row


def source(conn: Any, collection_id: uuid.UUID, name: str, ref: str, version: str | None,
           original: bool = True) -> dict[str, Any]:
    """A version of a document (the active one unless named by id or label) with where it came from; with
    `original`, NotFound unless its original file is kept."""
    rows = rows_as_dicts(conn.execute(queries.DOCUMENT_SOURCE, {"collection_id": collection_id, "ref": str(ref),
                                                                 "version": version}))
    if not rows:
        if version is None:
            raise DocumentNotFound(f"no document {ref!r} in collection {name!r}")
        raise DocumentNotFound(f"no version {version!r} of document {ref!r} in collection {name!r}")
    if original and rows[0]["source_sha256"] is None:
        raise NotFound(f"the original file of {rows[0]['external_id']!r} ({rows[0]['version_label']}) is not "
                       "kept: it was stored before originals were kept, or given as text; ingest it again")
    return rows[0]


def document(conn: Any, collection_id: uuid.UUID, name: str, ref: str) -> dict[str, Any]:
    """A document by external id or doc id, with its versions."""
    doc = _one(conn.execute(queries.GET_DOCUMENT, {"collection_id": collection_id, "ref": str(ref)}))
    if doc is None:
        raise DocumentNotFound(f"no document {ref!r} in collection {name!r}")
    doc["versions"] = rows_as_dicts(conn.execute(queries.DOCUMENT_VERSIONS, {"doc_id": doc["doc_id"]}))
    return doc


def delete_document(conn: Any, collection_id: uuid.UUID, name: str, ref: str, tenant: str,
                    originals: Originals) -> tuple[uuid.UUID, Any]:
    """Delete a document and all its versions in this transaction: (its doc id, the originals no version keeps
    any more, to be removed once it commits)."""
    row = conn.execute(queries.GET_DOCUMENT, {"collection_id": collection_id, "ref": str(ref)}).fetchone()
    if row is None:
        raise DocumentNotFound(f"no document {ref!r} in collection {name!r}")
    doc_id = row[0]
    conn.execute(queries.LOCK_DOCUMENT, {"doc_id": doc_id})
    active = [r[0] for r in conn.execute(queries.ACTIVE_VERSIONS_OF, {"doc_id": doc_id})]
    if active:
        for statement in queries.RETIRE_VERSIONS:
            conn.execute(statement, {"versions": active, "collection_id": collection_id})
    sources = [r[0] for r in conn.execute(queries.VERSION_SOURCES, {"doc_id": doc_id})]
    conn.execute(queries.DELETE_DOCUMENT, {"doc_id": doc_id})
    gone = originals.forget(conn, tenant, sources)
    conn.execute(queries.BUMP_GENERATION, {"collection_id": collection_id})
    return uuid.UUID(str(doc_id)), gone


def reindex_sources(conn: Any, collection_id: uuid.UUID) -> list[dict[str, Any]]:
    """Every document's active version with where it came from and its labels (`ragd reindex`)."""
    return rows_as_dicts(conn.execute(queries.REINDEX_SOURCES, {"collection_id": collection_id}))


# -- runs ----------------------------------------------------------------------------------------------------


def runs(conn: Any, collection_id: uuid.UUID, limit: int) -> list[dict[str, Any]]:
    """The collection's latest ingestion runs, newest first."""
    return rows_as_dicts(conn.execute(queries.LIST_RUNS, {"collection_id": collection_id, "limit": limit}))


def run(conn: Any, run_id: str, tenant: str) -> dict[str, Any]:
    """One ingestion run (id or unique prefix) of the session's tenant, with every item, its files and progress."""
    cur = conn.execute(queries.GET_RUN, {"prefix": f"{run_id}%"})
    names = [d.name for d in cur.description or ()]
    rows = cur.fetchall()
    if not rows:
        raise RunNotFound(f"no ingestion run {run_id!r} for tenant {tenant!r}")
    if len(rows) > 1:
        raise InvalidRequest(f"run id prefix {run_id!r} is ambiguous; give more characters")
    found = dict(zip(names, rows[0]))
    found["items"] = rows_as_dicts(conn.execute(queries.RUN_ITEMS, {"run_id": found["run_id"]}))
    found["files"] = dict(conn.execute(queries.RUN_FILES, {"run_id": found["run_id"]}).fetchall())
    found["file_list"] = rows_as_dicts(conn.execute(queries.RUN_FILE_LIST, {"run_id": found["run_id"]}))
    found["progress"] = progress(found)
    return found


def progress(run: Mapping[str, Any]) -> dict[str, Any]:
    """Done/total per stage, the rate and the time left of a run (any run: one not queued is one stage)."""
    files = run.get("files") or {}
    items = run.get("items") or []
    counts: dict[str, int] = {}
    for item in items:
        counts[item["status"]] = counts.get(item["status"], 0) + 1
    started, finished = run.get("started_at"), run.get("finished_at")
    elapsed = ((finished.timestamp() if finished else time.time()) - started.timestamp()) if started else 0.0
    out: dict[str, Any] = {"items": dict(sorted(counts.items())), "items_done": len(items),
                           "chunks": sum(i["chunk_count"] for i in items if i["status"] in ("ingested", "updated")),
                           "elapsed_s": round(max(elapsed, 0.0), 3)}
    if files:
        total = sum(files.values())
        rate = files.get("done", 0) / elapsed if elapsed > 0 else 0.0
        out["files"] = {"total": total, **{k: files.get(k, 0) for k in ("queued", "running", "done", "cancelled")}}
        out["files_per_s"] = round(rate, 3)
        left = total - files.get("done", 0) - files.get("cancelled", 0)
        out["eta_s"] = 0.0 if left == 0 else round(left / rate, 1) if rate > 0 else None  # None: no rate yet
    return out


# -- evaluations and answers' records ------------------------------------------------------------------------


def save_evaluation(conn: Any, tenant: str, collection: str, dataset: str, kind: str,
                    metrics: Mapping[str, Mapping[str, Any]], config: Mapping[str, Any] | None) -> uuid.UUID:
    """Keep an evaluation's figures ({plan: {metric: number}}; what is not a number is left out)."""
    numbers = {str(plan): {str(k): float(v) for k, v in figures.items()
                           if isinstance(v, int | float) and not isinstance(v, bool)}
               for plan, figures in metrics.items()}
    eval_id = uuid.uuid4()
    conn.execute(queries.INSERT_EVALUATION, {
        "eval_id": eval_id, "tenant_id": tenant, "collection": collection, "dataset": dataset, "kind": kind,
        "config": json.dumps(dict(config or {}), sort_keys=True, default=str),
        "metrics": json.dumps(numbers, sort_keys=True)})
    return eval_id


def evaluations(conn: Any, collection: str | None, limit: int) -> list[dict[str, Any]]:
    """The session tenant's kept evaluations, oldest first (the latest `limit`)."""
    return rows_as_dicts(conn.execute(queries.LIST_EVALUATIONS, {"collection": collection, "limit": limit}))[::-1]


def execution(conn: Any, ref: str, tenant: str) -> dict[str, Any]:
    """One reproducibility record (query id or unique prefix) of the session's tenant, in any collection."""
    rows = rows_as_dicts(conn.execute(queries.GET_EXECUTION, {"prefix": f"{ref}%"}))
    if not rows:
        raise NotFound(f"no query execution {ref!r} for tenant {tenant!r}")
    if len(rows) > 1:
        raise InvalidRequest(f"query id prefix {ref!r} is ambiguous; give more characters")
    return rows[0]
