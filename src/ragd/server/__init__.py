"""The REST adapter (FastAPI): each handler parses, makes one library call, formats, and maps errors to one JSON
shape `{"error": CODE, "message": ...}`.

The tenant comes from the API key (`Authorization: Bearer ragd_...`), never from the body: a body `tenant_id`
that differs from the key's is refused. A server whose database holds no active key runs open (each request
names its tenant, seed 001's V1), which `ragd serve` allows on loopback only."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import re
import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import uvicorn
from fastapi import Depends, FastAPI, File, Header, Query, Request, UploadFile
from fastapi import Path as PathParam
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from mcp.server.transport_security import TransportSecuritySettings
from psycopg.types.json import Jsonb
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from starlette.convertors import Convertor, register_url_convertor
from starlette.exceptions import HTTPException as StarletteHTTPException
from uvicorn.supervisors import Multiprocess

from .. import jobs, keys, mcpserver
from ..config import Settings, load_settings
from ..embed import make_embedder
from ..engine import Ragd, connect, log_timestamp
from ..errors import (
    Busy,
    ConfigError,
    DatabaseUnavailable,
    FileTooLarge,
    InvalidRequest,
    LLMUnavailable,
    NotFound,
    OriginalsUnavailable,
    PageNotRendered,
    QueueFull,
    RagdError,
)
from ..ids import sha256_text
from ..ingest.normalize import unstorable
from ..ingest.pipeline import close_interrupted_runs
from ..ingest.uploads import spool, spool_folder, sweep
from ..store import queries
from ..store.postgres import latest_migration
from ..types import jsonable

log = logging.getLogger("ragd.server")


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers or {}


def _status(exc: RagdError) -> tuple[int, str]:
    if isinstance(exc, FileTooLarge):
        return 413, "file_too_large"
    if isinstance(exc, InvalidRequest):
        return 400, "bad_request"
    if isinstance(exc, NotFound):
        return 404, exc.code
    if isinstance(exc, LLMUnavailable):
        return 502, "llm_unavailable"
    if isinstance(exc, QueueFull):
        return 429, exc.code
    if isinstance(exc, Busy):
        return 503, exc.code
    if isinstance(exc, PageNotRendered):
        return 422, exc.code
    if isinstance(exc, DatabaseUnavailable):  # the message (URL, user, socket) is logged, never sent
        return 503, "database_unavailable"
    if isinstance(exc, OriginalsUnavailable):
        return 503, exc.code
    if exc.exit_code == 2:  # a request the configuration cannot serve (dimensions, models)
        return 400, "bad_request"
    return 500, "internal"


DATABASE_UNAVAILABLE = "the database is unavailable; retry later"


def error_body(code: str, message: str) -> dict[str, str]:
    return {"error": code, "message": message}


NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"  # collection names (the schema's CHECK)
TEXT = r"^[^\x00]*$"  # PostgreSQL's text holds no NUL: a string holding one is refused (400), never stored changed
UUID = r"^[0-9a-fA-F]{8}-?([0-9a-fA-F]{4}-?){3}[0-9a-fA-F]{12}$"
Id = Annotated[str, PathParam(pattern=UUID, description="A UUID")]


class DocumentRef(Convertor[str]):
    """A document's external id in a path: any characters, slashes too, except that a path ending in /source,
    /blocks or /pages/N.png names that view of the document (a document whose id ends so is reached by its doc
    id)."""

    regex = r"(?:(?!/source$|/blocks$|/pages/[0-9]+\.png$).)+"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("docref", DocumentRef())
Files = Annotated[list[UploadFile], File(description="One or more files, any supported format", min_length=1)]
Ref = Annotated[str, PathParam(pattern=r"^[^\x00]+$", max_length=4096,
                               description="A document's external id or doc id")]
VersionParam = Annotated[str | None, Query(max_length=128, pattern=TEXT,
                                          description="A version id or label (default: the active one)")]
CollectionParam = Annotated[str | None, Query(pattern=NAME, max_length=128,
                                              description="The collection (default: RAGD_COLLECTION)")]


# -- request and response models ------------------------------------------------------------------------------

def _integral(value: Any) -> Any:
    """JSON Schema's integers include 1.0; strict pydantic does not."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


Int = Annotated[int, BeforeValidator(_integral)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)  # no coercion: `false` is not a number


class QueryRequest(_Strict):
    """Seed 001 section 6 (`collection` added: the default collection when omitted)."""

    tenant_id: str | None = None
    question: str = Field(min_length=1, max_length=8192, pattern=TEXT)
    top_k: Int = Field(default=10, ge=1, le=50)
    debug: bool = False
    collection: str | None = Field(default=None, pattern=NAME, max_length=128)
    stream: bool = False  # server-sent events: token, then citations, then done (the whole response)


class ChatMessage(BaseModel):
    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(BaseModel):
    """OpenAI chat completions; other OpenAI fields (temperature, ...) are accepted and ignored: answers are
    grounded and deterministic."""

    model_config = ConfigDict(extra="allow")
    model: str = Field(pattern=NAME, max_length=128)  # the collection
    messages: list[ChatMessage] = Field(min_length=1, max_length=200)
    stream: bool = False


class Citation(BaseModel):
    doc_id: str
    doc_version_id: str
    chunk_id: str
    title: str | None
    version_label: str | None


class QueryResponse(BaseModel):
    answer: str
    citations: list[Citation]
    abstained: bool
    debug: dict[str, Any] | None


