"""Operations: is the process up (`/healthz`), can it serve (`/readyz`: database, schema, models), what it has
done and how it stands (`/metrics`, Prometheus)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ...embed import make_embedder
from ...errors import RagdError
from ...store.schema import latest_migration
from ..deps import Rag
from ..errors import ERRORS, ApiError, errs
from ..metrics import CONTENT_TYPE, allowed, exposition

router = APIRouter()


@router.get("/healthz", tags=["ops"])
def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz", tags=["ops"], responses={503: ERRORS[503]})
def readyz(request: Request, r: Rag) -> dict[str, Any]:
    """The database answers, its schema is current, and the configured models load (the embedder, the
    reranker and the generator; loaded once, then kept)."""
    version = r.store.schema_version()
    latest = latest_migration()
    if version < latest:
        raise ApiError(503, "schema_outdated", f"the schema is at {version}, this ragd needs {latest}: "
                                               "run `ragd migrate`")
    if not getattr(request.app.state, "models_ready", False):
        try:
            make_embedder(r.settings.embedder, r.settings).dims  # noqa: B018 (loads the model)
            _ = r.reranker, r.generator
        except RagdError as exc:
            raise ApiError(503, "models_unavailable", f"a configured model does not load: {exc}") from exc
        request.app.state.models_ready = True
    return {"status": "ready", "schema_version": version}


@router.get("/metrics", tags=["ops"], response_class=Response,
            responses={**errs(401), 403: {"description": "Not a loopback caller, and RAGD_METRICS_TOKEN is unset"},
                       200: {"description": "Prometheus text format", "content": {"text/plain": {}}}})
def metrics(request: Request, r: Rag) -> Response:
    """Prometheus metrics: requests by route and status with latency histograms, answers by outcome and each
    answer stage's latency, ingested items by outcome, the job queue and workers, the connection pools, whether
    the database answers. Loopback callers only, or callers with RAGD_METRICS_TOKEN as a bearer token."""
    allowed(request, r)
    return Response(exposition(r), media_type=CONTENT_TYPE)
