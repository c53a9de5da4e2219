"""The library's own face over HTTP: a collection's search, ask and ingest with the library's JSON
(`Candidate.as_dict`, `Answer.to_json`, `IngestReport.as_dict`) and its plan options, for ragd's remote client
(`ragd.connect("https://...")`) and any caller that wants everything the library returns. Seed 001's `/v1/query`
and seed 002's `/v1/search` and `/v1/index` keep their own contracts."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request
from fastapi import Path as PathParam
from fastapi.responses import StreamingResponse
from pydantic import BeforeValidator, Field, StringConstraints

from ...retrieve.search import MAX_K
from ..deps import NAME, TEXT, UUID, Int, Rag, Strict, Tenant
from ..errors import STREAMED, errs
from ..idempotency import IdempotencyKey, idempotent, request_hash
from .answers import answer_logged

router = APIRouter()
Name = Annotated[str, PathParam(pattern=NAME, max_length=128, description="The collection")]
PLAN_OPTIONS = ("fusion", "keyword_weight", "semantic_weight", "k_vec", "k_lex", "rrf_k", "rerank", "compress",
                "exact")


Label = Annotated[str, StringConstraints(max_length=512, pattern=TEXT)]


def _text(value: Any) -> Any:
    if not isinstance(value, str):
        raise ValueError("an ISO 8601 date or date and time, as a string")
    return value


# a date, or a date and time, given as ISO 8601 text (not a number of seconds)
When = Annotated[datetime, Field(strict=False), BeforeValidator(_text)]


class FilterOptions(Strict):
    """Which chunks a search may return (`Filters`): any of these tags, all of those, top-level metadata equal to
    these values, these documents (by doc id or external id), in force between these ISO dates."""

    tags_any: list[Label] | None = Field(default=None, max_length=100)
    tags_all: list[Label] | None = Field(default=None, max_length=100)
    metadata: dict[str, Any] | None = None
    doc_ids: list[Annotated[str, StringConstraints(pattern=UUID)]] | None = Field(default=None, max_length=1000)
    external_ids: list[Annotated[str, StringConstraints(max_length=4096, pattern=TEXT)]] | None = Field(
        default=None, max_length=1000)
    effective_from: When | None = None
    effective_to: When | None = None

    def given(self) -> dict[str, Any]:
        return {k: v.isoformat() if isinstance(v, datetime) else v
                for k, v in self.model_dump(exclude_none=True).items()}


def _filters(options: FilterOptions | None) -> dict[str, Any] | None:
    return options.given() if options is not None else None


class PlanOptions(Strict):
    """A search's plan, as `Collection.search` takes it: k, filters and any of the plan's options; what is left
    out is the default."""

    k: Int = Field(default=12, ge=1, le=MAX_K)
    filters: FilterOptions | None = None
    fusion: Literal["weighted", "rrf", "vector", "lexical"] | None = None
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
    filters: FilterOptions | None = None
    rerank: bool | None = None
    debug: bool = False
    stream: bool = False  # server-sent events: `token` ({"text"}) pieces, then `done` with the whole answer


class GivenDocument(Strict):
    """A document given as text: `source_type` "markdown" reads the text as Markdown (its tables too)."""

    id: str = Field(min_length=1, max_length=4096, pattern=TEXT)
    text: str = Field(max_length=20_000_000, pattern=TEXT)
    title: str | None = Field(default=None, max_length=4096, pattern=TEXT)
    tags: list[Label] = Field(default_factory=list, max_length=100)
    metadata: dict[str, Any] | None = None
    source_type: Literal["text", "markdown"] = "text"


class LibraryIngest(Strict):
    """Documents given as text, as `Collection.ingest(documents=...)` takes them."""

    documents: list[GivenDocument] = Field(min_length=1, max_length=1000)
    tags: list[Label] = Field(default_factory=list, max_length=100)
    metadata: dict[str, Any] | None = None
    duplicates: Literal["skip", "keep"] = "skip"
    near_duplicates: float | None = Field(default=None, ge=0.5, le=1.0)


@router.post("/v1/collections/{name}/search", tags=["library"], responses=errs(400, 401, 404, 429, 500, 503))
def library_search(name: Name, body: LibrarySearch, r: Rag, who: Tenant) -> dict[str, Any]:
    """`Collection.search`: the candidates with every score and rank the library gives (chunk, document and
    version ids, title, heading path, type, tags, metadata with pages), best first."""
    col = r.collection(name, tenant=who, create=False)
    hits = col.search(body.query, k=body.k, filters=_filters(body.filters), **body.options())
    return {"collection": col.name, "results": [h.as_dict() for h in hits]}


@router.post("/v1/collections/{name}/ask", tags=["library"],
             responses={**errs(400, 401, 404, 429, 500, 503), 200: STREAMED})
def library_ask(name: Name, body: LibraryAsk, request: Request, r: Rag, who: Tenant) -> Any:
    """`Collection.ask`: the answer with citations or the abstention, with its result hash, query id (the
    reproducibility record), calculation, abstention reason and closest passages. With `stream`, server-sent
    events: `token` pieces of the answer, then `done` with all of it."""
    answer = answer_logged(request, r, who, name, body.question, body.k, body.debug, filters=_filters(body.filters),
                           rerank=body.rerank)
    whole = answer.to_json()
    if not body.stream:
        return whole
    events = [*(("token", {"text": piece}) for piece in answer.pieces()), ("done", whole)]
    return StreamingResponse((f"event: {event}\ndata: {json.dumps(data)}\n\n" for event, data in events),
                             media_type="text/event-stream")


@router.post("/v1/collections/{name}/ingest", tags=["library"], responses=errs(400, 401, 409, 422, 429, 500, 503))
def library_ingest(name: Name, body: LibraryIngest, r: Rag, who: Tenant,
                   idempotency_key: IdempotencyKey = None) -> Any:
    """`Collection.ingest(documents=...)`: the run's report, an outcome per document (a document that fails is
    listed with its reason; the rest are stored). `Idempotency-Key` makes a retry safe, as for uploads."""
    col = r.collection(name, tenant=who)

    def run() -> dict[str, Any]:
        report = col.ingest(documents=[d.model_dump(exclude_none=True) for d in body.documents], tags=body.tags,
                            metadata=body.metadata,
                            duplicates=body.duplicates, near_duplicates=body.near_duplicates)
        return {"collection": col.name, **report.as_dict()}

    return idempotent(r, who, idempotency_key, lambda: request_hash("ingest", {"name": name, **body.model_dump()}),
                      run)
