"""A tenant's collections and the evaluations kept of them."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from ...types import jsonable
from ..deps import CollectionParam, Rag, Tenant
from ..errors import errs

router = APIRouter()


@router.get("/v1/evals", tags=["quality"], responses=errs(400, 401, 429, 500, 503))
def list_evaluations(r: Rag, who: Tenant, collection: CollectionParam = None,
                     limit: Annotated[int, Query(ge=1, le=1000)] = 200) -> dict[str, Any]:
    """The tenant's evaluations kept by `ragd eval --save`, oldest first: per plan its metrics (ndcg@10, mrr,
    recall...; answers: abstain_f1, answered...) and latency."""
    return {"evaluations": jsonable(r.evaluations(tenant=who, collection=collection, limit=limit))}


@router.get("/v1/collections", tags=["documents"], responses=errs(401, 429, 500, 503))
def list_collections(r: Rag, who: Tenant) -> dict[str, Any]:
    """The tenant's collections with their pinned model and sizes."""
    return {"collections": jsonable(r.collections(who))}
