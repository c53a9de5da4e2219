"""`ragd` command line: each command parses, makes one library call, formats the result, maps errors."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .config import Settings, load_settings
from .errors import InvalidRequest, QueueFull, RagdError
from .ingest.extract import ExtractOptions
from .retrieve.filters import parse_filter_args
from .store import embedded
from .store.postgres import Store
from .types import ITEM_STATUSES

F = TypeVar("F", bound=Callable[..., Any])
out = Console(highlight=False, soft_wrap=True)
if not out.is_terminal:
    out = Console(highlight=False, soft_wrap=True, width=200)  # pipes and logs: no 80-column squeeze
err = Console(stderr=True, highlight=False)


def _json_default(value: Any) -> Any:
    if isinstance(value, (uuid.UUID, Path)):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def emit_json(payload: Any) -> None:
    click.echo(json.dumps(payload, default=_json_default, ensure_ascii=False, sort_keys=False))


class LineProgress:
    """Progress where no live bar can be drawn (--json, in the background, in CI): one line on stderr per stage
    every `interval` seconds, with items done, rate and time left, and a last line when a stage that took longer
    than that ends."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.started: dict[str, float] = {}
        self.last: dict[str, float] = {}

    def update(self, stage: str, done: int, total: int | None, note: str = "") -> None:
        now = time.monotonic()
        start = self.started.setdefault(stage, now)
        finished = total is not None and done >= total
        if now - self.last.get(stage, start) < self.interval and not (finished and now - start >= self.interval):
            return
        if finished and self.last.get(stage) == -1.0:
            return
        self.last[stage] = -1.0 if finished else now
        rate = done / (now - start) if now > start else 0.0
        left = f", {_duration((total - done) / rate)} left" if total and rate and not finished else ""
        click.echo(f"ragd: {stage} {done}/{total if total is not None else '?'} ({rate:.1f}/s{left}, "
                   f"{_duration(now - start)} so far){f'; {note}' if note else ''}", err=True)


def _duration(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m" if whole >= 3600 else (
        f"{whole // 60}m{whole % 60:02d}s" if whole >= 60 else f"{whole}s")


def print_table(columns: Sequence[str], rows: Iterable[Sequence[str]], title: str | None = None) -> None:
    table = Table(title=title)
    for name in columns:
        table.add_column(name)
    for row in rows:
        table.add_row(*row)
    out.print(table)


INTERNAL_EXIT = 1


def fail(code: str, message: str, exit_code: int) -> NoReturn:
    """Every error the CLI reports: one line on stderr, the documented exit code."""
    line = " ".join(str(message).split())
    click.echo(f"error ({code}): {line if len(line) <= 1000 else line[:995] + ' […]'}", err=True)
    sys.exit(exit_code)


def handle_errors(func: F) -> F:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except RagdError as exc:
            fail(exc.code, str(exc), exc.exit_code)
        except click.ClickException:
            raise
        except Exception as exc:  # a bug: still one line, the traceback only when asked for
            if os.environ.get("RAGD_DEBUG", "").strip().lower() in ("1", "true", "yes", "on"):
                raise
            fail("internal", f"{type(exc).__name__}: {exc} (set RAGD_DEBUG=1 for the traceback)", INTERNAL_EXIT)

    return wrapper  # type: ignore[return-value]


class Cli(click.Group):
    """The `ragd` group: bad usage (an unknown option, a value of the wrong type) is one line and exit 2, not
    click's usage block."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        # the pool's retries while the database is away are not the user's to read: the command's one line says it
        logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
        try:
            return super().main(*args, **kwargs)
        except click.exceptions.NoArgsIsHelpError as exc:
            click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
            sys.exit(0)
        except click.UsageError as exc:
            hint = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx else ""
            fail("bad_request", exc.format_message() + hint, 2)
        except click.ClickException as exc:
            fail("bad_request", exc.format_message(), exc.exit_code)
        except click.exceptions.Abort:
            fail("aborted", "interrupted", 130)


def settings_for(embedder: str | None = None) -> Settings:
    return load_settings(embedder=embedder) if embedder else load_settings()


def open_client(embedder: str | None = None, *, eval_mode: bool = False) -> Any:
    """A client closed when the command ends (for `ragd eval`: reranking with RAGD_EVAL_RERANK_TIMEOUT_S)."""
    from .engine import connect

    settings = settings_for(embedder)
    if eval_mode:
        settings = settings.model_copy(update={"rerank_timeout_s": settings.eval_rerank_timeout_s})
    client = connect(settings=settings)
    click.get_current_context().call_on_close(client.close)
    return client


def open_collection(collection: str | None, tenant: str | None, embedder: str | None, *, create: bool) -> Any:
    return open_client(embedder).collection(collection, tenant=tenant, create=create)


tenant_option = click.option("--tenant", envvar="RAGD_TENANT", help="Tenant id (default: RAGD_TENANT or 'default').")


def common(func: F) -> F:
    func = tenant_option(func)
    func = click.option("--collection", "-c", envvar="RAGD_COLLECTION",
                        help="Collection name (default: RAGD_COLLECTION or 'default').")(func)
    return func


@click.group(cls=Cli, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ragd")
def main() -> None:
    """ragd: deterministic retrieval-augmented generation on PostgreSQL + pgvector."""


# -- ingest --------------------------------------------------------------------------------------------


@main.command()
@click.argument("paths", nargs=-1, required=True)
@common
@click.option("--tags", "-t", multiple=True, help="Tags for every document (repeat or comma-separate).")
@click.option("--embedder", "-e", help="bge-small-en (default), hash[:DIMS] or openai:MODEL (or RAGD_EMBEDDER).")
@click.option("--id-field", help="JSON records: the id field (default: _id, id, doc_id).")
@click.option("--title-field", help="JSON records: the title field (default: title).")
@click.option("--text-field", multiple=True, help="JSON records: text field(s) (default: text, content, body).")
@click.option("--keep-duplicates", is_flag=True, help="Store documents whose content another document already has.")
@click.option("--near-duplicates", type=click.FloatRange(0.5, 1.0), default=None,
              help="Whole-document similarity at which a document is a near-duplicate (default 0.9; 1.0: off).")
@click.option("--follow-symlinks", is_flag=True,
              help="Follow links inside a folder that point outside it (default: skip them, each as an item).")
@click.option("--workers", type=click.IntRange(1, 256), default=None,
              help="Files extracted at once, each in its own process (default: RAGD_INGEST_WORKERS, else the cores "
                   "available). The result is the same for any number.")
@click.option("--queue", is_flag=True,
              help="Queue one job per file and return at once with the run id; `ragd worker` processes (and "
                   "`ragd serve`) store them. Waits while the tenant's queue is full.")
@click.option("--json", "as_json", is_flag=True, help="Print the run report as one JSON object.")
@handle_errors
def ingest(paths: Sequence[str], collection: str | None, tenant: str | None, tags: Sequence[str],
           embedder: str | None, id_field: str | None, title_field: str | None, text_field: Sequence[str],
           keep_duplicates: bool, near_duplicates: float | None, follow_symlinks: bool, workers: int | None,
           queue: bool, as_json: bool) -> None:
    """Ingest files and directories: PDF (scans through OCR), DOCX, PPTX, XLSX, CSV/TSV, HTML, images,
    Markdown, text and JSON/JSONL records."""
    col = open_collection(collection, tenant, embedder, create=True)
    tag_list = sorted({t.strip() for group in tags for t in group.split(",") if t.strip()})
    options = ExtractOptions(id_field=id_field, title_field=title_field, text_fields=tuple(text_field),
                             follow_symlinks=follow_symlinks)
    if queue:
        _enqueue(col, list(paths), tag_list, options, keep_duplicates, near_duplicates, as_json)
        return
    with _file_progress("ingest", col.settings.progress_interval_s, as_json) as on_progress:
        report = col.ingest(list(paths), tags=tag_list, options=options,
                            duplicates="keep" if keep_duplicates else "skip", near_duplicates=near_duplicates,
                            on_progress=on_progress, workers=workers)
    _report_run(report, col.name, as_json)


@contextlib.contextmanager
def _file_progress(stage: str, interval: float, as_json: bool) -> Iterator[Callable[[int, int, str], None]]:
    """A run's progress: a bar on a terminal, else a line every `interval` seconds (none with --json)."""
    live = err.is_terminal and not as_json
    lines = LineProgress(interval)
    with Progress(TextColumn(f"[bold]{stage}[/]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.description}"), console=err, transient=True, disable=not live) as progress:
        task = progress.add_task("", total=None)

        def on_progress(done: int, total: int, label: str) -> None:
            progress.update(task, completed=done, total=total, description=label[-40:])
            if not live:
                lines.update(stage, done, total, label if label.endswith(" records") else "")

        yield on_progress


