"""What every command shares: the `ragd` group, one-line errors with their exit codes, the consoles, JSON
output, tables, progress lines, and opening the library for a command."""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
from rich.console import Console
from rich.table import Table

from ..config import Settings, load_settings
from ..errors import RagdError

F = TypeVar("F", bound=Callable[..., Any])
out = Console(highlight=False, soft_wrap=True)
if not out.is_terminal:
    out = Console(highlight=False, soft_wrap=True, width=200)  # pipes and logs: no 80-column squeeze
err = Console(stderr=True, highlight=False)


def json_default(value: Any) -> Any:
    if isinstance(value, (uuid.UUID, Path)):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def emit_json(payload: Any) -> None:
    click.echo(json.dumps(payload, default=json_default, ensure_ascii=False, sort_keys=False))


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
    from ..engine import connect

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
