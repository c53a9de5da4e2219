"""The REST app, assembled: the error handlers, the MCP endpoint, the web page, the middleware every request
passes and one router per resource group (see routes/). `ragd serve` workers build it with `app_from_env`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from fastapi import FastAPI
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

from .. import jobs, keys, mcpserver
from ..config import Settings, load_settings
from ..engine import Ragd, connect
from ..ingest.pipeline import close_interrupted_runs
from ..ingest.uploads import sweep
from . import web
from .errors import document_validation_as_400, install_handlers
from .guard import LOOPBACK_NAMES, every_request
from .routes import ROUTERS

log = logging.getLogger("ragd.server")
Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[Any]]


def create_app(settings: Settings | None = None, *, client: Ragd | None = None) -> FastAPI:
    """The REST app over one `Ragd` (made from `settings`, or the given client, which the app does not close)."""
    tools = mcpserver.build(lambda: app.state.rag)
    # no /docs or /redoc: FastAPI's pages load Swagger UI / ReDoc from a CDN into the API's origin; the OpenAPI
    # document is served at /openapi.json for any viewer the operator trusts
    app = FastAPI(title="ragd", version=_version(), lifespan=_lifespan(tools, settings, client), docs_url=None,
                  redoc_url=None, description="Deterministic retrieval-augmented generation on PostgreSQL + pgvector.")
    install_handlers(app)
    # stateless JSON: any worker process can answer any request; the API key guards it (see the middleware)
    mcp_app = tools.streamable_http_app(streamable_http_path="/mcp", stateless_http=True, json_response=True,
                                        transport_security=TransportSecuritySettings(
                                            enable_dns_rebinding_protection=False))
    app.router.routes.extend(mcp_app.routes)  # POST/GET/DELETE /mcp
    web.mount(app)
    document_validation_as_400(app)
    app.middleware("http")(every_request)
    for router in ROUTERS:
        app.include_router(router)
    return app


def _lifespan(tools: MCPServer, settings: Settings | None, client: Ragd | None) -> Lifespan:
    """What a server process does when it starts and stops: its library (made here unless given), indexes built
    in the background, leftovers of processes that ended mid-request cleared, keyed or open mode, the job worker
    where this process runs one."""

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
            if client is None:
                rag.close()

    return lifespan


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


def _serves_jobs(rag: Ragd) -> bool:
    """Whether this server process runs queued ingestion jobs: RAGD_SERVE_JOBS on or off, else (auto) on the
    embedded server, where one command must be enough for uploads to be stored."""
    mode = rag.settings.serve_jobs
    return mode == "on" or (mode == "auto" and rag.store.embedded)


def _version() -> str:
    from .. import __version__

    return __version__