def _report_run(report: Any, collection: str, as_json: bool) -> None:
    if as_json:
        emit_json(report.as_dict())
    else:
        _print_report(report, collection)
    if report.failed:
        fail("items_failed", f"{len(report.failed)} of {len(report.items)} items failed; the others are stored "
             f"(`ragd runs show {report.run_id}`)", 1)


@main.command()
@common
@click.option("--workers", type=click.IntRange(1, 256), default=None,
              help="Files extracted at once, each in its own process (default: as ingest).")
@click.option("--json", "as_json", is_flag=True, help="Print the run report as one JSON object.")
@handle_errors
def reindex(collection: str | None, tenant: str | None, workers: int | None, as_json: bool) -> None:
    """Read every document again from its kept original with today's extractors, as one run: unchanged ones
    stay as they are, changed ones get a new version (only new chunk texts are embedded), documents without a
    kept original are skipped."""
    col = open_collection(collection, tenant, None, create=False)
    with _file_progress("reindex", col.settings.progress_interval_s, as_json) as on_progress:
        report = col.reindex(on_progress=on_progress, workers=workers)
    _report_run(report, col.name, as_json)


@main.command()
@common
@click.option("--json", "as_json", is_flag=True, help="Print what was rewritten as one JSON object.")
@handle_errors
def compact(collection: str | None, tenant: str | None, as_json: bool) -> None:
    """Rewrite the collection's BM25 blocks that need it: postings of replaced or deleted documents dropped, each
    term's small blocks (one per ingest batch) merged into full ones. Search answers the same throughout."""
    col = open_collection(collection, tenant, None, create=False)
    done = col.compact()
    if as_json:
        emit_json(done)
    else:
        out.print(f"compacted {done['terms']} terms of {col.name}: {done['rows_before']} blocks -> "
                  f"{done['rows_after']}, {done['postings_dropped']} postings of retired chunks dropped"
                  + ("; their index, left sparse, rebuilt" if done["index_rebuilt"] else ""), markup=False)


def _enqueue(col: Any, paths: list[str], tags: list[str], options: ExtractOptions, keep_duplicates: bool,
             near_duplicates: float | None, as_json: bool) -> None:
    """Queue the files as one run; while the tenant's queue is full, wait as long as it says and try again."""
    from . import jobs

    while True:
        try:
            queued = jobs.enqueue(col, paths, tags=tags, options=options, near_duplicates=near_duplicates,
                                  duplicates="keep" if keep_duplicates else "skip")
            break
        except QueueFull as exc:
            err.print(f"queue full: {exc}; waiting {exc.retry_after_s}s", markup=False)
            time.sleep(exc.retry_after_s)
    if as_json:
        emit_json(queued.as_dict())
    else:
        out.print(f"queued run {queued.run_id}: {queued.files} files into {col.name}"
                  + (f" ({queued.failed} refused)" if queued.failed else "")
                  + f"; follow it with `ragd runs watch {queued.run_id}`", markup=False)


def _print_report(report: Any, collection: str) -> None:
    data = report.as_dict()
    table = Table(title=f"run {data['run_id']} into {collection}: {data['status']} in {data['seconds']:.1f}s")
    for name in (*ITEM_STATUSES, "chunks"):
        table.add_column(name, justify="right")
    counts = data["counts"]
    table.add_row(*(str(counts[n]) for n in ITEM_STATUSES), str(data["chunks"]))
    out.print(table)
    # every failed item, with its code; skipped and duplicate ones up to 50
    failed = [i for i in data["items"] if i["status"] == "failed"]
    notes = [i for i in data["items"] if i["status"] in ("skipped", "duplicate")]
    for item in failed + notes[:50]:
        code = f" [{item['error_code']}]" if item.get("error_code") else ""
        out.print(f"  {item['status']:<9} {item['external_id'] or item['source_uri']}{code}: {item['reason']}",
                  markup=False)
    if len(notes) > 50:
        out.print(f"  ... {len(notes) - 50} more skipped or duplicate; see `ragd runs show {data['run_id']}`")


