"""Connections, tenant sessions and migrations. All SQL text lives in queries.py and migrations/."""

from __future__ import annotations

import contextlib
import hmac
import logging
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import ConnectionPool, PoolTimeout

from ..config import Settings, load_settings
from ..errors import DatabaseUnavailable, InvalidRequest, MigrationError
from . import embedded, queries

_log = logging.getLogger(__name__)
TENANT_ROLE_PREFIX = "ragd_t_"
# Pools of tenant logins kept open at once (the least recently used is closed beyond this), each of at most
# TENANT_POOL_SIZE connections, idle ones closed after a minute: at most 16 x 4 + 8 connections per process.
MAX_TENANT_POOLS = 16
TENANT_POOL_SIZE = 4


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


def latest_migration() -> int:
    """The schema version this ragd needs: its highest migration."""
    return max(version for version, _, _ in migrations())


def check_name(kind: str, value: str, max_length: int) -> str:
    """Tenant ids and collection names: the same rule as the schema's CHECK constraints."""
    pattern = rf"[A-Za-z0-9][A-Za-z0-9_.-]{{0,{max_length - 1}}}"
    if not isinstance(value, str) or not re.fullmatch(pattern, value):
        raise InvalidRequest(
            f"invalid {kind} {value!r}: use 1-{max_length} letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return value


def check_tenant(tenant_id: str) -> str:
    return check_name("tenant id", tenant_id, 64)


def tenant_role(secret: str, tenant_id: str) -> str:
    """The PostgreSQL role of a tenant: a keyed hash, so other tenants cannot tell from pg_roles who exists."""
    digest = hmac.new(secret.encode(), b"role\x1f" + tenant_id.encode(), "sha256").hexdigest()
    return TENANT_ROLE_PREFIX + digest[:40]


def _role_password(secret: str, role: str) -> str:
    return hmac.new(secret.encode(), b"login\x1f" + role.encode(), "sha256").hexdigest()


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
        self._pool = _pool(url, "ragd-admin", min_size=0, timeout=settings.db_timeout_s)
        # Tenant sessions log in as their tenant's own role, so no SQL run on them can become another tenant
        # (see migration 0006). Where those roles cannot log in, the privileged login takes the tenant's role
        # for each transaction instead: still under row-level security, but SQL could RESET ROLE out of it.
        self._secret: str | None = None
        self._roles: dict[str, str] = {}
        self._tenant_pools: OrderedDict[str, ConnectionPool] = OrderedDict()
        self._tenant_lock = threading.Lock()
        self.tenant_logins: bool | None = None  # known after the first tenant session
        # pools closed at exit even when the caller never closes the store (no noise from their threads then)
        self._closer = weakref.finalize(self, _close_pools, self._pool, self._tenant_pools, self._tenant_lock)

    @classmethod
    def open(cls, settings: Settings | None = None, url: str | None = None, *, migrate: bool = True) -> Store:
        settings = settings or load_settings()
        resolved, is_embedded = resolve_url(settings, url)
        return cls(resolved, settings=settings, embedded_server=is_embedded, migrate=migrate)

    def close(self) -> None:
        self._closer()

    # -- tenants ------------------------------------------------------------------------------

    @property
    def tenant_pools(self) -> int:
        """How many tenant login pools are open (at most MAX_TENANT_POOLS)."""
        return len(self._tenant_pools)

    def tenant_role(self, tenant_id: str) -> str:
        """The tenant's role, creating the tenant and its role on first use."""
        check_tenant(tenant_id)
        role = self._roles.get(tenant_id)
        if role is not None:
            return role
        with self.admin() as conn:
            if self._secret is None:
                row = conn.execute(queries.READ_SECRET).fetchone()
                if row is None:
                    raise MigrationError("the ragd_secret table is empty; run `ragd migrate` on a fresh database")
                self._secret = str(row[0])
            role = tenant_role(self._secret, tenant_id)
            conn.execute(queries.TENANT_ROLE_LOCK)
            conn.execute(queries.ENSURE_TENANT, {"tenant_id": tenant_id})
            if conn.execute(queries.ROLE_EXISTS, {"role": role}).fetchone() is None:
                conn.execute(queries.create_tenant_role(role, _role_password(self._secret, role)))
            conn.execute(queries.MAP_TENANT_ROLE, {"role": role, "tenant_id": tenant_id})
        self._roles[tenant_id] = role
        return role

    def _tenant_pool(self, role: str) -> ConnectionPool | None:
        """The pool logging in as role, or None when tenant roles cannot log in here."""
        with self._tenant_lock:
            pool = self._tenant_pools.get(role)
            if pool is not None:
                self._tenant_pools.move_to_end(role)
                return pool
            if self.tenant_logins is False:
                return None
            assert self._secret is not None
            params = conninfo_to_dict(self.settings.app_database_url or self.url)
            params.update(user=role, password=_role_password(self._secret, role))
            url = make_conninfo(**{k: str(v) for k, v in params.items() if v is not None})
            if self.tenant_logins is None:
                try:
                    with psycopg.connect(url, connect_timeout=5) as conn:
                        conn.execute("SELECT 1")
                    self.tenant_logins = True
                except psycopg.OperationalError as exc:
                    self.tenant_logins = False
                    _log.warning(
                        "tenant roles cannot log in to %s (%s); tenant sessions take the tenant's role on "
                        "the privileged login instead, which SQL run inside them could leave. Allow password "
                        "logins for the ragd_t_* roles in pg_hba.conf (or set RAGD_APP_DATABASE_URL) for "
                        "isolation that holds against SQL injection.", _redact(self.url), str(exc).strip())
                    return None
            pool = _pool(url, "ragd-tenant", min_size=0, max_size=TENANT_POOL_SIZE, max_idle=60,
                         timeout=self.settings.db_timeout_s)
            self._tenant_pools[role] = pool
            evicted = []
            while len(self._tenant_pools) > MAX_TENANT_POOLS:
                evicted.append(self._tenant_pools.popitem(last=False)[1])
        for old in evicted:
            old.close()
        return pool

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_reachable(self) -> None:
        try:
            with psycopg.connect(self.url, connect_timeout=5) as conn:
                conn.execute("SELECT 1")
        except psycopg.ProgrammingError as exc:  # not a connection string at all
            raise DatabaseUnavailable(f"the database URL {_redact(self.url)!r} is not valid: {str(exc).strip()}; "
                                      "use postgresql://USER:PASSWORD@HOST:PORT/DATABASE") from exc
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
    def maintenance(self) -> Iterator[psycopg.Connection[Any]]:
        """The session user outside any transaction (autocommit): CREATE/DROP INDEX CONCURRENTLY."""
        with self._connection() as conn:
            conn.autocommit = True
            try:
                yield conn
            finally:
                if not conn.closed:
                    conn.autocommit = False

    @contextmanager
    def tenant(self, tenant_id: str) -> Iterator[psycopg.Connection[Any]]:
        """A transaction logged in as the tenant's role: row-level security shows and accepts its rows only."""
        role = self.tenant_role(tenant_id)
        pool = self._tenant_pool(role)
        with self._connection(pool) as conn, conn.transaction():
            if pool is None:
                conn.execute(queries.ACT_AS_ROLE, {"role": role})
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
        """The highest applied migration; 0 for a database ragd has never migrated."""
        with self.admin() as conn:
            if conn.execute("SELECT to_regclass('schema_migrations')").fetchone() == (None,):
                return 0
            row = conn.execute(queries.SCHEMA_VERSION).fetchone()
        return int(row[0]) if row and row[0] is not None else 0


def _pool(url: str, name: str, *, min_size: int, max_size: int = 8, max_idle: float = 600,
          timeout: float = 10.0) -> ConnectionPool:
    """Connections checked before use (a server restart leaves none broken for a caller); a caller waits at most
    `timeout` seconds for one, so a lost database is reported (503) within that time, not after minutes."""
    return ConnectionPool(url, min_size=min_size, max_size=max_size, max_idle=max_idle, configure=_configure,
                          reset=_reset, check=ConnectionPool.check_connection, open=True, timeout=timeout, name=name)


def _close_pools(admin: ConnectionPool, tenants: OrderedDict[str, ConnectionPool], lock: threading.Lock) -> None:
    with lock:
        pools = list(tenants.values())
        tenants.clear()
    for pool in pools:
        pool.close()
    admin.close()


def _reset(conn: psycopg.Connection[Any]) -> None:
    """Undo whatever SQL in a session left behind (settings, role, temporary tables that would shadow ragd's own,
    listeners, session advisory locks) before the connection serves again."""
    for statement in queries.RESET_SESSION:
        conn.execute(statement)
    conn.commit()


def _redact(url: str) -> str:
    return re.sub(r"://([^:/@]+):[^@]*@", r"://\1:***@", url)
