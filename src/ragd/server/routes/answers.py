"""Answers: seed 001's `/v1/query` (an answer with citations, or the abstention), OpenAI's chat completions and
model list over the same answers, and an answer's reproducibility record."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from ...engine import Ragd
from ...errors import RagdError
from ...ids import sha256_text
from ...telemetry import log_timestamp
from ...types import Answer, jsonable
from ..deps import NAME, TEXT, Id, Int, Rag, Strict, Tenant, own_tenant
from ..errors import STREAMED, ApiError, error_body, errs, status_of

router = APIRouter()
QUERY_LOG = logging.getLogger("ragd.query")


class QueryRequest(Strict):
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


@router.post("/v1/query", response_model=QueryResponse, tags=["answers"],
          responses={**errs(400, 401, 403, 404, 429, 500, 503), 200: STREAMED,
                     502: {"description": "The generator (LLM) failed",
                           "content": {"application/json": {"example": error_body("llm_unavailable", "...")}}}})
def query(body: QueryRequest, request: Request, r: Rag, key_tenant: Tenant) -> Any:
    """Seed 001: an answer with citations, or the abstain answer when the documents do not support one. With
    `stream`, server-sent events: `token` ({"text"}) pieces of the answer, then `citations`, then `done` with
    the whole response."""
    who = own_tenant(request, key_tenant, body.tenant_id)
    answer = answer_logged(request, r, who, body.collection, body.question, body.top_k, body.debug)
    response = {"answer": answer.answer, "citations": list(answer.citations), "abstained": answer.abstained,
                "debug": answer.debug if body.debug else None}
    if not body.stream:
        return response
    events = [*(("token", {"text": piece}) for piece in answer.pieces()),
              ("citations", list(answer.citations)), ("done", response)]
    return StreamingResponse((f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events),
                             media_type="text/event-stream")


@router.get("/v1/models", tags=["chat"], responses=errs(401, 429, 500, 503))
def models(r: Rag, who: Tenant) -> dict[str, Any]:
    """OpenAI model list: each of the tenant's collections is a model of /v1/chat/completions."""
    return {"object": "list", "data": [
        {"id": c["name"], "object": "model", "created": int(c["created_at"].timestamp()), "owned_by": "ragd"}
        for c in r.collections(who)]}


@router.post("/v1/chat/completions", tags=["chat"],
          responses={**errs(400, 401, 404, 429, 500, 503), 200: {**STREAMED, "content": {
              "application/json": {"schema": {"type": "object"}}, **STREAMED["content"]}}})
def chat(body: ChatRequest, request: Request, r: Rag, who: Tenant) -> Any:
    """OpenAI-compatible chat: the model names the collection, the last user message is the question, the
    answer carries its [chunk:ID] markers and a `citations` list."""
    question = _last_user_text(body.messages)
    answer = answer_logged(request, r, who, body.model, question, 10, False)
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
             *(chunk({"content": piece}) for piece in answer.pieces()),
             chunk({}, "stop", citations=list(answer.citations), usage=usage), "data: [DONE]\n\n"]
    return StreamingResponse(iter(lines), media_type="text/event-stream")


def answer_logged(request: Request, r: Ragd, who: str, collection: str | None, question: str, k: int,
                  debug: bool, **options: Any) -> Answer:
    """Ask (`options`: filters, rerank), and log the query line with its HTTP status (failures too)."""
    started = time.perf_counter()
    rid = request.state.request_id
    try:
        col = r.collection(collection, tenant=who, create=False)
        answer = col.ask(question, k=k, debug=debug, request_id=rid, emit_log=False, **options)
    except (RagdError, ApiError) as exc:
        status = exc.status if isinstance(exc, ApiError) else status_of(exc)[0]
        _log_failed_query(who, collection or r.settings.collection, rid, question, status, started)
        raise
    QUERY_LOG.info(json.dumps({**(answer.log or {}), "http_status": 200}))
    return answer


@router.get("/v1/executions/{query_id}", tags=["answers"], responses=errs(400, 401, 404, 429, 500, 503))
def get_execution(query_id: Id, r: Rag, who: Tenant) -> dict[str, Any]:
    """An answer's reproducibility record (its query id: `debug.query_id` of /v1/query): question, models,
    plan, retrieved and context chunks, answer, citations, timings and result hash."""
    return jsonable(r.execution(query_id, tenant=who))  # type: ignore[no-any-return]


def _last_user_text(messages: list[ChatMessage]) -> str:
    for message in reversed(messages):
        if message.role == "user":
            content = message.content
            text = content if isinstance(content, str) else " ".join(
                str(part.get("text", "")) for part in content or [] if part.get("type") == "text")
            if text.strip():
                return text.strip()[:8192]
    raise ApiError(400, "bad_request", "messages: no user message with text to answer")


def _log_failed_query(tenant: str, collection: str, request_id: str, question: str, status: int,
                      started: float) -> None:
    """The query log line of a request that got no answer: what is known, and its HTTP status."""
    if QUERY_LOG.isEnabledFor(logging.INFO):
        QUERY_LOG.info(json.dumps({
            "ts": log_timestamp(), "tenant_id": tenant,
            "collection": collection, "request_id": request_id,
            "question_hash": sha256_text(question),
            "latency_ms_total": round((time.perf_counter() - started) * 1000, 2), "http_status": status}))