# -- search --------------------------------------------------------------------------------------------


@main.command()
@click.argument("query")
@common
@click.option("--k", "-k", default=12, show_default=True, type=click.IntRange(1, 1000), help="Results to return.")
@click.option("--filter", "-f", "filters", multiple=True,
              help="tag=X (any), tags_all=a,b, doc=ID, id=EXTERNAL_ID, meta.KEY=VALUE, or one JSON object.")
@click.option("--fusion", type=click.Choice(["rrf", "weighted", "vector", "lexical"]), default="weighted",
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
        out.print_json(json.dumps(answer.debug, default=_json_default))


def _query_log(where: str) -> None:
    """Send the ragd.query log lines (one JSON object per answered query) where RAGD_QUERY_LOG says."""
    from .telemetry import json_lines

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


# -- eval ----------------------------------------------------------------------------------------------

QUALITY_EXIT = 5


@main.command("eval")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--plans", default=None,
              help="Comma-separated: lexical, vector, rrf, weighted, weighted:KEYWORD_WEIGHT; add +rerank to "
                   "rerank a plan (e.g. weighted,weighted+rerank). Default: lexical,vector,rrf,weighted, or none "
                   "with --answers.")
@common
@click.option("--embedder", "-e", help="Embedder for the corpus collection (default: RAGD_EMBEDDER).")
@click.option("--depth", default=100, show_default=True, type=click.IntRange(10, 1000),
              help="Results per query (pools grow to match).")
@click.option("--out", "out_dir", type=click.Path(path_type=Path),
              help="Folder for results.json/csv, per_query.csv, chart.png (and answers.json, answers_per_query.csv).")
@click.option("--max-queries", type=click.IntRange(1), help="Evaluate only the first N queries (file order).")
@click.option("--fail-under", multiple=True, metavar="PLAN:METRIC=VALUE",
              help="Exit 5 when a plan scores below the value, e.g. lexical:ndcg@10=0.67; answers:abstain_f1=0.8 "
                   "gates the held-out answer figures (repeatable).")
@click.option("--fail-over", multiple=True, metavar="PLAN:METRIC=VALUE",
              help="Exit 5 when a figure where lower is better is above the value, e.g. "
                   "answers:wrong_document_answers=0.2 (repeatable).")
@click.option("--answers", is_flag=True,
              help="Also evaluate answers: calibrate abstention on a scope split, then ask every question.")
@click.option("--calibrate/--no-calibrate", default=True, show_default=True,
              help="With --answers: choose the abstain thresholds on the calibration half (else the configured).")
@click.option("--min-answered", default=0.9, show_default=True, type=click.FloatRange(0, 1),
              help="With --answers: the share of answerable in-scope questions the thresholds must keep answered.")
@click.option("--documents", "documents", type=click.Path(path_type=Path, file_okay=False),
              help="For a filings set (FinanceBench's JSONL): the folder of its <doc_name>.pdf (default: pdfs/ "
                   "beside the file).")
@click.option("--json", "as_json", is_flag=True, help='Print {"plans": {...}} as one JSON object.')
@click.option("--save", is_flag=True,
              help="Keep the figures in the store (per plan; answers' held-out figures as plan 'answers'), to be "
                   "compared over time on the web page and at GET /v1/evals.")
