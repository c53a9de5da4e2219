"""Seed 002's hybrid search of a namespace (a collection)."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from ..deps import NAME, TEXT, Int, Rag, Strict, Tenant
from ..errors import errs

router = APIRouter()


class SearchRequest(Strict):
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


@router.post("/v1/search", response_model=SearchResponse, response_model_exclude_none=True, tags=["search"],
          responses=errs(400, 401, 404, 429, 500, 503))
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
