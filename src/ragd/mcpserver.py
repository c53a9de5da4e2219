"""MCP (the official `mcp` SDK): ragd's tools for agents, over stdio (`ragd mcp`) or streamable HTTP (mounted at
`/mcp` in `ragd serve`, behind the same API keys).

Tools: `search`, `ask`, `ingest` (texts, or files sent as base64), `list_documents`, `get_document`. Each returns
the library's own JSON (`Candidate.as_dict`, `Answer.as_dict`, `IngestReport.as_dict`, the document rows). The
tenant is the one of the API key over HTTP (set by the REST app's middleware after it checked the key), and
RAGD_TENANT over stdio, where the caller is the local user who started the process."""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from . import jobs
from .engine import Ragd
from .errors import DatabaseUnavailable, InvalidRequest, RagdError
from .ingest.uploads import spool, spool_folder
from .types import jsonable

_log = logging.getLogger("ragd.mcp")
TENANT_STATE = "ragd_tenant"  # where the REST middleware leaves the authenticated tenant in the ASGI scope
MAX_FILES = 20


def build(client: Callable[[], Ragd]) -> MCPServer:
    """The MCP server over the `Ragd` that `client()` returns."""
    # log_level: the SDK configures the root logger at this level; ragd's own loggers are the operator's to route
    server = MCPServer("ragd", log_level="WARNING",
                       instructions="Search, answer with citations, and ingest documents with ragd. "
                                    "`ask` abstains when the documents do not support an answer.")

    def tenant(ctx: Context) -> str:
        request = ctx.request_context.request if ctx is not None else None
        if request is None:  # stdio: the local user's configured tenant
            return client().settings.tenant
        scope_state = getattr(request, "scope", {}).get("state", {})
        who = scope_state.get(TENANT_STATE) if isinstance(scope_state, dict) else None
        if not who:
            raise ToolError("unauthorized: this MCP endpoint needs an API key (Authorization: Bearer)")
        return str(who)

    def run(fn: Callable[[], Any]) -> dict[str, Any]:
        try:
            result: dict[str, Any] = jsonable(fn())
            return result
        except DatabaseUnavailable as exc:  # its message names the URL, user and socket: logged, never sent
            _log.error("MCP tool failed: %s", exc)
            raise ToolError(f"{exc.code}: the database is unavailable; retry later") from exc
        except RagdError as exc:
            raise ToolError(f"{exc.code}: {' '.join(str(exc).split())}") from exc

    @server.tool()
    def search(query: str, ctx: Context, collection: str | None = None, k: int = 10,
               rerank: bool = True) -> dict[str, Any]:
        """Hybrid (vector + BM25) search of a collection; `rerank` rescores the head with the cross-encoder."""
        who = tenant(ctx)
        return run(lambda: {"results": [c.as_dict() for c in client().collection(
            collection, tenant=who, create=False).search(query, k=k, rerank=rerank)]})

    @server.tool()
    def ask(question: str, ctx: Context, collection: str | None = None, k: int = 12) -> dict[str, Any]:
        """An answer with [chunk:ID] citations, or the abstain answer when the documents do not support one."""
        who = tenant(ctx)
        return run(lambda: client().collection(collection, tenant=who, create=False).ask(
            question, k=k).as_dict())

    @server.tool()
    def ingest(ctx: Context, collection: str | None = None, texts: list[dict[str, Any]] | None = None,
               files: list[dict[str, str]] | None = None, wait: bool = True) -> dict[str, Any]:
        """Ingest documents: `texts` as [{"id", "text", "title"?, "metadata"?}], and/or `files` as
        [{"name", "content_base64"}] in any supported format. Returns the run with each item's outcome; with
        `wait` false, files are queued (one job each) and the queued run's id returns at once."""
        who = tenant(ctx)
        if not texts and not files:
            raise ToolError("bad_request: give texts or files to ingest")
        if files and len(files) > MAX_FILES:
            raise ToolError(f"bad_request: at most {MAX_FILES} files per call")

        if not wait and texts:
            raise ToolError("bad_request: only files are queued (wait false); send texts with wait true")

        def go() -> dict[str, Any]:
            col = client().collection(collection, tenant=who)
            with spool_folder(col.settings.home) as folder:
                uploads = [spool(folder, n, f.get("name"), [_decoded(f)], col.settings.max_file_bytes)
                           for n, f in enumerate(files or [])]
                if not wait:
                    return {"collection": col.name, **jobs.enqueue(col, uploads=uploads).as_dict()}
                report = col.ingest(documents=list(texts or []), uploads=uploads)
            return {"collection": col.name, **report.as_dict()}

        return run(go)

    @server.tool()
    def list_documents(ctx: Context, collection: str | None = None, limit: int = 100,
                       offset: int = 0) -> dict[str, Any]:
        """Documents of a collection (by external id), with their active version."""
        who = tenant(ctx)
        if not 1 <= limit <= 1000 or offset < 0:
            raise ToolError("bad_request: limit is 1 to 1000 and offset at least 0")
        return run(lambda: {"documents": client().collection(
            collection, tenant=who, create=False).documents(limit=limit, offset=offset)})

    @server.tool()
    def get_document(ref: str, ctx: Context, collection: str | None = None) -> dict[str, Any]:
        """One document by external id or doc id, with its versions."""
        who = tenant(ctx)
        return run(lambda: client().collection(collection, tenant=who, create=False).document(
            ref))

    return server


def _decoded(item: dict[str, str]) -> bytes:
    try:
        return base64.b64decode(item.get("content_base64") or "", validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidRequest(f"{item.get('name') or 'a file'}: content_base64 is not base64") from exc


def run_stdio() -> None:
    """`ragd mcp`: serve the tools over stdio until the client closes the pipe."""
    from .config import load_settings
    from .engine import connect

    rag = connect(settings=load_settings())
    try:
        build(lambda: rag).run("stdio")
    finally:
        rag.close()