@handle_errors
def eval_command(path: Path, plans: str | None, collection: str | None, tenant: str | None, embedder: str | None,
                 depth: int, out_dir: Path | None, max_queries: int | None, fail_under: Sequence[str],
                 fail_over: Sequence[str], answers: bool,
                 calibrate: bool, min_answered: float, documents: Path | None, as_json: bool, save: bool) -> None:
    """Measure retrieval quality, several plans side by side, on a BEIR directory, a SQuAD JSON file or a
    ragd questions JSONL file (against --collection); with --answers, answer quality and calibrated abstention.
    A filings set (FinanceBench's JSONL, its PDFs in --documents) is ingested under neutral names and measured
    for the right filing, the evidence page and the answers (gates name plan `filings`)."""
    from .eval import report as eval_report
    from .eval.answers import evaluate_answers
    from .eval.datasets import load
    from .eval.filings import is_filings
    from .eval.runner import evaluate

    gates = [(*_parse_gate(g), "under") for g in fail_under] + [(*_parse_gate(g, "--fail-over"), "over")
                                                                for g in fail_over]
    if is_filings(path):
        _eval_filings(path, documents, collection, tenant, embedder, out_dir, max_queries, gates, as_json, save)
        return
    plans = plans if plans is not None else ("" if answers else "lexical,vector,rrf,weighted")
    names = [p.strip() for p in plans.split(",") if p.strip()]
    if not names and not answers:
        raise InvalidRequest(f"--plans {plans!r} names no plan; e.g. --plans lexical,vector,rrf,weighted")
    full = load(path)
    client = open_client(embedder, eval_mode=True)
    live = err.is_terminal and not as_json
    lines = LineProgress(client.settings.progress_interval_s)
    with Progress(TextColumn("[bold]{task.fields[stage]}[/]"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=True, disable=not live) as progress:
        task = progress.add_task("", total=None, stage="eval")

        def on_progress(stage: str, done: int, total: int, note: str = "") -> None:
            progress.update(task, completed=done, total=total, stage=f"{stage} {note}".strip())
            if not live:
                lines.update(stage, done, total, note)

        result = evaluate(client, full.head(max_queries), names, collection=collection, tenant=tenant,
                          depth=depth, on_progress=on_progress) if names else None
        answered = evaluate_answers(client, full, collection=collection if not names else None, tenant=tenant,
                                    calibrate=calibrate, min_answered=min_answered, max_queries=max_queries,
                                    on_progress=on_progress) if answers else None
    folder = out_dir or client.settings.home / "eval" / full.name
    outputs = eval_report.write(result, folder) if result else {}
    if answered:
        outputs.update(eval_report.write_answers(answered, folder))
    payload = {**(result.as_dict() if result else {"dataset": full.name}), "outputs": outputs}
    if answered:
        payload["answers"] = answered.as_dict()
    if save:
        payload["eval_id"] = str(_save_evaluation(client, full.name, tenant, result, answered, max_queries, depth))
    if as_json:
        emit_json(payload)
    else:
        if result:
            _print_eval(result, outputs)
        if answered:
            _print_answers(answered, full.name)
        out.print("written: " + ", ".join(outputs.values()))
        if save:
            out.print(f"kept as evaluation {payload['eval_id']} (GET /v1/evals)")
    if answered and answered.failed:
        first = next(iter(answered.failed.values()))
        err.print(f"[yellow]warning:[/] {len(answered.failed)} questions failed and are not scored (first: "
                  f"{first})", markup=True)
    def value_of(plan: str, metric: str) -> Any:
        if plan == "answers":
            if answered is None:
                raise InvalidRequest("a gate on answers:… needs --answers")
            return answered.parts["held_out"].get(metric)
        if result is None or plan not in result.plans:
            raise InvalidRequest(f"a gate names plan {plan!r}, which was not run (--plans {plans})")
        return result.plans[plan].metrics.get(metric)

    _check_gates(gates, value_of)


def _check_gates(gates: Sequence[tuple[str, str, float, str]], value_of: Callable[[str, str], Any]) -> None:
    """Exit QUALITY_EXIT naming every gate a figure fails (`value_of(plan, metric)` reads a figure)."""
    failures = []
    for plan, metric, bound, direction in gates:
        value = value_of(plan, metric)
        if not isinstance(value, float | int):
            raise InvalidRequest(f"a gate names unknown metric {metric!r}")
        if value < bound if direction == "under" else value > bound:
            failures.append(f"{plan} {metric} = {value:.4f} {'<' if direction == 'under' else '>'} {bound}")
    if failures:
        click.echo("quality gate failed: " + "; ".join(failures), err=True)
        sys.exit(QUALITY_EXIT)


def _eval_filings(path: Path, documents: Path | None, collection: str | None, tenant: str | None,
                  embedder: str | None, out_dir: Path | None, max_queries: int | None,
                  gates: Sequence[tuple[str, str, float, str]], as_json: bool, save: bool) -> None:
    from .eval.filings import evaluate_filings, load_filings, write_filings

    filings = load_filings(path, documents)
    client = open_client(embedder, eval_mode=True)
    lines = LineProgress(client.settings.progress_interval_s)
    report = evaluate_filings(client, filings, collection=collection, tenant=tenant, max_queries=max_queries,
                              on_progress=lambda stage, done, total, note="": lines.update(stage, done, total,
                                                                                          note))
    outputs = write_filings(report, out_dir or client.settings.home / "eval" / filings.name)
    payload = {"dataset": filings.name, **report.as_dict(), "outputs": outputs}
    if save:
        payload["eval_id"] = str(client.save_evaluation(
            collection=report.collection, dataset=filings.name, tenant=tenant, kind="answers",
            metrics={"filings": report.figures}, config={"max_queries": max_queries}))
    if as_json:
        emit_json(payload)
    else:
        table = Table(title=f"{filings.name}: {report.figures['questions']} questions over {report.documents} "
                            f"documents ({report.pages} pages, ingested in {report.ingest_seconds:.0f} s)")
        table.add_column("figure")
        table.add_column("value", justify="right")
        for name, value in report.figures.items():
            if isinstance(value, dict):
                for stage, ms in value.items():
                    table.add_row(f"{name.removesuffix('_ms')} {stage} (ms)", f"{ms:.1f}")
            else:
                table.add_row(name, f"{value:.3f}" if isinstance(value, float) else str(value))
        out.print(table)
        out.print("written: " + ", ".join(outputs.values()))
    if report.failed:
        err.print(f"[yellow]warning:[/] {len(report.failed)} questions failed and are not scored (first: "
                  f"{next(iter(report.failed.values()))})", markup=True)

    def value_of(plan: str, metric: str) -> Any:
        if plan != "filings":
            raise InvalidRequest(f"a gate names plan {plan!r}; a filings set's figures are plan 'filings'")
        return report.figures.get(metric)

    _check_gates(gates, value_of)


def _save_evaluation(client: Any, dataset: str, tenant: str | None, result: Any, answered: Any,
                     max_queries: int | None, depth: int) -> Any:
    """Keep an evaluation's figures: each plan's metrics and latency, and the answers' held-out figures."""
    metrics: dict[str, dict[str, Any]] = {}
    if result:
        for name, plan in result.plans.items():
            metrics[name] = {**plan.metrics, **{f"latency_{k}_ms": v for k, v in plan.latency_ms.items()}}
    if answered:
        metrics["answers"] = dict(answered.parts.get("held_out", {}))
    collection = result.collection if result else answered.collection
    return client.save_evaluation(collection=collection, dataset=dataset, tenant=tenant,
                                  kind="retrieval" if result else "answers", metrics=metrics,
                                  config={"max_queries": max_queries, "depth": depth,
                                          "embed_model": result.embed_model if result else None})


def _parse_gate(text: str, option: str = "--fail-under") -> tuple[str, str, float]:
    plan, _, rest = text.partition(":")
    metric, _, value = rest.partition("=")
    try:
        return plan, metric, float(value)
    except ValueError as exc:
        raise InvalidRequest(f"{option} {text!r}: expected PLAN:METRIC=VALUE, e.g. lexical:ndcg@10=0.67") from exc


def _print_eval(result: Any, outputs: dict[str, str]) -> None:
    from .eval.metrics import METRICS

    title = (f"{result.dataset}: {result.queries} queries, collection {result.collection} ({result.embed_model}), "
             f"depth {result.depth}")
    table = Table(title=title)
    table.add_column("plan")
    for m in METRICS:
        table.add_column(m, justify="right")
    table.add_column("p50 ms", justify="right")
    table.add_column("p95 ms", justify="right")
    for name, plan in result.plans.items():
        table.add_row(f"{name} (default)" if name == result.default_plan else name,
                      *(f"{plan.metrics[m]:.4f}" for m in METRICS),
                      f"{plan.latency_ms['p50']:.1f}", f"{plan.latency_ms['p95']:.1f}")
    out.print(table)
    stages = Table(title="latency per stage (p50 / p95 ms)")
    stages.add_column("plan")
    all_stages = sorted({s for p in result.plans.values() for s in p.stages_ms})
    for s in all_stages:
        stages.add_column(s, justify="right")
    for name, plan in result.plans.items():
        stages.add_row(name, *(f"{plan.stages_ms[s]['p50']:.1f} / {plan.stages_ms[s]['p95']:.1f}"
                               if s in plan.stages_ms else "-" for s in all_stages))
    out.print(stages)
    for name, plan in result.plans.items():  # a plan's figures are what its name says only when both are 0
        if plan.rerank_skipped:
            out.print(f"WARNING: {name}: the reranker failed open on {plan.rerank_skipped} of {result.queries} "
                      "queries (the fused order stood in); see RAGD_EVAL_RERANK_TIMEOUT_S", markup=False)
        for qid, error in sorted(plan.failed_queries.items())[:5]:
            out.print(f"WARNING: {name}: query {qid} failed and counts as a miss: {error}", markup=False)
        if len(plan.failed_queries) > 5:
            out.print(f"WARNING: {name}: {len(plan.failed_queries) - 5} more queries failed", markup=False)
    if result.ingest:
        counts = {k: v for k, v in result.ingest.items() if k != "failed_items"}
        out.print(f"corpus: {json.dumps(counts)}")
        for item in result.ingest.get("failed_items", []):
            out.print(f"  failed {item['item']} [{item['code']}]: {item['reason']}", markup=False)
        if result.ingest.get("judged_missing"):
            out.print(f"warning: {result.ingest['judged_missing']} of {result.ingest['judged_documents']} judged "
                      "documents are not in the collection: no plan can find them")
    if result.default_plan:
        out.print("(default): the plan `ragd search` uses unless told otherwise")


ANSWER_COLUMNS = ("questions", "abstain_precision", "abstain_recall", "abstain_f1", "answered",
                  "adversarial_abstained", "answer_recall", "token_f1", "citation_precision", "citation_recall",
                  "wrong_document_answers", "at_most_3_pieces")


def _print_answers(report: Any, dataset: str) -> None:
    split, th = report.split, report.thresholds
    out.print(f"[bold]answers[/] on {dataset}: collection {report.collection} holds {split['documents']} documents "
              f"of {split['groups_in_scope']} groups; asked {split['asked']} questions ({split['in_scope']} in "
              f"scope, {split['out_of_scope']} out of scope, {split['adversarial']} adversarial unanswerable)")
    how = (f"calibrated on {th.get('questions', 0)} questions of the calibration half" if th.get("calibrated")
           else "as configured")
    out.print(f"abstain thresholds ({how}): rerank {th['rerank']}, rrf {th['rrf']}")
    table = Table(title="answers (abstain figures: abstaining is the positive class; answered: in-scope answerable)")
    table.add_column("part")
    for column in ANSWER_COLUMNS:
        table.add_column(column.replace("_", " "), justify="right")
    table.add_column("p50 / p95 ms", justify="right")
    for part, values in report.parts.items():
        cells = [str(values[c]) if isinstance(values[c], int) else "-" if values[c] is None else f"{values[c]:.3f}"
                 for c in ANSWER_COLUMNS]
        table.add_row(part, *cells, f"{values['latency_ms']['p50']:.0f} / {values['latency_ms']['p95']:.0f}")
    out.print(table)
    stages = report.parts["held_out"]["stages_ms"]
    out.print("held-out stages p50/p95 ms: " + ", ".join(f"{s} {v['p50']:.0f}/{v['p95']:.0f}"
                                                         for s, v in stages.items()))
    for part, values in report.parts.items():
        if values.get("arithmetic_answered"):
            out.print(f"{part} arithmetic questions answered: {values['arithmetic_answered']}, with a computation "
                      f"{values['arithmetic_computed']:.3f}, exact {values['arithmetic_exact']:.3f}, by quotes alone "
                      f"{values['arithmetic_quotes_only']:.3f}")



# -- conformance ---------------------------------------------------------------------------------------


@main.command()
@click.option("--embedder", "-e", "embedders", multiple=True, type=click.Choice(["hash", "bge-small-en"]),
              help="Check only this embedder's golden data (repeatable; default: both).")
@click.option("--pin", type=click.Path(path_type=Path), hidden=True,
              help="Write the golden file from this installation (when the spec version changes).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@handle_errors
def conformance(embedders: Sequence[str], pin: Path | None, as_json: bool) -> None:
    """Check this installation against the golden data of the spec version: chunk ids and hashes of a fixed
    corpus, probe vectors, and each plan's top results for fixed queries (tenant 'conformance')."""
    from . import conformance as suite

    client = open_client()
    if pin is not None:
        suite.pin(client, pin)
        out.print(f"pinned: {pin}")
        return
    report = suite.run(client, tuple(embedders) or suite.EMBEDDERS)
    if as_json:
        emit_json(report.as_dict())
    else:
        print_table(("check", "result", "detail"),
                    ((c.name, "pass" if c.passed else "FAIL", c.detail) for c in report.checks),
                    title=f"conformance with spec v{report.spec_version}: {'pass' if report.passed else 'FAIL'}")
    if not report.passed:
        failed = sum(1 for c in report.checks if not c.passed)
        fail("conformance_failed", f"{failed} of {len(report.checks)} checks failed", QUALITY_EXIT)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the results as one JSON object.")
@handle_errors
def redteam(as_json: bool) -> None:
    """Prompt-injection, exfiltration, tenant-leak, planted-citation and stale-version probes against `ask`, and
    the REST API reached with one tenant's key for another's objects (tenants 'redteam' and 'redteam-other'); a
    pass/fail table, exit 5 when a probe fails."""
    from . import redteam as probes

    client = open_client()
    results = probes.run(client) + probes.api_probes(client)
    if as_json:
        emit_json({"passed": all(r.passed for r in results), "probes": probes.as_dicts(results)})
    else:
        print_table(("probe", "result", "expectation", "answer"),
                    ((r.name, "pass" if r.passed else "FAIL", r.expectation, r.answer) for r in results),
                    title=f"red team: {sum(r.passed for r in results)} of {len(results)} probes pass")
    failed = [r.name for r in results if not r.passed]
    if failed:
        fail("redteam_failed", f"{len(failed)} probes failed: {', '.join(failed)}", QUALITY_EXIT)


# -- documents -----------------------------------------------------------------------------------------


@main.group()
def documents() -> None:
    """List, show and delete documents."""


@documents.command("list")
@common
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 100000))
@click.option("--offset", default=0, type=click.IntRange(0))
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def documents_list(collection: str | None, tenant: str | None, limit: int, offset: int, as_json: bool) -> None:
    """Documents of a collection with their active version."""
    docs = open_collection(collection, tenant, None, create=False).documents(limit=limit, offset=offset)
    if as_json:
        emit_json({"documents": docs})
        return
    print_table(("external_id", "title", "type", "version", "chunks", "tags"),
                ((d["external_id"], d["title"] or "", d["source_type"], d["version_label"] or "-",
                  str(d["chunk_count"] or 0), ",".join(d["tags"])) for d in docs))


