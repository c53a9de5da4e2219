"""`ragd serve` (REST, MCP over HTTP, the web page), `ragd worker` (queued jobs) and `ragd mcp` (stdio)."""

from __future__ import annotations

import os
import time

import click

from ..config import load_settings
from ..errors import InvalidRequest
from ..store.postgres import Store
from .base import err, handle_errors, main, open_client

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
    from .. import keys
    from ..errors import DatabaseUnavailable, MigrationError
    from ..store.schema import latest_migration

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
    from ..server import run_server

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

    from .. import jobs

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
    from ..mcpserver import run_stdio

    run_stdio()
