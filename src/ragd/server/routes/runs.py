"""Ingestion runs: a collection's latest, one with its items, cancelling a queued one."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from ... import jobs
from ...types import jsonable
from ..deps import CollectionParam, Id, Rag, Tenant
from ..errors import errs

router = APIRouter()


@router.get("/v1/runs", tags=["documents"], responses=errs(400, 401, 404, 429, 500, 503))
def list_runs(r: Rag, who: Tenant, collection: CollectionParam = None,
              limit: Annotated[int, Query(ge=1, le=1000)] = 20) -> dict[str, Any]:
    """The latest ingestion runs of the collection, newest first."""
    col = r.collection(collection, tenant=who, create=False)
    return {"runs": jsonable(col.runs(limit))}


@router.get("/v1/runs/{run_id}", tags=["documents"], responses=errs(400, 401, 404, 429, 500, 503))
def get_run(run_id: Id, r: Rag, who: Tenant) -> dict[str, Any]:
    """One ingestion run with every item."""
    return jsonable(r.run(run_id, tenant=who))  # type: ignore[no-any-return]


@router.post("/v1/runs/{run_id}/cancel", tags=["documents"], responses=errs(400, 401, 404, 429, 500, 503))
def cancel_run(run_id: Id, r: Rag, who: Tenant) -> dict[str, Any]:
    """Cancel a queued run: its queued files are dropped; files being stored finish; stored items stay (the run
    remains, `cancelled`). A run that already ended is left as it is (its status is returned)."""
    return jobs.cancel(r, run_id, tenant=who)