@documents.command("show")
@click.argument("ref")
@common
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def documents_show(ref: str, collection: str | None, tenant: str | None, as_json: bool) -> None:
    """A document (by external id or doc id) and its versions."""
    doc = open_collection(collection, tenant, None, create=False).document(ref)
    if as_json:
        emit_json(doc)
        return
    for key in ("doc_id", "external_id", "title", "source_uri", "source_type", "tags", "metadata", "updated_at"):
        out.print(f"[bold]{key}[/]: {doc[key]}")
    for v in doc["versions"]:
        mark = "active" if v["is_active"] else "inactive"
        out.print(f"  {v['version_label']} {mark} {v['chunk_count']} chunks {v['content_hash'][:12]} {v['created_at']}")


@documents.command("delete")
@click.argument("ref")
@common
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def documents_delete(ref: str, collection: str | None, tenant: str | None, as_json: bool) -> None:
    """Delete a document and all its versions; it leaves search results at once."""
    doc_id = open_collection(collection, tenant, None, create=False).delete(ref)
    if as_json:
        emit_json({"deleted": str(doc_id)})
    else:
        out.print(f"deleted {ref} ({doc_id})")


# -- runs and collections ------------------------------------------------------------------------------


@main.group()
def runs() -> None:
    """Ingestion runs and their items."""