class SearchRequest(_Strict):
    """Seed 002 POST /api/rag/search."""

    query: str = Field(min_length=1, max_length=8192, pattern=TEXT)
    namespace: str = Field(default="default", pattern=NAME, max_length=128)
    limit: Int = Field(default=10, ge=1, le=100)
    threshold: float = Field(default=0.7, ge=-1.0, le=1.0)
    useReranking: bool = True
    keywordWeight: float = Field(default=0.3, ge=0.0, le=1.0)
    semanticWeight: float = Field(default=0.7, ge=0.0, le=1.0)


class SearchResult(BaseModel):
    id: str
    content: str
    similarity: float
    keywordRank: float
    combinedScore: float
    metadata: dict[str, Any]
    namespace: str
    sourceId: str | None
    chunkIndex: int
    rerankScore: float | None = None


class SearchResponse(BaseModel):
    success: bool
    query: str
    results: list[SearchResult]
    latencyMs: float
    rerankingApplied: bool


class IndexDocument(BaseModel):
    model_config = ConfigDict(extra="forbid")
    content: Any = None  # checked per item: a bad item is listed in `failed`, the rest are indexed
    metadata: Any = None
    id: Any = None
    sourceId: Any = None


class IndexRequest(_Strict):
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


ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"description": description, "content": {"application/json": {"example": error_body(code, "...")}}}
    for status, code, description in (
        (400, "bad_request", "The request is malformed or names something invalid"),
        (401, "unauthorized", "No API key, or a key that is unknown or revoked"),
        (403, "forbidden", "The body names another tenant than the API key's"),
        (404, "not_found", "No such object for this tenant"),
        (413, "file_too_large", "An uploaded file is over RAGD_MAX_FILE_BYTES"),
        (422, "idempotency_key_reused", "The Idempotency-Key was used for another request in the last 24 hours"),
        (429, "rate_limited", "Over the key's requests per minute; see Retry-After"),
        (500, "internal", "An unexpected error (logged with the request id)"),
        (503, "database_unavailable", "PostgreSQL cannot be reached, or (`busy`) the request could not get a "
                                      "connection or finish its statements within its deadline; retry after "
                                      "Retry-After seconds"),
    )
}


STREAMED: dict[str, Any] = {"description": "The response; with `stream`, server-sent events",
                            "content": {"text/event-stream": {"schema": {}}}}


