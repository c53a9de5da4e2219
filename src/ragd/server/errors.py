"""Errors as the REST API answers them: one JSON shape `{"error": CODE, "message": ...}` for every failure, a
library error's status and code, `Retry-After` where it may pass later, never a traceback."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Mount

from ..errors import (
    Busy,
    DatabaseUnavailable,
    FileTooLarge,
    InvalidRequest,
    LLMUnavailable,
    NotFound,
    OriginalsUnavailable,
    PageNotRendered,
    QueueFull,
    RagdError,
    RetryLater,
)

log = logging.getLogger("ragd.server")


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers or {}


def status_of(exc: RagdError) -> tuple[int, str]:
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


ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"description": description, "content": {"application/json": {"example": error_body(code, "...")}}}
    for status, code, description in (
        (400, "bad_request", "The request is malformed or names something invalid"),
        (401, "unauthorized", "No API key, or a key that is unknown or revoked"),
        (403, "forbidden", "The body names another tenant than the API key's"),
        (404, "not_found", "No such object for this tenant"),
        (413, "file_too_large", "An uploaded file is over RAGD_MAX_FILE_BYTES"),
        (409, "idempotency_key_in_use", "A request with this Idempotency-Key is still running; retry after "
                                        "Retry-After seconds, and its response is replayed"),
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


def errs(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The documented error responses of a route, for OpenAPI."""
    return {s: ERRORS[s] for s in statuses}


def retry_after(exc: RagdError) -> dict[str, str]:
    """The Retry-After header of an error that may pass later (503s, 429s), else none."""
    if isinstance(exc, RetryLater):
        return {"Retry-After": str(exc.retry_after_s)}
    return {"Retry-After": "5"} if status_of(exc)[0] == 503 else {}


def document_validation_as_400(app: FastAPI) -> None:
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


def respond(request: Request, status: int, code: str, message: str,
             headers: dict[str, str] | None = None) -> JSONResponse:
    rid = getattr(request.state, "request_id", "")
    return JSONResponse(error_body(code, message), status_code=status,
                        headers={**(headers or {}), **({"X-Request-ID": rid} if rid else {})})


def ragd_error_response(request: Request, exc: RagdError) -> JSONResponse:
    """A library error as the REST answer, wherever it is raised (a route, the middleware): its status and code,
    Retry-After where it may pass later; a 500's or a lost database's details are logged, never sent."""
    status, code = status_of(exc)
    if status == 500:
        log.error("request %s failed: %s", getattr(request.state, "request_id", ""), exc)
        return respond(request, 500, "internal", "an internal error occurred; see the server log")
    if status == 503:
        log.error("request %s: %s", getattr(request.state, "request_id", ""), exc)
        message = str(exc) if isinstance(exc, Busy) else DATABASE_UNAVAILABLE
        return respond(request, 503, code, message, retry_after(exc))
    return respond(request, status, code, str(exc), retry_after(exc))


METHODS = ("DELETE", "GET", "PATCH", "POST", "PUT")


def allowed_methods(app: FastAPI, request: Request) -> list[str]:
    """The methods some route of the app serves at the request's path, in name order (routers included in the
    app are asked as they match, not read from their route lists)."""
    routes = [route for route in app.routes if not isinstance(route, Mount)]  # (the web page's static files)
    return [method for method in METHODS
            if any(route.matches({**request.scope, "method": method})[0] == Match.FULL for route in routes)]


def install_handlers(app: FastAPI) -> None:
    """Every error in one JSON shape, never a traceback."""

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return respond(request, exc.status, exc.code, exc.message, exc.headers)

    @app.exception_handler(RagdError)
    async def ragd_error(request: Request, exc: RagdError) -> JSONResponse:
        return ragd_error_response(request, exc)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        return respond(request, 400, "bad_request", f"{where or 'body'}: {first.get('msg', 'invalid request')}")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        codes = {404: "not_found", 405: "method_not_allowed"}
        headers = dict(exc.headers or {})
        if exc.status_code == 405:  # every method of the path, not only the first route's
            headers["Allow"] = ", ".join(allowed_methods(app, request)) or headers.get("Allow", "")
        return respond(request, exc.status_code, codes.get(exc.status_code, "bad_request"), str(exc.detail),
                       headers)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("request %s failed", getattr(request.state, "request_id", ""))
        return respond(request, 500, "internal", "an internal error occurred; see the server log")