@runs.command("list")
@common
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 10000))
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def runs_list(collection: str | None, tenant: str | None, limit: int, as_json: bool) -> None:
    """Recent runs of the collection, newest first."""
    items = open_collection(collection, tenant, None, create=False).runs(limit=limit)
    if as_json:
        emit_json({"runs": items})
        return
    print_table(("run_id", "collection", "status", "started", "items", "chunks", "failed"), map(_run_row, items))


def _run_row(run: dict[str, Any]) -> tuple[str, ...]:
    stats = run["stats"] or {}
    return (str(run["run_id"]), run["collection"], run["status"], run["started_at"].strftime("%Y-%m-%d %H:%M:%S"),
            str(stats.get("items", "")), str(stats.get("chunks", "")),
            str((stats.get("counts") or {}).get("failed", 0)))


@runs.command("show")
@click.argument("run_id")
@tenant_option
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def runs_show(run_id: str, tenant: str | None, as_json: bool) -> None:
    """One run (id or unique prefix, in any collection of the tenant) with every item and its outcome."""
    run = open_client().run(run_id, tenant=tenant)
    if as_json:
        emit_json(run)
        return
    out.print(f"[bold]{run['run_id']}[/] {run['status']} (stage {run['stage']}) into {run['collection']}")
    out.print(f"started {run['started_at']}  finished {run['finished_at']}  stats {json.dumps(run['stats'])}")
    if "files" in run["progress"]:
        out.print(_progress_line(run), markup=False)
    if run["error"]:
        out.print(f"error: {run['error']}")
    print_table(("#", "status", "item", "chunks", "extract s", "store s", "reason"),
                ((str(i["item_index"]), i["status"], i["external_id"] or i["source_uri"], str(i["chunk_count"]),
                  _seconds(i["extract_seconds"]), _seconds(i["store_seconds"]), i["reason"] or "")
                 for i in run["items"]))
    slowest = slowest_items(run["items"])
    if slowest:
        print_table(("#", "item", "seconds", "extract s", "store s"),
                    ((str(i["item_index"]), i["external_id"] or i["source_uri"], _seconds(seconds),
                      _seconds(i["extract_seconds"]), _seconds(i["store_seconds"])) for seconds, i in slowest),
                    title=f"slowest {len(slowest)} of {len(run['items'])} items")


def _progress_line(run: dict[str, Any]) -> str:
    p = run["progress"]
    files = p["files"]
    eta = "" if p.get("eta_s") in (None, 0.0) else f", about {p['eta_s']:.0f}s left"
    return (f"files {files['done']}/{files['total']} done ({files['running']} running, {files['queued']} queued, "
            f"{files['cancelled']} cancelled), {p['files_per_s']:.2f} files/s{eta}; items "
            + (", ".join(f"{k} {v}" for k, v in p["items"].items()) or "none yet"))


@runs.command("watch")
@click.argument("run_id")
@tenant_option
@click.option("--timeout", "timeout_s", default=86400.0, type=click.FloatRange(0),
              help="Give up after this many seconds.")