def _errs(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The documented error responses of a route, for OpenAPI."""
    return {s: ERRORS[s] for s in statuses}


# -- the app ----------------------------------------------------------------------------------------------------

def rag(request: Request) -> Ragd:
    return request.app.state.rag  # type: ignore[no-any-return]


def tenant(request: Request) -> str:
    """The tenant of the request's API key; with no keys at all, the configured tenant (open mode)."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if not request.app.state.keyed:  # open until the first key exists, then keyed for good
        request.app.state.keyed = keys.keyed(rag(request).store, rag(request).settings.allow_open)
    if not request.app.state.keyed:
        return rag(request).settings.tenant
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(401, "unauthorized", "an API key is required: Authorization: Bearer <key>",
                       {"WWW-Authenticate": 'Bearer realm="ragd"'})
    r = rag(request)
    caller = keys.authenticate(r.store, token.strip(), r.settings.rate_limit_per_minute)
    if caller is None:
        raise ApiError(401, "unauthorized", "the API key is unknown or revoked",
                       {"WWW-Authenticate": 'Bearer realm="ragd", error="invalid_token"'})
    request.state.tenant = caller.tenant_id
    if caller.retry_after_s:
        wait = int(caller.retry_after_s)
        raise ApiError(429, "rate_limited", f"over {r.settings.rate_limit_per_minute} requests per minute for this "
                                            f"key; retry in {wait} s", {"Retry-After": str(wait)})
    return caller.tenant_id


Tenant = Annotated[str, Depends(tenant)]
Rag = Annotated[Ragd, Depends(rag)]


def own_tenant(request: Request, key_tenant: str, body_tenant: str | None) -> str:
    if body_tenant is None:
        return key_tenant
    if request.app.state.keyed and body_tenant != key_tenant:
        raise ApiError(403, "forbidden", "tenant_id differs from the API key's tenant; omit it")
    return body_tenant


def create_app(settings: Settings | None = None, *, client: Ragd | None = None) -> FastAPI:
    """The REST app over one `Ragd` (made from `settings`, or the given client, which the app does not close)."""
    owned = client is None
    tools = mcpserver.build(lambda: app.state.rag)
    # stateless JSON: any worker process can answer any request; the API key guards it (see the middleware)
    mcp_app = tools.streamable_http_app(streamable_http_path="/mcp", stateless_http=True, json_response=True,
                                        transport_security=TransportSecuritySettings(
                                            enable_dns_rebinding_protection=False))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        rag = client or connect(settings=settings or load_settings())
        background = contextlib.ExitStack()  # no request waits for an index build (it waits for other tenants)
        background.enter_context(rag.indexes_in_background())
        app.state.rag = rag
        swept = sweep(rag.settings.home)
        if swept:
            log.warning("removed %d upload folder(s) left by server processes that ended mid-request", swept)
        closed = close_interrupted_runs(rag.store)
        if closed:
            log.warning("%d ingestion run(s) of processes that ended mid-run are now marked failed (interrupted)",
                        closed)
        app.state.keyed = keys.keyed(rag.store, rag.settings.allow_open)
        extra = {h.strip().lower() for h in rag.settings.allowed_hosts.split(",") if h.strip()}
        app.state.hosts = LOOPBACK_NAMES | extra
        if not app.state.keyed:
            log.warning("no API keys exist: requests are not authenticated and name their own tenant "
                        "(create one with `ragd keys create --tenant T`)")
        stop = asyncio.Event()
        worker = None
        if _serves_jobs(rag):  # uploads with ?wait=false are stored by this process too
            worker = asyncio.create_task(jobs.Jobs(rag).run(concurrency=rag.settings.job_concurrency, stop=stop,
                                                            signals=False))
        try:
            async with tools.session_manager.run():
                yield
        finally:
            stop.set()
            if worker is not None:
                with contextlib.suppress(Exception):  # (it logged what stopped it)
                    await worker
            background.close()  # (a client given to the app is given back as it came)
            if owned:
                rag.close()

    # no /docs or /redoc: FastAPI's pages load Swagger UI / ReDoc from a CDN into the API's origin; the OpenAPI
    # document is served at /openapi.json for any viewer the operator trusts
    app = FastAPI(title="ragd", version=_version(), lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="Deterministic retrieval-augmented generation on PostgreSQL + pgvector.")
    _errors(app)

    app.router.routes.extend(mcp_app.routes)  # POST/GET/DELETE /mcp
    app.mount("/static", StaticFiles(directory=WEB, check_dir=True), name="static")  # the web page's files

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        """The web page: ask with sources, documents, runs, collections and quality (it calls this API)."""
        return FileResponse(WEB / "index.html", headers={"Cache-Control": "no-cache"})

    _document_validation_as_400(app)

    @app.middleware("http")
    async def request_id(request: Request, call_next: Callable[[Request], Any]) -> Any:
        rid = request.headers.get("x-request-id") or uuid.uuid4().hex
        request.state.request_id = rid[:128]
        started = time.perf_counter()
        response = await _early(request) or await _call(request, call_next)
        response.headers["X-Request-ID"] = request.state.request_id
        for name, value in SECURITY_HEADERS.items():  # on every response: errors, refusals and /mcp too
            response.headers.setdefault(name, value)
        if REQUEST_LOG.isEnabledFor(logging.INFO):
            REQUEST_LOG.info(json.dumps({
                "ts": log_timestamp(),
                "request_id": request.state.request_id, "method": request.method, "path": request.url.path,
                "tenant_id": getattr(request.state, "tenant", None), "http_status": response.status_code,
                "latency_ms": round((time.perf_counter() - started) * 1000, 2)}))
        return response

    async def _early(request: Request) -> Response | None:
        """The answer to a request refused before its route runs: a value no route may be given, a page of
        another site (open mode), an /mcp call without a valid key."""
        problem = _unstorable_parameter(request)
        if problem:
            return JSONResponse(error_body("bad_request", problem), status_code=400)
        refusal = None if app.state.keyed else _foreign(request, app.state.hosts)
        if refusal:
            return JSONResponse(error_body("forbidden", refusal), status_code=403)
        if request.url.path.rstrip("/") == "/mcp":  # the MCP tools read the tenant the key gave
            try:
                setattr(request.state, mcpserver.TENANT_STATE, await run_in_threadpool(tenant, request))
            except ApiError as exc:
                return JSONResponse(error_body(exc.code, exc.message), status_code=exc.status, headers=exc.headers)
            except RagdError as exc:
                return ragd_error_response(request, exc)
        return None

    async def _call(request: Request, call_next: Callable[[Request], Any]) -> Response:
        """The route's response; an error no handler took is a 500 made here, inside this middleware, so that it
        carries the same headers as every other response."""
        try:
            return await call_next(request)  # type: ignore[no-any-return]
        except Exception:  # of any kind: logged with the request id, never sent
            log.exception("request %s failed", request.state.request_id)
            return JSONResponse(error_body("internal", "an internal error occurred; see the server log"),
                                status_code=500)

    @app.get("/healthz", tags=["ops"])
    def healthz() -> dict[str, str]:
        """The process is up."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["ops"], responses={503: ERRORS[503]})
    def readyz(r: Rag) -> dict[str, Any]:
        """The database answers, its schema is current, and the configured models load (the embedder, the
        reranker and the generator; loaded once, then kept)."""
        version = r.store.schema_version()
        latest = latest_migration()
        if version < latest:
            raise ApiError(503, "schema_outdated", f"the schema is at {version}, this ragd needs {latest}: "
                                                   "run `ragd migrate`")
        if not getattr(app.state, "models_ready", False):
            try:
                make_embedder(r.settings.embedder, r.settings).dims  # noqa: B018 (loads the model)
                _ = r.reranker, r.generator
            except RagdError as exc:
                raise ApiError(503, "models_unavailable", f"a configured model does not load: {exc}") from exc
            app.state.models_ready = True
        return {"status": "ready", "schema_version": version}

    @app.post("/v1/query", response_model=QueryResponse, tags=["answers"],
              responses={**_errs(400, 401, 403, 404, 429, 500, 503), 200: STREAMED,
                         502: {"description": "The generator (LLM) failed",
                               "content": {"application/json": {"example": error_body("llm_unavailable", "...")}}}})
    def query(body: QueryRequest, request: Request, r: Rag, key_tenant: Tenant) -> Any:
        """Seed 001: an answer with citations, or the abstain answer when the documents do not support one. With
        `stream`, server-sent events: `token` ({"text"}) pieces of the answer, then `citations`, then `done` with
        the whole response."""
        who = own_tenant(request, key_tenant, body.tenant_id)
        answer = _answer(request, r, who, body.collection, body.question, body.top_k, body.debug)
        response = {"answer": answer.answer, "citations": list(answer.citations), "abstained": answer.abstained,
                    "debug": answer.debug if body.debug else None}
        if not body.stream:
            return response
        events = [*(("token", {"text": piece}) for piece in _pieces(answer.answer)),
                  ("citations", list(answer.citations)), ("done", response)]
        return StreamingResponse((f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events),
                                 media_type="text/event-stream")

    @app.get("/v1/models", tags=["chat"], responses=_errs(401, 429, 500, 503))
    def models(r: Rag, who: Tenant) -> dict[str, Any]:
        """OpenAI model list: each of the tenant's collections is a model of /v1/chat/completions."""
        return {"object": "list", "data": [
            {"id": c["name"], "object": "model", "created": int(c["created_at"].timestamp()), "owned_by": "ragd"}
            for c in r.collections(who)]}

    @app.post("/v1/chat/completions", tags=["chat"],
              responses={**_errs(400, 401, 404, 429, 500, 503), 200: {**STREAMED, "content": {
                  "application/json": {"schema": {"type": "object"}}, **STREAMED["content"]}}})
    def chat(body: ChatRequest, request: Request, r: Rag, who: Tenant) -> Any:
        """OpenAI-compatible chat: the model names the collection, the last user message is the question, the
        answer carries its [chunk:ID] markers and a `citations` list."""
        question = _last_user_text(body.messages)
        answer = _answer(request, r, who, body.model, question, 10, False)
        rid = "chatcmpl-" + request.state.request_id
        created = int(time.time())
        usage = {"prompt_tokens": len(question.split()), "completion_tokens": len(answer.answer.split())}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        head = {"id": rid, "created": created, "model": body.model}
        if not body.stream:
            return {**head, "object": "chat.completion", "usage": usage, "citations": list(answer.citations),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": answer.answer}}]}

        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
            data = {**head, "object": "chat.completion.chunk", **extra,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            return f"data: {json.dumps(data)}\n\n"

        lines = [chunk({"role": "assistant", "content": ""}),
                 *(chunk({"content": piece}) for piece in _pieces(answer.answer)),
                 chunk({}, "stop", citations=list(answer.citations), usage=usage), "data: [DONE]\n\n"]
        return StreamingResponse(iter(lines), media_type="text/event-stream")

    def _answer(request: Request, r: Ragd, who: str, collection: str | None, question: str, k: int,
                debug: bool) -> Any:
        """Ask, and log the query line with its HTTP status (failures too)."""
        started = time.perf_counter()
        rid = request.state.request_id
        try:
            col = r.collection(collection, tenant=who, create=False)
            answer = col.ask(question, k=k, debug=debug, request_id=rid, emit_log=False)
        except (RagdError, ApiError) as exc:
            status = exc.status if isinstance(exc, ApiError) else _status(exc)[0]
            _log_failed_query(who, collection or r.settings.collection, rid, question, status, started)
            raise
        QUERY_LOG.info(json.dumps({**(answer.log or {}), "http_status": 200}))
        return answer

    @app.post("/v1/search", response_model=SearchResponse, response_model_exclude_none=True, tags=["search"],
              responses=_errs(400, 401, 404, 429, 500, 503))
    def search(body: SearchRequest, r: Rag, who: Tenant) -> dict[str, Any]:
        """Seed 002: hybrid search of a namespace (a collection), reranked unless useReranking is false.
        `threshold` drops vector matches below that cosine similarity unless the keyword leg also found them."""
        started = time.perf_counter()
        col = r.collection(body.namespace, tenant=who, create=False)
        hits = col.search(body.query, k=body.limit, fusion="weighted", keyword_weight=body.keywordWeight,
                          semantic_weight=body.semanticWeight, rerank=body.useReranking)
        results = [{"id": str(h.chunk_id), "content": h.content, "similarity": h.vector_score or 0.0,
                    "keywordRank": h.lexical_score or 0.0, "combinedScore": h.score, "metadata": h.metadata,
                    "namespace": col.name, "sourceId": h.external_id, "chunkIndex": h.chunk_index,
                    "rerankScore": h.rerank_score}
                   for h in hits if h.lexical_rank is not None or (h.vector_score or 0.0) >= body.threshold]
        return {"success": True, "query": body.query, "results": results,
                "latencyMs": round((time.perf_counter() - started) * 1000, 2),
                "rerankingApplied": any(h.rerank_score is not None for h in hits)}

    @app.post("/v1/index", response_model=IndexResponse, tags=["documents"],
              responses=_errs(400, 401, 422, 429, 500, 503))
    def index(body: IndexRequest, r: Rag, who: Tenant, idempotency_key: IdempotencyKey = None) -> Any:
        """Seed 002: index a batch; 200 whatever its items hold, each item that could not be indexed listed in
        `failed` (400 only for a body that is not a batch at all).

        Documents become searchable batch by batch as they are stored: a client that loses the connection may
        find some stored. Send `Idempotency-Key` to retry safely: the same key with the same body returns the
        first request's response (header `Idempotent-Replayed: true`) or, if it never finished, runs again (what it
        stored is found unchanged); the same key with another body is 422."""
        return _idempotent(r, who, idempotency_key, lambda: _request_hash("index", body.model_dump()),
                           lambda: _index(body, r, who))

    def _index(body: IndexRequest, r: Ragd, who: str) -> dict[str, Any]:
        from ..types import ChunkPolicy

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

    @app.post("/v1/documents", tags=["documents"], responses={
        **_errs(400, 401, 413, 422, 429, 500, 503),
        202: {"description": "Queued (`wait=false`): the run id, its files; `Location` is the run"}})
    def upload(r: Rag, who: Tenant, files: Files, collection: CollectionParam = None,
               idempotency_key: IdempotencyKey = None,
               wait: Annotated[bool, Query(description="false: queue one job per file and answer 202 at once")]
               = True) -> Any:
        """Ingest uploaded files (multipart, field `files`, one or more); each is named by its file name. Returns the
        ingestion run with its items (a file that fails is listed with its reason; the rest are stored).

        With `wait=false` the files are queued (one job each, stored by the workers: `ragd worker` processes and
        the server's own) and the answer is 202 at once, `Location: /v1/runs/{run_id}` to follow; a tenant with
        RAGD_QUEUE_MAX_FILES files open is answered 429 with `Retry-After`.

        Documents become searchable batch by batch as they are stored: a client that loses the connection may
        find some stored. Send `Idempotency-Key` to retry safely: the same key with the same files returns the
        first request's response (header `Idempotent-Replayed: true`) or, if it never finished, runs again (what it
        stored is found unchanged); the same key with other files is 422."""
        col = r.collection(collection, tenant=who)
        limit = r.settings.max_file_bytes
        with spool_folder(r.settings.home) as folder:
            digest = hashlib.sha256(f"documents\x00{col.name}\x00{wait}".encode())
            uploads = [spool(folder, n, f.filename, _hashed(f, digest), limit) for n, f in enumerate(files)]
            if wait:
                return _idempotent(r, who, idempotency_key, digest.hexdigest,
                                   lambda: {"collection": col.name, **col.ingest(uploads=uploads).as_dict()})
            queued = _idempotent(r, who, idempotency_key, digest.hexdigest,
                                 lambda: {"collection": col.name, **jobs.enqueue(col, uploads=uploads).as_dict()},
                                 status_code=202)
            if isinstance(queued, JSONResponse):  # a replay
                queued.headers["Location"] = f"/v1/runs/{json.loads(bytes(queued.body))['run_id']}"
                return queued
            return JSONResponse(queued, status_code=202, headers={"Location": f"/v1/runs/{queued['run_id']}"})

    @app.get("/v1/documents", tags=["documents"], responses=_errs(400, 401, 404, 429, 500, 503))
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

    @app.get("/v1/documents/{ref:docref}/source", tags=["documents"],
             responses={**_errs(400, 401, 404, 429, 500, 503),
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

    @app.get("/v1/documents/{ref:docref}/blocks", tags=["documents"], responses=_errs(400, 401, 404, 429, 500, 503))
    def document_blocks(ref: Ref, r: Rag, who: Tenant, collection: CollectionParam = None,
                        version: VersionParam = None) -> dict[str, Any]:
        """What extraction read from a document (its active version, or `version`): blocks in reading order, each
        {type, text, level, page, header, rows, meta}; tables keep their header and rows."""
        col = r.collection(collection, tenant=who, create=False)
        return jsonable(col.blocks(ref, version))  # type: ignore[no-any-return]

    @app.get("/v1/documents/{ref:docref}/pages/{number}.png", tags=["documents"],
             responses={**_errs(400, 401, 404, 429, 500, 503),
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

    @app.get("/v1/documents/{ref:docref}", tags=["documents"],
             responses=_errs(400, 401, 404, 429, 500, 503))
    def get_document(ref: Ref, r: Rag, who: Tenant, collection: CollectionParam = None) -> dict[str, Any]:
        """One document by external id or doc id, with its versions."""
        col = r.collection(collection, tenant=who, create=False)
        return jsonable(col.document(ref))  # type: ignore[no-any-return]

    @app.delete("/v1/documents/{ref:docref}", tags=["documents"],
                responses=_errs(400, 401, 404, 429, 500, 503))
    def delete_document(ref: Ref, r: Rag, who: Tenant, collection: CollectionParam = None) -> dict[str, Any]:
        """Delete a document and every version of it; searches stop finding it at once."""
        col = r.collection(collection, tenant=who, create=False)
        return {"deleted": str(col.delete(ref))}

    @app.get("/v1/runs", tags=["documents"], responses=_errs(400, 401, 404, 429, 500, 503))
    def list_runs(r: Rag, who: Tenant, collection: CollectionParam = None,
                  limit: Annotated[int, Query(ge=1, le=1000)] = 20) -> dict[str, Any]:
        """The latest ingestion runs of the collection, newest first."""
        col = r.collection(collection, tenant=who, create=False)
        return {"runs": jsonable(col.runs(limit))}

    @app.get("/v1/runs/{run_id}", tags=["documents"], responses=_errs(400, 401, 404, 429, 500, 503))
    def get_run(run_id: Id, r: Rag, who: Tenant) -> dict[str, Any]:
        """One ingestion run with every item."""
        return jsonable(r.run(run_id, tenant=who))  # type: ignore[no-any-return]

    @app.post("/v1/runs/{run_id}/cancel", tags=["documents"], responses=_errs(400, 401, 404, 429, 500, 503))
    def cancel_run(run_id: Id, r: Rag, who: Tenant) -> dict[str, Any]:
        """Cancel a queued run: its queued files are dropped; files being stored finish; stored items stay (the run
        remains, `cancelled`). A run that already ended is left as it is (its status is returned)."""
        return jobs.cancel(r, run_id, tenant=who)

    @app.get("/v1/evals", tags=["quality"], responses=_errs(400, 401, 429, 500, 503))
    def list_evaluations(r: Rag, who: Tenant, collection: CollectionParam = None,
                         limit: Annotated[int, Query(ge=1, le=1000)] = 200) -> dict[str, Any]:
        """The tenant's evaluations kept by `ragd eval --save`, oldest first: per plan its metrics (ndcg@10, mrr,
        recall...; answers: abstain_f1, answered...) and latency."""
        return {"evaluations": jsonable(r.evaluations(tenant=who, collection=collection, limit=limit))}

    @app.get("/v1/chunks/{chunk_id}", tags=["documents"], responses=_errs(400, 401, 404, 429, 500, 503))
    def get_chunk(chunk_id: Id, r: Rag, who: Tenant, collection: CollectionParam = None) -> dict[str, Any]:
        """One chunk: its text, type, heading path, pages and boxes, its document's id and title, its version's
        label and whether the original file is kept (then its pages can be drawn)."""
        col = r.collection(collection, tenant=who, create=False)
        return jsonable(col.chunk(chunk_id))  # type: ignore[no-any-return]

    @app.get("/v1/executions/{query_id}", tags=["answers"], responses=_errs(400, 401, 404, 429, 500, 503))
    def get_execution(query_id: Id, r: Rag, who: Tenant) -> dict[str, Any]:
        """An answer's reproducibility record (its query id: `debug.query_id` of /v1/query): question, models,
        plan, retrieved and context chunks, answer, citations, timings and result hash."""
        return jsonable(r.execution(query_id, tenant=who))  # type: ignore[no-any-return]

    @app.get("/v1/collections", tags=["documents"], responses=_errs(401, 429, 500, 503))
    def list_collections(r: Rag, who: Tenant) -> dict[str, Any]:
        """The tenant's collections with their pinned model and sizes."""
        return {"collections": jsonable(r.collections(who))}

    return app


def content_disposition(name: str) -> str:
    """An attachment header naming the file (RFC 6266: an ASCII fallback and the UTF-8 name)."""
    base = name.rsplit("/", 1)[-1] or "original"
    ascii_name = "".join(c if 32 <= ord(c) < 127 and c not in '"\\' else "_" for c in base)
    return f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(base, safe='')}"


WEB = Path(__file__).resolve().parent.parent / "web"
# Every response: no script but the page's own files (no inline script, no eval), no frames, no plugins, requests
# only to this server, images from it or from the page's own blob: URLs (page images fetched with the key).
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; "
                           "connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; "
                           "form-action 'self'; frame-ancestors 'none'")
SECURITY_HEADERS = {"Content-Security-Policy": CONTENT_SECURITY_POLICY, "X-Content-Type-Options": "nosniff",
                    "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY",
                    "Cross-Origin-Opener-Policy": "same-origin", "Cross-Origin-Resource-Policy": "same-origin"}


LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})


def _foreign(request: Request, hosts: frozenset[str] | set[str]) -> str | None:
    """Why an open-mode server (no keys: anything that reaches it acts for its tenant) refuses a request a web page
    may have sent, or None. A DNS-rebinding page reaches 127.0.0.1 under its own host name (the Host header says
    so); any other page's request says where it comes from (Origin, Sec-Fetch-Site), and a multipart form needs
    no preflight to be posted cross-site."""
    host = request.headers.get("host", "").strip().lower()
    name = host[: host.find("]") + 1] if host.startswith("[") else host.rsplit(":", 1)[0]
    if name not in hosts:
        return (f"Host {host!r} is not this server's address: without API keys the server answers only requests "
                "addressed to loopback (RAGD_ALLOWED_HOSTS adds names)")
    origin = request.headers.get("origin")
    if origin is not None and origin.lower() not in (f"http://{host}", f"https://{host}"):
        return (f"cross-origin request from {origin!r} refused: without API keys the server answers only its own "
                "pages and clients that are not browsers")
    if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return "cross-site request refused: without API keys the server answers only its own pages"
    return None


def _unstorable_parameter(request: Request) -> str | None:
    """Why a request's path or query cannot be served (a NUL, or a character no route may be given), or None:
    every parameter of every route gets the check bodies get, before it reaches a route, the database or a
    native library."""
    problem = unstorable(request.url.path)
    if problem:
        return f"the path {problem}"
    for name, value in request.query_params.multi_items():
        problem = unstorable(name) or unstorable(value)
        if problem:
            return f"query parameter {name!r} {problem}"
    return None


def _retry_after(exc: RagdError) -> dict[str, str]:
    """The Retry-After header of an error that may pass later (503s, 429s), else none."""
    if isinstance(exc, QueueFull | Busy):
        return {"Retry-After": str(exc.retry_after_s)}
    return {"Retry-After": "5"} if _status(exc)[0] == 503 else {}


def _pieces(text: str) -> list[str]:
    """An answer in word-sized pieces for streaming (joined, they give the answer back exactly)."""
    return re.findall(r"\s*\S+\s*?(?=\s|$)|\s+$", text) or [text]


def _last_user_text(messages: list[ChatMessage]) -> str:
    for message in reversed(messages):
        if message.role == "user":
            content = message.content
            text = content if isinstance(content, str) else " ".join(
                str(part.get("text", "")) for part in content or [] if part.get("type") == "text")
            if text.strip():
                return text.strip()[:8192]
    raise ApiError(400, "bad_request", "messages: no user message with text to answer")


def _document_validation_as_400(app: FastAPI) -> None:
    """OpenAPI without FastAPI's 422: a request that fails validation is answered 400 `bad_request`."""
    from fastapi.openapi.utils import get_openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, description=app.description,
                                 routes=app.routes)
            for path in schema.get("paths", {}).values():
                for operation in path.values():
                    responses = operation.get("responses", {})
                    if responses.get("422", {}).get("description") != "Validation Error":
                        continue  # a 422 of ragd's own (idempotency_key_reused)
                    if responses.pop("422", None) is not None and "400" not in responses:
                        responses["400"] = ERRORS[400]
            for name in ("HTTPValidationError", "ValidationError"):
                schema.get("components", {}).get("schemas", {}).pop(name, None)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _hashed(upload: UploadFile, digest: Any) -> Iterator[bytes]:
    """An uploaded file's blocks, its name and bytes added to digest on the way (the request's hash)."""
    name = (upload.filename or "").encode("utf-8", "surrogatepass")
    digest.update(b"\x00file\x00%d\x00" % len(name) + name)
    while block := upload.file.read(1 << 20):
        digest.update(block)
        yield block


IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key", min_length=1, max_length=255,
                                              pattern=r"^[\x21-\x7e]+$",
                                              description="Makes a retry of this request safe (see above)")]


