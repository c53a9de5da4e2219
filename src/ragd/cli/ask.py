"""`ragd search`, `ragd ask` and `ragd executions show`: questions and what was answered."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import click
from rich.markup import escape

from ..retrieve.filters import parse_filter_args
from ..retrieve.fuse import METHODS
from .base import common, emit_json, err, fail, handle_errors, json_default, main, open_collection, out

# -- search --------------------------------------------------------------------------------------------


@main.command()
@click.argument("query")
@common
@click.option("--k", "-k", default=12, show_default=True, type=click.IntRange(1, 1000), help="Results to return.")
@click.option("--filter", "-f", "filters", multiple=True,
              help="tag=X (any), tags_all=a,b, doc=ID, id=EXTERNAL_ID, meta.KEY=VALUE, or one JSON object.")
@click.option("--fusion", type=click.Choice([*METHODS, "vector", "lexical"]), default="weighted",
              show_default=True, help="Hybrid fusion method, or a single leg.")
@click.option("--keyword-weight", type=float, default=0.5, show_default=True, help="Weighted fusion: lexical weight.")
@click.option("--semantic-weight", type=float, default=0.5, show_default=True, help="Weighted fusion: vector weight.")
@click.option("--exact", is_flag=True, help="Exact vector scan instead of the HNSW index.")
@click.option("--rerank", is_flag=True, help="Rerank the fused head with RAGD_RERANKER (default: the local model).")
@click.option("--embedder", "-e", help="Must match the collection's model (default: the collection's).")
@click.option("--explain", is_flag=True, help="Print each leg's SQL and PostgreSQL plan (EXPLAIN ANALYZE).")
@click.option("--json", "as_json", is_flag=True, help='Print {"results": [...]} as one JSON object.')
@handle_errors
def search(query: str, collection: str | None, tenant: str | None, k: int, filters: Sequence[str], fusion: str,
           keyword_weight: float, semantic_weight: float, exact: bool, rerank: bool, embedder: str | None,
           explain: bool, as_json: bool) -> None:
    """Hybrid search (vector + BM25, fused) over a collection."""
    col = open_collection(collection, tenant, embedder, create=False)
    if explain:
        legs = col.explain(query, k=k, filters=parse_filter_args(filters), fusion=fusion, exact=exact, analyze=True)
        if as_json:
            emit_json({"query": query, "legs": legs})
        for leg in [] if as_json else legs:
            out.print(f"[bold]-- {leg['leg']}[/]\n{leg['sql']}\n\n{leg['plan']}\n", markup=True, highlight=False)
        return
    started = time.perf_counter()
    debug: dict[str, Any] = {}
    hits = col.search(query, k=k, filters=parse_filter_args(filters), fusion=fusion, debug=debug,
                      keyword_weight=keyword_weight, semantic_weight=semantic_weight, exact=exact, rerank=rerank)
    latency = (time.perf_counter() - started) * 1000
    if as_json:
        emit_json({"query": query, "collection": col.name, "fusion": fusion, "latency_ms": round(latency, 2),
                   "debug": debug, "results": [h.as_dict() for h in hits]})
        return
    if debug.get("reranker_skipped"):
        err.print(f"[yellow]reranker skipped, fused order kept: {debug.get('reranker_error')}[/]")
    if not hits:
        out.print("no results")
        return
    for rank, hit in enumerate(hits, start=1):
        where = " > ".join(hit.heading_path) or (hit.title or "")
        out.print(f"[bold]{rank:>2}. {hit.score:.4f}[/]  {hit.external_id}  [dim]#{hit.chunk_index} {where}[/]")
        snippet = " ".join(hit.content.split())
        out.print(f"    {snippet[:300]}{'…' if len(snippet) > 300 else ''}")
    out.print(f"[dim]{len(hits)} results in {latency:.1f} ms[/]")


# -- ask -----------------------------------------------------------------------------------------------


@main.command()
@click.argument("question")
@common
@click.option("--k", "-k", default=12, show_default=True, type=click.IntRange(1, 50),
              help="Candidates for the context.")
@click.option("--filter", "-f", "filters", multiple=True, help="As for search.")
@click.option("--no-rerank", is_flag=True, help="Answer from the fused order (RRF threshold for abstaining).")
@click.option("--debug", is_flag=True, help="Include the debug record (evidence, context, timings).")
@click.option("--json", "as_json", is_flag=True, help='Print {"answer", "citations", "abstained", "debug"}.')
@handle_errors
def ask(question: str, collection: str | None, tenant: str | None, k: int, filters: Sequence[str], no_rerank: bool,
        debug: bool, as_json: bool) -> None:
    """Answer a question from a collection with citations, or abstain when the documents do not support one."""
    col = open_collection(collection, tenant, None, create=False)
    _query_log(col.settings.query_log)
    answer = col.ask(question, k=k, filters=parse_filter_args(filters), rerank=False if no_rerank else None,
                     debug=debug)
    if as_json:
        emit_json(answer.as_dict())
        return
    out.print(answer.answer, markup=False)
    for n, c in enumerate(answer.citations, start=1):
        out.print(f"[dim][{n}] {c['title'] or ''} ({c['version_label']}) chunk:{c['chunk_id']}[/]")
    if answer.reason:
        out.print(f"[dim]{escape(answer.reason)}; the closest passages:[/]")
        for c in answer.closest:
            out.print(f"[dim]  {escape(c['title'] or '')} ({c['version_label']}) chunk:{c['chunk_id']}, lacks "
                      f"{escape(', '.join(c['missing']))}[/]")
    if debug:
        out.print_json(json.dumps(answer.debug, default=json_default))


def _query_log(where: str) -> None:
    """Send the ragd.query log lines (one JSON object per answered query) where RAGD_QUERY_LOG says."""
    from ..telemetry import json_lines

    json_lines("ragd.query", where)


@main.group()
def executions() -> None:
    """Reproducibility records of answered questions."""


@executions.command("show")
@click.argument("query_id")
@common
@click.option("--replay", is_flag=True, help="Ask the recorded question again and compare the result hashes.")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def executions_show(query_id: str, collection: str | None, tenant: str | None, replay: bool, as_json: bool) -> None:
    """One record: the question, models, plan, retrieved and context chunks, the answer and its hash; with
    --replay, whether asking again gives the same hash (exit 1 when it does not)."""
    col = open_collection(collection, tenant, None, create=False)
    if replay:
        record, answer = col.replay(query_id)
        same = answer.result_hash == record["result_hash"]
        payload = {"query_id": record["query_id"], "result_hash": record["result_hash"],
                   "replay_hash": answer.result_hash, "replay_query_id": answer.query_id, "matches": same}
        if as_json:
            emit_json(payload)
        else:
            out.print(f"recorded {record['result_hash']}\nreplayed {answer.result_hash}\n"
                      f"{'same result' if same else 'DIFFERENT result'}")
        if not same:
            fail("replay_differs", "the replayed answer's hash differs from the recorded one", 1)
        return
    record = col.execution(query_id)
    if as_json:
        emit_json(record)
        return
    for key in ("query_id", "collection", "created_at", "question", "answer", "abstained", "result_hash"):
        out.print(f"[bold]{key}[/]: {record[key]}")
    out.print(f"[bold]models[/]: {json.dumps(record['models'], sort_keys=True)}")
    out.print(f"[bold]plan[/]: {json.dumps(record['plan'], sort_keys=True)}")
    out.print(f"[bold]context[/]: {', '.join(str(c) for c in record['context_ids'])}")