@handle_errors
def runs_watch(run_id: str, tenant: str | None, timeout_s: float) -> None:
    """Follow a run until it ends: a progress bar of its files, each item's outcome as it lands. Exit 1 when
    items failed, 0 otherwise."""
    from . import jobs

    client = open_client()
    live = err.is_terminal
    seen: set[int] = set()
    lines = LineProgress(client.settings.progress_interval_s)
    with Progress(TextColumn("[bold]run[/]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.description}"), console=err, transient=True, disable=not live) as bar:
        task = bar.add_task("", total=None)

        def show(run: dict[str, Any]) -> None:
            for item in run["items"]:
                if item["item_index"] not in seen:
                    seen.add(item["item_index"])
                    code = f" [{item['error_code']}]" if item["error_code"] else ""
                    out.print(f"{item['status']:<9} {item['external_id'] or item['source_uri']}{code}"
                              + (f": {item['reason']}" if item["status"] == "failed" else ""), markup=False)
            files = run["progress"].get("files")
            if files:
                done = files["done"] + files["cancelled"]
                bar.update(task, completed=done, total=files["total"], description=run["status"])
                if not live:
                    lines.update("run", done, files["total"], run["status"])

        run = jobs.wait_for(client, run_id, tenant=tenant, timeout_s=timeout_s, every=show)
    out.print(f"run {run['run_id']} {run['status']}: " + _progress_line(run) if "files" in run["progress"]
              else f"run {run['run_id']} {run['status']}", markup=False)
    failed = run["progress"]["items"].get("failed", 0)
    if run["status"] in ("queued", "running"):
        fail("timeout", f"run {run['run_id']} still {run['status']} after {timeout_s:g}s", 1)
    if failed:
        fail("items_failed", f"{failed} items failed; the others are stored (`ragd runs show {run['run_id']}`)", 1)


@runs.command("cancel")
@click.argument("run_id")
@tenant_option
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def runs_cancel(run_id: str, tenant: str | None, as_json: bool) -> None:
    """Cancel a queued run: its queued files are dropped; files being stored finish; stored items stay."""
    from . import jobs

    result = jobs.cancel(open_client(), run_id, tenant=tenant)
    if as_json:
        emit_json(result)
    else:
        out.print(f"run {result['run_id']} {result['status']}: {result['dropped']} queued files dropped")


SLOWEST = 5


def slowest_items(items: list[dict[str, Any]], n: int = SLOWEST) -> list[tuple[float, dict[str, Any]]]:
    """The n items that took longest (extraction and storing), slowest first; items of runs recorded before
    items had timings are left out."""
    timed = [((i["extract_seconds"] or 0.0) + (i["store_seconds"] or 0.0), i) for i in items
             if i["extract_seconds"] is not None]
    return sorted(timed, key=lambda t: (-t[0], t[1]["item_index"]))[:n]


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


@main.group()
def collections() -> None:
    """Collections of a tenant."""


@collections.command("list")
@click.option("--tenant", envvar="RAGD_TENANT")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def collections_list(tenant: str | None, as_json: bool) -> None:
    """Collections with their pinned model, dimensions and sizes."""
    from .engine import connect

    client = connect()
    click.get_current_context().call_on_close(client.close)
    items = client.collections(tenant)
    if as_json:
        emit_json({"collections": items})
        return
    print_table(("name", "model", "dims", "index (type, ef_construction)", "documents", "chunks", "created"),
                ((c["name"], c["embed_model"], str(c["embed_dims"]),
                  f"{c['vector_type']} ef {c['hnsw_ef_construction']}", str(c["documents"]), str(c["chunks"]),
                  c["created_at"].strftime("%Y-%m-%d %H:%M:%S")) for c in items))


# -- API keys and the server --------------------------------------------------------------------------


@main.group("keys")
def keys_group() -> None:
    """API keys per tenant for `ragd serve` (stored hashed; a key is shown once)."""


def _store() -> Store:
    store = Store.open(load_settings())
    click.get_current_context().call_on_close(store.close)
    return store


@keys_group.command("create")
@click.option("--tenant", envvar="RAGD_TENANT", required=True, help="The tenant the key acts for.")
@click.option("--name", default="", help="A label to tell keys apart.")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def keys_create(tenant: str, name: str, as_json: bool) -> None:
    """Make a key for a tenant and print it once (it is stored only as its hash)."""
    from . import keys

    record, key = keys.create(_store(), tenant, name)
    if as_json:
        emit_json({**record, "key": key})
        return
    out.print(f"key {record['key_id']} for tenant {tenant!r}; shown once, keep it secret:")
    click.echo(key)


@keys_group.command("list")
@click.option("--tenant", help="Only this tenant's keys.")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def keys_list(tenant: str | None, as_json: bool) -> None:
    """Keys with their tenant, name, prefix, creation, last use and revocation (never the key)."""
    from . import keys

    items = keys.list_keys(_store(), tenant)
    if as_json:
        emit_json({"keys": items})
        return
    print_table(("key id", "prefix", "tenant", "name", "created", "last used", "revoked"),
                ((str(k["key_id"]), k["prefix"], k["tenant_id"], k["name"], _when(k["created_at"]),
                  _when(k["last_used_at"]), _when(k["revoked_at"])) for k in items))


