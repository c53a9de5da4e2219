"""`ragd ingest`, `ragd reindex` and `ragd compact`: documents in, now or queued as jobs."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..errors import QueueFull
from ..ingest.extract import ExtractOptions
from ..types import ITEM_STATUSES
from .base import LineProgress, common, emit_json, err, fail, handle_errors, main, open_collection, out


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
    from .. import jobs

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
