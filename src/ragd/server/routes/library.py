"""The library's own face over HTTP: a collection's search, ask and ingest with the library's JSON
(`Candidate.as_dict`, `Answer.to_json`, `IngestReport.as_dict`) and its plan options, for ragd's remote client
(`ragd.connect("https://...")`) and any caller that wants everything the library returns. Seed 001's `/v1/query`
and seed 002's `/v1/search` and `/v1/index` keep their own contracts."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request
from fastapi import Path as PathParam
from fastapi.responses import StreamingResponse
from pydantic import Field

from ...retrieve.search import MAX_K
from ..deps import NAME, TEXT, Int, Rag, Strict, Tenant
from ..errors import STREAMED, errs
from ..idempotency import IdempotencyKey, idempotent, request_hash
from .answers import answer_logged

router = APIRouter()
Name = Annotated[str, PathParam(pattern=NAME, max_length=128, description="The collection")]
PLAN_OPTIONS = ("fusion", "keyword_weight", "semantic_weight", "k_vec", "k_lex", "rrf_k", "rerank", "compress",
                "exact")


class PlanOptions(Strict):
    """A search's plan, as `Collection.search` takes it: k, filters (tags_any, tags_all, metadata, doc_ids,
    external_ids, effective_from, effective_to) and any of the plan's options; what is left out is the default."""

    k: Int = Field(default=12, ge=1, le=MAX_K)
    filters: dict[str, Any] | None = None
    fusion: str | None = Field(default=None, max_length=32)
    keyword_weight: float | None = Field(default=None, ge=0.0, le=1.0)
    semantic_weight: float | None = Field(default=None, ge=0.0, le=1.0)
    k_vec: Int | None = Field(default=None, ge=1, le=1000)
    k_lex: Int | None = Field(default=None, ge=1, le=1000)
    rrf_k: Int | None = Field(default=None, ge=1, le=1000)
    rerank: bool | None = None
    compress: bool | None = None
    exact: bool | None = None

    def options(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in PLAN_OPTIONS if getattr(self, name) is not None}


class LibrarySearch(PlanOptions):
    query: str = Field(min_length=1, max_length=8192, pattern=TEXT)


class LibraryAsk(Strict):
    question: str = Field(min_length=1, max_length=8192, pattern=TEXT)
    k: Int = Field(default=12, ge=1, le=50)
    filters: dict[str, Any] | None = None
    rerank: bool | None = None
    debug: bool = False
    stream: bool = False  # server-sent events: `token` ({"text"}) pieces, then `done` with the whole answer


class LibraryIngest(Strict):
    """Documents given as text, as `Collection.ingest(documents=...)` takes them: {"id", "text", "title"?,
    "tags"?, "metadata"?, "source_type"?: "markdown" reads the text as Markdown}."""

    documents: list[dict[str, Any]] = Field(min_length=1, max_length=1000)
    tags: list[str] = Field(default_factory=list, max_length=100)
    metadata: dict[str, Any] | None = None
    duplicates: Literal["skip", "keep"] = "skip"
    near_duplicates: float | None = Field(default=None, ge=0.5, le=1.0)


@router.post("/v1/collections/{name}/search", tags=["library"], responses=errs(400, 401, 404, 429, 500, 503))
def library_search(name: Name, body: LibrarySearch, r: Rag, who: Tenant) -> dict[str, Any]:
    """`Collection.search`: the candidates with every score and rank the library gives (chunk, document and
    version ids, title, heading path, type, tags, metadata with pages), best first."""
    col = r.collection(name, tenant=who, create=False)
    hits = col.search(body.query, k=body.k, filters=body.filters, **body.options())
    return {"collection": col.name, "results": [h.as_dict() for h in hits]}


@router.post("/v1/collections/{name}/ask", tags=["library"],
             responses={**errs(400, 401, 404, 429, 500, 503), 200: STREAMED})
def library_ask(name: Name, body: LibraryAsk, request: Request, r: Rag, who: Tenant) -> Any:
    """`Collection.ask`: the answer with citations or the abstention, with its result hash, query id (the
    reproducibility record), calculation, abstention reason and closest passages. With `stream`, server-sent
    events: `token` pieces of the answer, then `done` with all of it."""
    answer = answer_logged(request, r, who, name, body.question, body.k, body.debug, filters=body.filters,
                           rerank=body.rerank)
    whole = answer.to_json()
    if not body.stream:
        return whole
    events = [*(("token", {"text": piece}) for piece in answer.pieces()), ("done", whole)]
    return StreamingResponse((f"event: {event}\ndata: {json.dumps(data)}\n\n" for event, data in events),
                             media_type="text/event-stream")


@router.post("/v1/collections/{name}/ingest", tags=["library"], responses=errs(400, 401, 422, 429, 500, 503))
def library_ingest(name: Name, body: LibraryIngest, r: Rag, who: Tenant,
                   idempotency_key: IdempotencyKey = None) -> Any:
    """`Collection.ingest(documents=...)`: the run's report, an outcome per document (a document that fails is
    listed with its reason; the rest are stored). `Idempotency-Key` makes a retry safe, as for uploads."""
    col = r.collection(name, tenant=who)

    def run() -> dict[str, Any]:
        report = col.ingest(documents=body.documents, tags=body.tags, metadata=body.metadata,
                            duplicates=body.duplicates, near_duplicates=body.near_duplicates)
        return {"collection": col.name, **report.as_dict()}

    return idempotent(r, who, idempotency_key, lambda: request_hash("ingest", {"name": name, **body.model_dump()}),
                      run)