def _when(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else ""


@keys_group.command("revoke")
@click.argument("key_id")
@handle_errors
def keys_revoke(key_id: str) -> None:
    """Revoke a key by its id or prefix; requests with it get 401 from then on."""
    from . import keys

    tenant = keys.revoke(_store(), key_id)
    out.print(f"revoked {key_id} (tenant {tenant!r})")


LOOPBACK = ("127.0.0.1", "::1", "localhost")


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (loopback unless told).")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64), help="Worker processes.")
@click.option("--migrate/--no-migrate", default=True, show_default=True,
              help="Apply pending migrations at startup; with --no-migrate, refuse to start on an outdated schema "
                   "(run `ragd migrate` as a one-shot step first).")
@click.option("--wait", default=60.0, show_default=True, type=click.FloatRange(0, 3600),
              help="Seconds to keep retrying an unreachable database at startup (with backoff).")
@click.option("--jobs/--no-jobs", "serve_jobs", default=None,
              help="Also run queued ingestion jobs in this server (default: on with the embedded server, else off "
                   "(RAGD_SERVE_JOBS); run `ragd worker` processes for more).")
@click.option("--open", "allow_open", is_flag=True,
              help="Serve without keys although every key was revoked (or RAGD_ALLOW_OPEN=1).")
@handle_errors
def serve(host: str, port: int, workers: int, migrate: bool, wait: float, serve_jobs: bool | None,
          allow_open: bool) -> None:
    """Serve the REST API (OpenAPI at /openapi.json) and MCP over HTTP at /mcp."""
    from . import keys
    from .errors import DatabaseUnavailable, MigrationError
    from .store.postgres import latest_migration

    if serve_jobs is not None:
        os.environ["RAGD_SERVE_JOBS"] = "on" if serve_jobs else "off"
    if allow_open:
        os.environ["RAGD_ALLOW_OPEN"] = "1"  # the worker processes read their settings from the environment
    settings = load_settings()
    deadline, delay = time.monotonic() + wait, 0.5
    while True:  # the database may still be starting (a compose stack, a restarted server)
        try:
            store = Store.open(settings, migrate=migrate)  # migrations once, before any worker starts
            break
        except DatabaseUnavailable as exc:
            if time.monotonic() + delay > deadline:
                raise
            click.echo(f"waiting for the database ({' '.join(str(exc).split())[:160]}); retry in {delay:.1f} s",
                       err=True)
            time.sleep(delay)
            delay = min(delay * 2, 10.0)
    try:
        latest = latest_migration()
        if store.schema_version() < latest:
            raise MigrationError(f"the schema is at version {store.schema_version()}, this ragd needs {latest}: "
                                 "run `ragd migrate` first (or start without --no-migrate)")
        active, ever = keys.counts(store)
    finally:
        store.close()
    if not active and ever and not settings.allow_open:
        raise InvalidRequest(f"every API key of this database was revoked ({ever}), so the server would be open and "
                             "serve every tenant's data without a key: create a key (`ragd keys create --tenant T`), "
                             "or start with --open (RAGD_ALLOW_OPEN=1) to serve without keys on loopback")
    if not active:
        if host not in LOOPBACK:
            raise InvalidRequest(f"no API keys exist, so the server would be open: it binds to loopback only, "
                                 f"not {host}. Create a key first: ragd keys create --tenant T")
        click.echo("WARNING: no API keys exist: the server is open to anyone on this machine and serves tenant "
                   f"{settings.tenant!r}. Create a key with `ragd keys create --tenant T` to require keys.",
                   err=True)
    if workers > 1 and not os.environ.get("RAGD_ONNX_THREADS"):
        # each worker runs its own models: one core's worth of threads each, not every worker on every core
        os.environ["RAGD_ONNX_THREADS"] = str(max(1, len(os.sched_getaffinity(0)) // workers))
    from .server import run_server

    run_server(host, port, workers)


@main.command("worker")
@click.option("--concurrency", default=1, show_default=True, type=click.IntRange(1, 64),
              help="Jobs (files) this process stores at once.")
@click.option("--until-empty", is_flag=True, help="Stop once the queue is empty (default: wait for more).")
@handle_errors
def worker_command(concurrency: int, until_empty: bool) -> None:
    """Store queued files (`ragd ingest --queue`, uploads with ?wait=false): run any number of these, on any
    machine pointed at the same database. Ctrl-C (SIGINT/SIGTERM) stops taking jobs and finishes those running;
    a worker killed outright has its jobs retried by the others."""
    import asyncio

    from . import jobs

    client = open_client()
    err.print(f"ragd worker {os.getpid()}: {concurrency} at a time; Ctrl-C to stop", markup=False)
    try:
        asyncio.run(jobs.Jobs(client).run(concurrency=concurrency, until_empty=until_empty))
    finally:
        client.close()


@main.command("mcp")
@handle_errors
def mcp_command() -> None:
    """Serve ragd's MCP tools (search, ask, ingest, list_documents, get_document) over stdio, as RAGD_TENANT."""
    from .mcpserver import run_stdio

    run_stdio()


# -- database ------------------------------------------------------------------------------------------


@main.group()
def db() -> None:
    """The embedded PostgreSQL server under RAGD_HOME."""


@db.command("start")
@handle_errors
def db_start() -> None:
    """Start the embedded server (it keeps running until `ragd db stop`)."""
    settings = load_settings()
    url = embedded.start(settings.pgdata)
    out.print(f"running: {url}")
    memory = embedded.shared_memory_at(url)
    hint = memory.hint() if memory else None
    if hint:
        out.print(hint)


@db.command("stop")
@handle_errors
def db_stop() -> None:
    """Stop the embedded server."""
    stopped = embedded.stop(load_settings().pgdata)
    out.print("stopped" if stopped else "not running")


@db.command("status")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def db_status(as_json: bool) -> None:
    """Whether the embedded server runs (exit 0) or not (exit 1)."""
    settings = load_settings()
    st = embedded.status(settings.pgdata)
    memory = embedded.shared_memory_at(st.url) if st.url else None
    if as_json:
        emit_json({"running": st.running, "pgdata": st.pgdata, "pid": st.pid, "external": bool(settings.database_url),
                   **({"shared_buffers_mb": memory.buffers_mb, "huge_pages": memory.huge_pages,
                       "huge_pages_needed": memory.huge_pages_needed} if memory else {})})
    elif settings.database_url:
        out.print("RAGD_DATABASE_URL is set: ragd uses that server, not the embedded one")
    else:
        out.print(f"{'running' if st.running else 'stopped'}: {st.pgdata}" + (f" (pid {st.pid})" if st.pid else ""))
        if memory:
            out.print(f"shared buffers {memory.buffers_mb} MB, huge pages {memory.huge_pages}")
            hint = memory.hint()
            if hint:
                out.print(hint)
    if not st.running:
        sys.exit(1)


@db.command("url")
@handle_errors
def db_url() -> None:
    """Print the database URL ragd uses (starts the embedded server if needed)."""
    settings = load_settings()
    click.echo(settings.database_url or embedded.start(settings.pgdata))


@main.command()
@handle_errors
def migrate() -> None:
    """Apply pending schema migrations."""
    store = Store.open(load_settings(), migrate=False)
    try:
        applied = store.migrate()
        note = f" (applied {applied})" if applied else " (up to date)"
        out.print(f"schema version {store.schema_version()}{note}")
    finally:
        store.close()


if __name__ == "__main__":
    main()
