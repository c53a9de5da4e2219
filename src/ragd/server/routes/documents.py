"""Documents: seed 002's `/v1/index` of texts, uploads of files (stored now, or queued as jobs), a collection's
documents, one document with its versions, its original file, what extraction read from it, its pages drawn with
a chunk's boxes, its deletion; one chunk."""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Query
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from ... import jobs
from ...engine import Ragd
from ...ingest.normalize import unstorable
from ...ingest.uploads import spool, spool_folder
from ...types import ChunkPolicy, jsonable
from ..deps import NAME, TEXT, UUID, CollectionParam, Files, Id, Int, Rag, Ref, Strict, Tenant, VersionParam
from ..errors import error_body, errs
from ..idempotency import IdempotencyKey, hashed, idempotent, request_hash

router = APIRouter()


class IndexDocument(BaseModel):
    model_config = ConfigDict(extra="forbid")
    content: Any = None  # checked per item: a bad item is listed in `failed`, the rest are indexed
    metadata: Any = None
    id: Any = None
    sourceId: Any = None


class IndexRequest(Strict):
    """Seed 002 POST /api/rag/index."""

    documents: list[IndexDocument] = Field(max_length=1000)
    namespace: str = Field(default="default", pattern=NAME, max_length=128)
    chunkSize: Int = Field(default=512, ge=64, le=2000)
    chunkOverlap: Int = Field(default=100, ge=0, le=1000)


class IndexFailure(BaseModel):
    index: int
    error: str


class IndexResponse(BaseModel):
    success: bool
    indexed: int
    chunksCreated: int
    namespace: str
    total: int
    failed: list[IndexFailure]


@router.post("/v1/index", response_model=IndexResponse, tags=["documents"],
          responses=errs(400, 401, 409, 422, 429, 500, 503))
def index(body: IndexRequest, r: Rag, who: Tenant, idempotency_key: IdempotencyKey = None) -> Any:
    """Seed 002: index a batch; 200 whatever its items hold, each item that could not be indexed listed in
    `failed` (400 only for a body that is not a batch at all).

    Documents become searchable batch by batch as they are stored: a client that loses the connection may
    find some stored. Send `Idempotency-Key` to retry safely: the same key with the same body returns the
    first request's response (header `Idempotent-Replayed: true`) or, if it never finished, runs again (what it
    stored is found unchanged); the same key with another body is 422, and while the first still runs, 409."""
    return idempotent(r, who, idempotency_key, lambda: request_hash("index", body.model_dump()),
                       lambda: _index(body, r, who))


