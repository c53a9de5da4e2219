"""`ragd db start|stop|status|url` (the embedded PostgreSQL) and `ragd migrate`."""

from __future__ import annotations

import sys

import click

from ..config import load_settings
from ..store import embedded
from ..store.postgres import Store
from .base import emit_json, handle_errors, main, out


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