def _request_hash(route: str, body: Any) -> str:
    try:
        text = json.dumps(body, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    except (RecursionError, ValueError, TypeError) as exc:
        raise ApiError(400, "bad_request", "this body cannot be made idempotent (nested too deep); send it "
                                           "without Idempotency-Key") from exc
    return hashlib.sha256(f"{route}\x00{text}".encode()).hexdigest()


def _idempotent(r: Ragd, who: str, key: str | None, request_hash: Callable[[], str],
                run: Callable[[], dict[str, Any]], status_code: int = 200) -> Any:
    """run(), once per Idempotency-Key: a repeat of a finished request replays its response."""
    if key is None:
        return run()
    digest = request_hash()
    r.store.tenant_role(who, create=True)  # (a write: its tenant exists from now on)
    with r.store.tenant(who) as conn:
        conn.execute(queries.CLAIM_IDEMPOTENCY_KEY, {"tenant_id": who, "key": key, "request_hash": digest})
        row = conn.execute(queries.GET_IDEMPOTENCY_KEY, {"key": key}).fetchone()
    assert row is not None
    if row[0] != digest:
        raise ApiError(422, "idempotency_key_reused", f"Idempotency-Key {key!r} was used for another request in the "
                                                      "last 24 hours; use a new key for a new request")
    if row[1] is not None:
        return JSONResponse(row[2], status_code=int(row[1]), headers={"Idempotent-Replayed": "true"})
    response = jsonable(run())
    with r.store.tenant(who) as conn:
        conn.execute(queries.FINISH_IDEMPOTENCY_KEY, {"key": key, "request_hash": digest, "status_code": status_code,
                                                      "response": Jsonb(response)})
    return response


QUERY_LOG = logging.getLogger("ragd.query")
REQUEST_LOG = logging.getLogger("ragd.request")  # one JSON line per HTTP request, whatever the route


def _log_failed_query(tenant: str, collection: str, request_id: str, question: str, status: int,
                      started: float) -> None:
    """The query log line of a request that got no answer: what is known, and its HTTP status."""
    if QUERY_LOG.isEnabledFor(logging.INFO):
        QUERY_LOG.info(json.dumps({
            "ts": log_timestamp(), "tenant_id": tenant,
            "collection": collection, "request_id": request_id,
            "question_hash": sha256_text(question),
            "latency_ms_total": round((time.perf_counter() - started) * 1000, 2), "http_status": status}))


def app_from_env() -> FastAPI:
    """The app for `ragd serve` workers, configured from RAGD_ variables: each request's line on ragd.request where
    RAGD_REQUEST_LOG says (stderr by default), each query's on ragd.query where RAGD_QUERY_LOG says."""
    from ..telemetry import json_lines

    settings = load_settings()
    uvicorn_log = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _CancelledAtShutdown) for f in uvicorn_log.filters):
        uvicorn_log.addFilter(_CancelledAtShutdown())
    json_lines("ragd.request", settings.request_log)
    json_lines("ragd.query", settings.query_log)
    return create_app(settings)


