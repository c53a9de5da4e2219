"""MCP tools through the official SDK's own client: over stdio (`ragd mcp`) and over streamable HTTP (`/mcp` in a
running `ragd serve`, behind API keys). Results are the library's own JSON."""

from __future__ import annotations

import base64
import json
import os
import sys
from typing import Any

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

import ragd
from ragd.config import Settings

from .conftest import REPO, SAMPLES, run_cli
from .test_serve import serving

QUESTION = "How many days of parental leave do employees in Germany get?"


def _json(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)  # type: ignore[no-any-return]


async def _exercise(client: Client, collection: str) -> dict[str, Any]:
    names = sorted(t.name for t in (await client.list_tools()).tools)
    ingested = _json(await client.call_tool("ingest", {"collection": collection, "texts": [
        {"id": "moon", "text": "The lunar base opens in 2031 with twelve crew.", "title": "Moon"}], "files": [
        {"name": "leave.md", "content_base64": base64.b64encode((SAMPLES / "parental-leave.md").read_bytes())
         .decode()}]}))
    searched = _json(await client.call_tool("search", {"query": "lunar base crew", "collection": collection,
                                                       "k": 3, "rerank": False}))
    asked = _json(await client.call_tool("ask", {"question": QUESTION, "collection": collection}))
    listed = _json(await client.call_tool("list_documents", {"collection": collection}))
    one = _json(await client.call_tool("get_document", {"ref": "moon", "collection": collection}))
    missing = await client.call_tool("get_document", {"ref": "nope", "collection": collection})
    return {"names": names, "ingested": ingested, "searched": searched, "asked": asked, "listed": listed,
            "one": one, "missing": missing}


def _check(seen: dict[str, Any]) -> None:
    assert seen["names"] == ["ask", "get_document", "ingest", "list_documents", "search"]
    assert seen["ingested"]["counts"]["ingested"] == 2
    assert seen["searched"]["results"][0]["external_id"] == "moon"
    assert not seen["asked"]["abstained"] and "Germany" in seen["asked"]["answer"] and seen["asked"]["citations"]
    assert [d["external_id"] for d in seen["listed"]["documents"]] == ["leave.md", "moon"]
    assert seen["one"]["external_id"] == "moon" and seen["one"]["versions"]
    assert seen["missing"].is_error and "document_not_found" in seen["missing"].content[0].text


def test_mcp_over_stdio_matches_the_library(cli_env: dict[str, str], settings: Settings, name: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGD_")} | cli_env | {
        "RAGD_TENANT": "mcp-stdio", "RAGD_RERANKER": "none"}
    params = StdioServerParameters(command=sys.executable, args=["-m", "ragd.cli", "mcp"], env=env, cwd=str(REPO))

    async def main() -> dict[str, Any]:
        async with Client(params, read_timeout_seconds=120) as client:
            return await _exercise(client, name)

    seen = anyio.run(main)
    _check(seen)
    library = ragd.connect(settings=settings.model_copy(update={"reranker": "none", "cache_ttl_s": 0}))
    try:
        hits = library.collection(name, tenant="mcp-stdio", create=False).search("lunar base crew", k=3, rerank=False)
    finally:
        library.close()
    assert seen["searched"]["results"] == json.loads(json.dumps([h.as_dict() for h in hits], default=str))


def test_mcp_over_http_needs_the_key_and_keeps_tenants_apart(cli_env: dict[str, str], name: str) -> None:
    env = {**cli_env, "RAGD_RERANKER": "none"}
    key_a = run_cli(["keys", "create", "--tenant", "mcp-a"], env).stdout.strip().splitlines()[-1]
    key_b = run_cli(["keys", "create", "--tenant", "mcp-b"], env).stdout.strip().splitlines()[-1]

    async def session(url: str, key: str | None, work: Any) -> Any:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        async with httpx2.AsyncClient(headers=headers, timeout=120) as http, \
                Client(streamable_http_client(url, http_client=http), read_timeout_seconds=120) as client:
            return await work(client)

    with serving(env) as server:
        url = server["url"] + "/mcp"
        seen = anyio.run(session, url, key_a, lambda c: _exercise(c, name))
        other = anyio.run(session, url, key_b, lambda c: c.call_tool("list_documents", {"collection": name}))
        refused = httpx2.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=30)
    _check(seen)
    assert other.is_error and "collection_not_found" in other.content[0].text  # B sees nothing of A's
    assert refused.status_code == 401 and refused.json()["error"] == "unauthorized"


def test_mcp_ingest_with_wait_false_queues_files(cli_env: dict[str, str], settings: Settings, name: str) -> None:
    from ragd import jobs

    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGD_")} | cli_env | {
        "RAGD_TENANT": "mcp-queue", "RAGD_RERANKER": "none"}
    params = StdioServerParameters(command=sys.executable, args=["-m", "ragd.cli", "mcp"], env=env, cwd=str(REPO))
    leave = base64.b64encode((SAMPLES / "parental-leave.md").read_bytes()).decode()

    async def main() -> tuple[dict[str, Any], Any]:
        async with Client(params, read_timeout_seconds=120) as client:
            queued = _json(await client.call_tool("ingest", {"collection": name, "wait": False, "files": [
                {"name": "leave.md", "content_base64": leave}]}))
            refused = await client.call_tool("ingest", {"collection": name, "wait": False, "texts": [
                {"id": "t", "text": "Texts are stored at once."}]})
            return queued, refused

    queued, refused = anyio.run(main)
    assert queued["status"] == "queued" and queued["files"] == 1 and queued["collection"] == name
    assert refused.is_error and "bad_request" in refused.content[0].text
    library = ragd.connect(settings=settings)
    try:
        anyio.run(lambda: jobs.Jobs(library).run(signals=False, until_empty=True))
        run = library.run(queued["run_id"], tenant="mcp-queue")
        assert run["status"] == "succeeded" and [i["external_id"] for i in run["items"]] == ["leave.md"]
    finally:
        library.close()
