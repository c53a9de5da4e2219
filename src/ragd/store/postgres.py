"""Connections, tenant sessions and migrations. All SQL text lives in queries.py and migrations/."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import ConnectionPool, PoolTimeout

from ..config import Settings
from ..errors import DatabaseUnavailable, InvalidRequest, MigrationError
from . import embedded, queries


def resolve_url(settings: Settings, url: str | None = None) -> tuple[str, bool]:
    """(url, is_embedded): an explicit URL, then RAGD_DATABASE_URL, then the embedded server."""
    if url:
        return url, False
    if settings.database_url:
        return settings.database_url, False
    return embedded.start(settings.pgdata), True


def migrations() -> list[tuple[int, str, str]]:
    """(version, name, sql) of every numbered migration, in order."""
    found = []
    for entry in resources.files("ragd.store").joinpath("migrations").iterdir():
        match = re.match(r"^(\d{4})_(\w+)\.sql$", entry.name)
        if match:
            found.append((int(match.group(1)), match.group(2), entry.read_text(encoding="utf-8")))
    return sorted(found)


def check_name(kind: str, value: str, max_length: int) -> str:
    """Tenant ids and collection names: the same rule as the schema's CHECK constraints."""
    pattern = rf"^[A-Za-z0-9][A-Za-z0-9_.-]{{0,{max_length - 1}}}$"
    if not isinstance(value, str) or not re.match(pattern, value):
        raise InvalidRequest(
            f"invalid {kind} {value!r}: use 1-{max_length} letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return value


def check_tenant(tenant_id: str) -> str:
    return check_name("tenant id", tenant_id, 64)


def _configure(conn: psycopg.Connection[Any]) -> None:
    conn.execute("SET jit = off")
    with contextlib.suppress(psycopg.ProgrammingError):  # no vector extension yet: registered after migrating
        register_vector(conn)
    conn.commit()


class Store:
    """A PostgreSQL database holding ragd's schema. Thread-safe: connections come from a pool."""

    def __init__(self, url: str, *, settings: Settings, embedded_server: bool = False, migrate: bool = True):
        self.url = url
        self.settings = settings
        self.embedded = embedded_server
        self._check_reachable()
        if migrate:
            self.migrate()
        self._pool = _pool(url, "ragd-admin", min_size=0)
        # Tenant sessions log in as ragd_app itself when they can: then no SQL run on them can SET ROLE
        # back to a privileged user. Otherwise they SET ROLE ragd_app on the admin login (still under RLS).
        self.app_url = settings.app_database_url or (self._app_login_url() if migrate else None)
        self._tenant_pool = _pool(self.app_url, "ragd-tenant", min_size=1) if self.app_url else self._pool

    @classmethod
    def open(cls, settings: Settings | None = None, url: str | None = None, *, migrate: bool = True) -> Store:
        settings = settings or Settings()
        resolved, is_embedded = resolve_url(settings, url)
        return cls(resolved, settings=settings, embedded_server=is_embedded, migrate=migrate)

    def close(self) -> None:
        if self._tenant_pool is not self._pool:
            self._tenant_pool.close()
        self._pool.close()

    def _app_login_url(self) -> str | None:
        """A URL logging in as ragd_app without a password, if this server allows it (trust auth)."""
        params = conninfo_to_dict(self.url)
        params.pop("password", None)
        params["user"] = "ragd_app"
        candidate = make_conninfo(**{k: str(v) for k, v in params.items() if v is not None})
        try:
            with psycopg.connect(self.url, autocommit=True) as conn:
                row = conn.execute(queries.APP_CAN_LOGIN).fetchone()
                if not (row and row[0]):
                    conn.execute(queries.ALLOW_APP_LOGIN)
            with psycopg.connect(candidate, connect_timeout=3) as conn:
                conn.execute("SELECT 1")
        except psycopg.Error:
            return None
        return candidate

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_reachable(self) -> None:
        try:
            with psycopg.connect(self.url, connect_timeout=5) as conn:
                conn.execute("SELECT 1")
        except psycopg.OperationalError as exc:
            where = "the embedded server" if self.embedded else "RAGD_DATABASE_URL"
            raise DatabaseUnavailable(
                f"cannot connect to PostgreSQL ({where}: {_redact(self.url)}): {str(exc).strip()}. "
                "Check that the server is running and the URL is right, or unset RAGD_DATABASE_URL "
                "to use the embedded server."
            ) from exc

    # -- sessions -----------------------------------------------------------------------------

    @contextmanager
    def admin(self) -> Iterator[psycopg.Connection[Any]]:
        """A transaction as the session user (schema owner): collection DDL, tenant creation."""
        with self._connection() as conn, conn.transaction():
            yield conn

    @contextmanager
    def tenant(self, tenant_id: str) -> Iterator[psycopg.Connection[Any]]:
        """A transaction as ragd_app acting for one tenant: row-level security applies."""
        check_tenant(tenant_id)
        with self._connection(self._tenant_pool) as conn, conn.transaction():
            conn.execute(queries.ACT_AS_TENANT, {"tenant_id": tenant_id})
            yield conn

    @contextmanager
    def _connection(self, pool: ConnectionPool | None = None) -> Iterator[psycopg.Connection[Any]]:
        try:
            with (pool or self._pool).connection() as conn:
                yield conn
        except (PoolTimeout, psycopg.OperationalError) as exc:
            raise DatabaseUnavailable(f"lost the connection to PostgreSQL ({_redact(self.url)}): {exc}") from exc

    # -- schema -------------------------------------------------------------------------------

    def migrate(self) -> list[int]:
        """Apply pending numbered migrations; safe to call from several processes at once."""
        applied_now: list[int] = []
        try:
            with psycopg.connect(self.url, autocommit=False) as conn, conn.transaction():
                conn.execute(queries.MIGRATION_LOCK)
                conn.execute(queries.CREATE_SCHEMA_MIGRATIONS)
                done = {row[0] for row in conn.execute(queries.APPLIED_MIGRATIONS)}
                for version, name, text in migrations():
                    if version in done:
                        continue
                    conn.execute(text.encode("utf-8"))
                    conn.execute(queries.RECORD_MIGRATION, {"version": version, "name": name})
                    applied_now.append(version)
        except psycopg.Error as exc:
            raise MigrationError(f"applying migrations failed: {str(exc).strip()}") from exc
        return applied_now

    def schema_version(self) -> int:
        with self.admin() as conn:
            row = conn.execute(queries.SCHEMA_VERSION).fetchone()
        return int(row[0]) if row and row[0] is not None else 0


def _pool(url: str, name: str, *, min_size: int) -> ConnectionPool:
    return ConnectionPool(url, min_size=min_size, max_size=8, configure=_configure, reset=_reset,
                          check=ConnectionPool.check_connection, open=True, timeout=30, name=name)


def _reset(conn: psycopg.Connection[Any]) -> None:
    conn.execute("RESET ROLE")
    conn.execute("RESET ragd.tenant_id")
    conn.commit()


def _redact(url: str) -> str:
    return re.sub(r"://([^:/@]+):[^@]*@", r"://\1:***@", url)