class _CancelledAtShutdown(logging.Filter):
    """A request still running when the shutdown's grace ran out is cancelled: one line, not uvicorn's
    traceback of the cancellation."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError):
            record.msg, record.args = "a request still running at shutdown was cancelled", None
            record.exc_info, record.exc_text = None, None
        return True


class ServerConfig(uvicorn.Config):
    """uvicorn's config with a listening socket that says it is TCP. uvicorn binds the listener it shares between
    worker processes with protocol 0, and asyncio only sets TCP_NODELAY on connections accepted from a socket that
    says IPPROTO_TCP, so with --workers > 1 every keep-alive response waited ~40 ms for the client's delayed ACK
    (uvicorn issue 3149). Rebuilt from its descriptor, the socket reads its real protocol from the kernel."""

    def bind_socket(self) -> socket.socket:
        return socket.socket(fileno=super().bind_socket().detach())


def _serves_jobs(rag: Ragd) -> bool:
    """Whether this server process runs queued ingestion jobs: RAGD_SERVE_JOBS on or off, else (auto) on the
    embedded server, where one command must be enough for uploads to be stored."""
    mode = rag.settings.serve_jobs
    return mode == "on" or (mode == "auto" and rag.store.embedded)


def run_server(host: str, port: int, workers: int) -> None:
    """Serve `app_from_env` with uvicorn, in `workers` processes sharing one listening socket when more than one."""
    _check_address(host, port)
    config = ServerConfig("ragd.server:app_from_env", factory=True, host=host, port=port, workers=workers,
                          log_level="warning", timeout_graceful_shutdown=SHUTDOWN_GRACE_S)
    try:
        if workers > 1:
            Multiprocess(config, sockets=[config.bind_socket()]).run()
        else:
            server = uvicorn.Server(config)
            with contextlib.suppress(SystemExit):  # (uvicorn exits when it cannot start; it logged why)
                server.run()
            if not server.started:
                raise ConfigError(f"could not serve on {host}:{port}: see the error above")
    except KeyboardInterrupt:
        pass
    _exit_when_stuck()


def _check_address(host: str, port: int) -> None:
    """ConfigError in one line when `host` names no address of this machine or `port` is taken there (uvicorn
    would log it with its own prefix and exit)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise ConfigError(f"cannot serve on host {host!r}: {getattr(exc, 'strerror', None) or exc}; give a name or "
                          "address of this machine (--host)") from None
    if port == 0:
        return
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise ConfigError(f"cannot serve on {host}:{port}: {exc.strerror} (another server on that port? choose "
                              "one with --port)") from None