def _index(body: IndexRequest, r: Ragd, who: str) -> dict[str, Any]:
    failed: list[dict[str, Any]] = []
    docs: list[tuple[int, dict[str, Any]]] = []
    for n, d in enumerate(body.documents):
        problem = _index_problem(d)
        if problem:
            failed.append({"index": n, "error": problem})
            continue
        ref = d.id or d.sourceId or "doc-" + hashlib.sha256(d.content.encode("utf-8")).hexdigest()[:16]
        docs.append((n, {"id": str(ref), "text": d.content, "metadata": d.metadata or {}}))
    indexed = chunks = 0
    if docs:
        overlap = min(body.chunkOverlap, body.chunkSize // 2)
        policy = ChunkPolicy(target_tokens=body.chunkSize * 9 // 10, min_tokens=body.chunkSize * 7 // 10,
                             max_tokens=body.chunkSize, hard_cap_tokens=max(body.chunkSize * 8 // 5, 64),
                             overlap_tokens=overlap)
        col = r.collection(body.namespace, tenant=who, policy=policy)
        report = col.ingest(documents=[d for _, d in docs])
        outcome = {item.external_id: item for item in report.items}
        for n, doc in docs:
            item = outcome[doc["id"]]
            if item.status == "failed":
                failed.append({"index": n, "error": f"{item.error_code}: {item.reason}"})
            else:
                indexed += 1
                chunks += item.chunks
    failed.sort(key=lambda f: f["index"])
    return {"success": not failed, "indexed": indexed, "chunksCreated": chunks, "namespace": body.namespace,
            "total": len(body.documents), "failed": failed}


@router.post("/v1/documents", tags=["documents"], responses={
    **errs(400, 401, 409, 413, 422, 429, 500, 503),
    202: {"description": "Queued (`wait=false`): the run id, its files; `Location` is the run"}})
def upload(r: Rag, who: Tenant, files: Files, collection: CollectionParam = None,
           idempotency_key: IdempotencyKey = None,
           wait: Annotated[bool, Query(description="false: queue one job per file and answer 202 at once")]
           = True,
           tag: Annotated[list[Annotated[str, StringConstraints(max_length=512, pattern=TEXT)]] | None,
                          Query(max_length=100, description="A tag for every file (repeatable)")] = None,
           duplicates: Annotated[Literal["skip", "keep"], Query(description="keep: store a file whose content "
                                                                            "another document has")] = "skip"
           ) -> Any:
    """Ingest uploaded files (multipart, field `files`, one or more); each is named by its file name. Returns the
    ingestion run with its items (a file that fails is listed with its reason; the rest are stored).

    With `wait=false` the files are queued (one job each, stored by the workers: `ragd worker` processes and
    the server's own) and the answer is 202 at once, `Location: /v1/runs/{run_id}` to follow; a tenant with
    RAGD_QUEUE_MAX_FILES files open is answered 429 with `Retry-After`.

    Documents become searchable batch by batch as they are stored: a client that loses the connection may
    find some stored. Send `Idempotency-Key` to retry safely: the same key with the same files returns the
    first request's response (header `Idempotent-Replayed: true`) or, if it never finished, runs again (what it
    stored is found unchanged); the same key with other files is 422, and while the first still runs, 409."""
    col = r.collection(collection, tenant=who)
    limit = r.settings.max_file_bytes
    with spool_folder(r.settings.home) as folder:
        tags = [t for t in tag or [] if t]
        digest = hashlib.sha256(f"documents\x00{col.name}\x00{wait}\x00{tags}\x00{duplicates}".encode())
        uploads = [spool(folder, n, f.filename, hashed(f, digest), limit) for n, f in enumerate(files)]
        if wait:
            return idempotent(r, who, idempotency_key, digest.hexdigest,
                               lambda: {"collection": col.name, **col.ingest(uploads=uploads, tags=tags,
                                                                      duplicates=duplicates).as_dict()})
        queued = idempotent(r, who, idempotency_key, digest.hexdigest,
                             lambda: {"collection": col.name, **jobs.enqueue(col, uploads=uploads, tags=tags,
                                                                           duplicates=duplicates).as_dict()},
                             status_code=202)
        if isinstance(queued, JSONResponse):  # a replay
            queued.headers["Location"] = f"/v1/runs/{json.loads(bytes(queued.body))['run_id']}"
            return queued
        return JSONResponse(queued, status_code=202, headers={"Location": f"/v1/runs/{queued['run_id']}"})


@router.get("/v1/documents", tags=["documents"], responses=errs(400, 401, 404, 429, 500, 503))
def list_documents(r: Rag, who: Tenant, collection: CollectionParam = None,
                   limit: Annotated[int, Query(ge=1, le=1000)] = 100,
                   offset: Annotated[int, Query(ge=0)] = 0,
                   q: Annotated[str | None, Query(max_length=512, pattern=TEXT,
                                                  description="A piece of the title or id")]
                   = None,
                   tag: Annotated[str | None, Query(max_length=512, pattern=TEXT)] = None,
                   type: Annotated[str | None, Query(max_length=64, pattern=TEXT,
                                                     description="A source type: pdf, docx...")]
                   = None) -> dict[str, Any]:
    """Documents of a collection (by external id), with their active version, its original's size and media
    type and their count of versions; `q`, `tag` and `type` narrow them, `total` counts all that match."""
    col = r.collection(collection, tenant=who, create=False)
    rows, total = col.documents_page(limit=limit, offset=offset, find=q, tag=tag, source_type=type)
    return {"collection": col.name, "total": total, "documents": jsonable(rows)}


@router.get("/v1/documents/{ref:docref}/source", tags=["documents"],
         responses={**errs(400, 401, 404, 429, 500, 503),
                    200: {"description": "The original file", "content": {"application/octet-stream": {}}}})
def document_source(ref: Ref, r: Rag, who: Tenant, collection: CollectionParam = None,
                    version: VersionParam = None) -> Response:
    """The original file a document (its active version, or `version`) was read from, as a download. It is
    never shown in place: an HTML or SVG original could run script in this origin."""
    col = r.collection(collection, tenant=who, create=False)
    original = col.original(ref, version)
    return Response(original.data, media_type=original.media_type, headers={
        "Content-Disposition": content_disposition(original.name), "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "sandbox; default-src 'none'", "ETag": f'"{original.sha256}"',
        "Cache-Control": "private, max-age=3600"})


@router.get("/v1/documents/{ref:docref}/blocks", tags=["documents"], responses=errs(400, 401, 404, 429, 500, 503))
def document_blocks(ref: Ref, r: Rag, who: Tenant, collection: CollectionParam = None,
                    version: VersionParam = None) -> dict[str, Any]:
    """What extraction read from a document (its active version, or `version`): blocks in reading order, each
    {type, text, level, page, header, rows, meta}; tables keep their header and rows."""
    col = r.collection(collection, tenant=who, create=False)
    return jsonable(col.blocks(ref, version))  # type: ignore[no-any-return]


@router.get("/v1/documents/{ref:docref}/pages/{number}.png", tags=["documents"],
         responses={**errs(400, 401, 404, 429, 500, 503),
                    422: {"description": "The page could not be drawn within RAGD_RENDER_TIMEOUT_S",
                          "content": {"application/json": {"example": error_body("page_not_rendered", "...")}}},
                    200: {"description": "The page as a PNG; X-Ragd-Boxes: the chunk's boxes as drawn "
                                         "([x0, y0, x1, y1] pixels), X-Ragd-Quotes: the quotes' marks",
                          "content": {"image/png": {}}}})
def document_page(ref: Ref, number: Annotated[int, PathParam(ge=1, le=100_000)], r: Rag, who: Tenant,
                  collection: CollectionParam = None,
                  chunk: Annotated[str | None, Query(pattern=UUID, description="A chunk whose boxes to draw")]
                  = None,
                  quote: Annotated[list[str] | None, Query(max_length=2000,
                                                           description="Quoted text to mark (repeatable)")]
                  = None) -> Response:
    """Page `number` (from 1) of a PDF's or an image's original, rendered, with `chunk`'s boxes on it
    highlighted and each `quote` marked where it falls inside them."""
    col = r.collection(collection, tenant=who, create=False)
    page = col.page(ref, number, chunk=chunk, quotes=quote or ())
    return Response(page.png, media_type="image/png", headers={
        "Cache-Control": "private, max-age=300", "X-Content-Type-Options": "nosniff",
        "X-Ragd-Pages": str(page.pages), "X-Ragd-Scale": f"{page.scale:.6f}",
        "X-Ragd-Boxes": json.dumps([list(b) for b in page.boxes]),
        "X-Ragd-Quotes": json.dumps([list(b) for b in page.quotes])})


@router.get("/v1/documents/{ref:docref}", tags=["documents"],
         responses=errs(400, 401, 404, 429, 500, 503))
def get_document(ref: Ref, r: Rag, who: Tenant, collection: CollectionParam = None) -> dict[str, Any]:
    """One document by external id or doc id, with its versions."""
    col = r.collection(collection, tenant=who, create=False)
    return jsonable(col.document(ref))  # type: ignore[no-any-return]


@router.delete("/v1/documents/{ref:docref}", tags=["documents"],
            responses=errs(400, 401, 404, 429, 500, 503))
def delete_document(ref: Ref, r: Rag, who: Tenant, collection: CollectionParam = None) -> dict[str, Any]:
    """Delete a document and every version of it; searches stop finding it at once."""
    col = r.collection(collection, tenant=who, create=False)
    return {"deleted": str(col.delete(ref))}


@router.get("/v1/chunks/{chunk_id}", tags=["documents"], responses=errs(400, 401, 404, 429, 500, 503))
def get_chunk(chunk_id: Id, r: Rag, who: Tenant, collection: CollectionParam = None) -> dict[str, Any]:
    """One chunk: its text, type, heading path, pages and boxes, its document's id and title, its version's
    label and whether the original file is kept (then its pages can be drawn)."""
    col = r.collection(collection, tenant=who, create=False)
    return jsonable(col.chunk(chunk_id))  # type: ignore[no-any-return]


def content_disposition(name: str) -> str:
    """An attachment header naming the file (RFC 6266: an ASCII fallback and the UTF-8 name)."""
    base = name.rsplit("/", 1)[-1] or "original"
    ascii_name = "".join(c if 32 <= ord(c) < 127 and c not in '"\\' else "_" for c in base)
    return f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(base, safe='')}"


def _index_problem(d: IndexDocument) -> str:
    if not isinstance(d.content, str) or not d.content.strip():
        return "content must be a non-empty string"
    if d.metadata is not None and not isinstance(d.metadata, dict):
        return "metadata must be an object"
    for name in ("id", "sourceId"):
        value = getattr(d, name)
        if value is not None and (not isinstance(value, str | int) or isinstance(value, bool) or not str(value)):
            return f"{name} must be a non-empty string"
        if isinstance(value, str) and unstorable(value):  # stored without it, the id would name another document
            return f"{name} {unstorable(value)}"
    problem = unstorable(d.metadata)
    return f"metadata {problem}" if problem else ""
