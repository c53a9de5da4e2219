"""What every request passes before and after its route: a request id, refusals made before any route runs (a
value no route may be given, another site's page on an open server, an /mcp call without a valid key), the
security headers on every response and one JSON log line per request (`ragd.request`)."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from fastapi import Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response

from .. import mcpserver
from ..errors import RagdError
from ..ingest.normalize import unstorable
from ..metrics import count_request
from ..telemetry import log_timestamp
from .deps import tenant
from .errors import ApiError, error_body, ragd_error_response

log = logging.getLogger("ragd.server")
REQUEST_LOG = logging.getLogger("ragd.request")  # one JSON line per HTTP request, whatever the route


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


async def every_request(request: Request, call_next: Callable[[Request], Any]) -> Any:
    """The middleware: a request id, the refusals made before any route, the security headers on every
    response, one log line per request."""
    rid = request.headers.get("x-request-id") or uuid.uuid4().hex
    request.state.request_id = rid[:128]
    started = time.perf_counter()
    response = await _early(request) or await _call(request, call_next)
    response.headers["X-Request-ID"] = request.state.request_id
    for name, value in SECURITY_HEADERS.items():  # on every response: errors, refusals and /mcp too
        response.headers.setdefault(name, value)
    route = request.scope.get("route")
    count_request(getattr(route, "path", None) or "unmatched", request.method, response.status_code,
                  getattr(request.state, "tenant", None), time.perf_counter() - started)
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
    refusal = None if request.app.state.keyed else _foreign(request, request.app.state.hosts)
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