# A server asked to stop lets requests in flight finish for this long, then cancels them and stops: a request's
# thread waiting on the database (up to RAGD_DB_LOCK_TIMEOUT_S) or anything else does not hold the process.
SHUTDOWN_GRACE_S = 5


def _exit_when_stuck(wait_s: float = 2.0) -> None:
    """End the process now when request threads outlive the shutdown (cancelled, they still wait on a lock or a
    statement): the interpreter would wait for them at exit. Their database sessions end with the process."""
    import threading

    deadline = time.monotonic() + wait_s
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join(max(0.0, deadline - time.monotonic()))
    stuck = [t.name for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon
             and t.is_alive()]
    if stuck:
        log.warning("stopping with %d request thread(s) still busy (%s): they are abandoned", len(stuck),
                    ", ".join(sorted(stuck)[:5]))
        logging.shutdown()
        os._exit(0)


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


def _version() -> str:
    from .. import __version__

    return __version__


def _respond(request: Request, status: int, code: str, message: str,
             headers: dict[str, str] | None = None) -> JSONResponse:
    rid = getattr(request.state, "request_id", "")
    return JSONResponse(error_body(code, message), status_code=status,
                        headers={**(headers or {}), **({"X-Request-ID": rid} if rid else {})})


def ragd_error_response(request: Request, exc: RagdError) -> JSONResponse:
    """A library error as the REST answer, wherever it is raised (a route, the middleware): its status and code,
    Retry-After where it may pass later; a 500's or a lost database's details are logged, never sent."""
    status, code = _status(exc)
    if status == 500:
        log.error("request %s failed: %s", getattr(request.state, "request_id", ""), exc)
        return _respond(request, 500, "internal", "an internal error occurred; see the server log")
    if status == 503:
        log.error("request %s: %s", getattr(request.state, "request_id", ""), exc)
        message = str(exc) if isinstance(exc, Busy) else DATABASE_UNAVAILABLE
        return _respond(request, 503, code, message, _retry_after(exc))
    return _respond(request, status, code, str(exc), _retry_after(exc))


def _errors(app: FastAPI) -> None:
    """Every error in one JSON shape, never a traceback."""

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return _respond(request, exc.status, exc.code, exc.message, exc.headers)

    @app.exception_handler(RagdError)
    async def ragd_error(request: Request, exc: RagdError) -> JSONResponse:
        return ragd_error_response(request, exc)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        return _respond(request, 400, "bad_request", f"{where or 'body'}: {first.get('msg', 'invalid request')}")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        codes = {404: "not_found", 405: "method_not_allowed"}
        headers = dict(exc.headers or {})
        if exc.status_code == 405:  # every method of the path, not only the first route's
            allowed = {m for route in app.routes if isinstance(route, APIRoute)
                       and route.path_regex.match(request.url.path) for m in route.methods or ()}
            headers["Allow"] = ", ".join(sorted(allowed)) or headers.get("Allow", "")
        return _respond(request, exc.status_code, codes.get(exc.status_code, "bad_request"), str(exc.detail),
                       headers)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("request %s failed", getattr(request.state, "request_id", ""))
        return _respond(request, 500, "internal", "an internal error occurred; see the server log")


__all__ = ["app_from_env", "create_app"]

