"""`ragd runs list|show|watch|cancel` and `ragd collections list`."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .base import (
    LineProgress,
    common,
    emit_json,
    err,
    fail,
    handle_errors,
    main,
    open_client,
    open_collection,
    out,
    print_table,
    tenant_option,
)

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
    from .. import jobs

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
    from .. import jobs

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
    from ..engine import connect

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
