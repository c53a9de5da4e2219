"""The store: PostgreSQL connections and tenant sessions (each tenant a login role held to its own rows), the
privileged pool, read replicas and migrations. SQL text lives in queries/ and migrations/; pools in pools.py,
names and roles in names.py, replicas in replicas.py, the migrations' list in schema.py."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import ConnectionPool, PoolTimeout

from ..config import Settings, load_settings
from ..errors import Busy, DatabaseUnavailable, MigrationError, RagdError, TenantNotFound
from . import embedded, queries
from .names import check_tenant, role_password, tenant_role, tenant_settings
from .pools import UNREACHABLE, close_pools, first_line, redact, saturated, usage
from .pools import pool as open_pool
from .replicas import Replica
from .schema import migrations

_log = logging.getLogger(__name__)
# Pools of tenant logins kept open at once (the least recently used is closed beyond this), each of at most
# TENANT_POOL_SIZE connections, idle ones closed after a minute: at most 16 x 4 + 8 connections per process.
MAX_TENANT_POOLS = 16
TENANT_POOL_SIZE = 4
# Of the privileged pool's ADMIN_POOL_SIZE connections, the most one tenant's requests hold at once (admin(tenant)):
# its uploads waiting on its own locks leave the others to everyone else; and ADMIN_RESERVED of them are never
# taken by tenants' requests: API key checks, /readyz and the queue's own work never wait behind them.
ADMIN_POOL_SIZE = 8
ADMIN_SHARE = 3
ADMIN_RESERVED = 2
# A tenant found at its connection limit is refused without a new login attempt for this long (each attempt forks
# a backend: a tenant flooding requests while at its limit would otherwise spend the server's CPU on them).
AT_LIMIT_S = 1.0
# How long a search holding one connection waits for a second to run its legs side by side: an idle one is taken at
# once, a pool that can grow opens one within a few ms; one with every connection busy is not waited for (the legs
# run one after the other). Not less: the worker thread asking for it may wait a GIL switch (5 ms) to run.
SPARE_WAIT_S = 0.02
# A btree of the BM25 blocks' keys built afresh holds ~145 entries a page (1.2M drawn chunks), one kept by ingest
# and compaction ~35 (180k); below this many it is rebuilt.
SPARSE_ENTRIES_PER_PAGE = 16


def _drop_indexes(conn: psycopg.Connection[Any], names: list[str]) -> None:
    for name in names:
        conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(name)))


def resolve_url(settings: Settings, url: str | None = None) -> tuple[str, bool]:
    """(url, is_embedded): an explicit URL, then RAGD_DATABASE_URL, then the embedded server."""
    if url:
        return url, False
    if settings.database_url:
        return settings.database_url, False
    return embedded.start(settings.pgdata), True


class Store:
    """A PostgreSQL database holding ragd's schema. Thread-safe: connections come from a pool."""

    def __init__(self, url: str, *, settings: Settings, embedded_server: bool = False, migrate: bool = True):
        self.url = url
        self.settings = settings
        self.embedded = embedded_server
        self._check_reachable()
        if migrate:
            self.migrate()
        self._pool = open_pool(url, "ragd-admin", min_size=0, max_size=ADMIN_POOL_SIZE, timeout=settings.db_timeout_s)
        # Tenant sessions log in as their tenant's own role, and only so: no SQL run on them can become another
        # tenant or the privileged login (see migration 0006). There is no fallback that takes a tenant's role on
        # the privileged login (SQL could RESET ROLE out of it), and one tenant's login trouble is that tenant's
        # alone: its login is repaired, or its sessions refused, never the whole process switched to another mode.
        self._secret: str | None = None
        self._schema: str | None = None
        self._prewarm: str | None = None  # pg_prewarm's schema once looked for ('': not to be had)
        self._roles: dict[str, str] = {}
        self._limits_settable: bool | None = None  # whether this login may store temp_file_limit for tenant roles
        self._tenant_pools: OrderedDict[str, ConnectionPool] = OrderedDict()
        self._tenant_lock = threading.Lock()
        self._opening: dict[str, threading.Lock] = {}  # role -> held while its pool's login is checked
        self._at_limit: dict[str, tuple[float, str]] = {}  # role -> (until when, why): at its connection limit
        self._shares: dict[str, threading.BoundedSemaphore] = {}  # admin connections a tenant's requests may hold
        self._tenants_work = threading.BoundedSemaphore(ADMIN_POOL_SIZE - ADMIN_RESERVED)  # ... all tenants' together
        # pools closed at exit even when the caller never closes the store (no noise from their threads then)
        self._closer = weakref.finalize(self, close_pools, self._pool, self._tenant_pools, self._tenant_lock)
        urls = [u.strip() for u in (settings.read_database_url or "").split(",") if u.strip()]
        self.replicas = [Replica(u, settings, _replica_store) for u in urls]

    @classmethod
    def open(cls, settings: Settings | None = None, url: str | None = None, *, migrate: bool = True) -> Store:
        settings = settings or load_settings()
        resolved, is_embedded = resolve_url(settings, url)
        return cls(resolved, settings=settings, embedded_server=is_embedded, migrate=migrate)

    def close(self) -> None:
        for replica in self.replicas:
            replica.close()
        self._closer()

    # -- tenants ------------------------------------------------------------------------------

    @property
    def tenant_pools(self) -> int:
        """How many tenant login pools are open (at most MAX_TENANT_POOLS)."""
        return len(self._tenant_pools)

    def pool_stats(self) -> dict[str, dict[str, int]]:
        """The connections of the privileged pool ("admin") and of all tenants' pools ("tenant"): pools.usage."""
        with self._tenant_lock:
            tenants = list(self._tenant_pools.values())
        return {"admin": usage([self._pool]), "tenant": usage(tenants)}

    def tenant_role(self, tenant_id: str, *, create: bool = False) -> str:
        """The tenant's role. A tenant exists once something created it explicitly (`create=True`: a collection
        created for it, an API key issued to it); otherwise an unknown tenant is TenantNotFound, and nothing is
        created for a request that only reads (in open mode a request names its own tenant)."""
        check_tenant(tenant_id)
        role = self._roles.get(tenant_id)
        if role is not None:
            return role
        with self.admin(tenant_id) as conn:
            if self._secret is None:
                row = conn.execute(queries.READ_SECRET).fetchone()
                if row is None:
                    raise MigrationError("the ragd_secret table is empty; run `ragd migrate` on a fresh database")
                self._secret = str(row[0])
            if self._schema is None:
                self._schema = str(conn.execute("SELECT current_schema()").fetchone()[0])  # type: ignore[index]
            role = tenant_role(self._secret, tenant_id)
            if not create:
                if conn.execute(queries.TENANT_MAPPED, {"tenant_id": tenant_id, "role": role}).fetchone() is None:
                    raise TenantNotFound(f"no tenant {tenant_id!r}: it has no collection yet (ingest into one "
                                         "first)")
                self._roles[tenant_id] = role
                return role
            conn.execute(queries.TENANT_ROLE_LOCK)
            conn.execute(queries.ENSURE_TENANT, {"tenant_id": tenant_id})
            if conn.execute(queries.ROLE_EXISTS, {"role": role}).fetchone() is None:
                conn.execute(queries.create_tenant_role(role, role_password(self._secret, role),
                                                        self.settings.tenant_connection_limit))
            conn.execute(queries.MAP_TENANT_ROLE, {"role": role, "tenant_id": tenant_id})
        self._roles[tenant_id] = role
        return role

    def _tenant_pool(self, role: str, tenant_id: str) -> ConnectionPool:
        """The pool logging in as role, opened after one login checked (and repaired) by _check_login: one check
        per role at a time in this process (requests that meet a tenant at once wait for the first's pool)."""
        with self._tenant_lock:
            opening = self._opening.setdefault(role, threading.Lock())
        with opening:
            with self._tenant_lock:
                pool = self._tenant_pools.get(role)
                if pool is not None:
                    self._tenant_pools.move_to_end(role)
                    return pool
            refused = self._at_limit.get(role)
            if refused is not None and time.monotonic() < refused[0]:  # said a moment ago: no login tried again
                raise Busy(refused[1])
            try:
                url = self._check_login(role, tenant_id)
            except Busy as exc:
                self._at_limit[role] = (time.monotonic() + AT_LIMIT_S, str(exc))
                raise
            self._at_limit.pop(role, None)
            pool = open_pool(url, "ragd-tenant", min_size=0, max_size=TENANT_POOL_SIZE, max_idle=60,
                             timeout=self.settings.db_timeout_s,
                             session=tenant_settings(self._schema or "public", self.settings))
            with self._tenant_lock:
                self._tenant_pools[role] = pool
                evicted = []
                while len(self._tenant_pools) > MAX_TENANT_POOLS:
                    evicted.append(self._tenant_pools.popitem(last=False)[1])
        for old in evicted:
            old.close()
        return pool

    def _drop_pool(self, role: str) -> None:
        with self._tenant_lock:
            pool = self._tenant_pools.pop(role, None)
        if pool is not None:
            pool.close()

    def _login_url(self, role: str) -> str:
        assert self._secret is not None
        params = conninfo_to_dict(self.settings.app_database_url or self.url)
        params.update(user=role, password=role_password(self._secret, role))
        return make_conninfo(**{k: str(v) for k, v in params.items() if v is not None})

    def _check_login(self, role: str, tenant_id: str) -> str:
        """The tenant role's login URL, after one login succeeded as that role and showed no privilege beyond a
        tenant's and the limits ragd gives it. SQL in a tenant's session may have changed its own login (`ALTER
        ROLE CURRENT_USER PASSWORD`, `ALTER ROLE CURRENT_USER SET ...`, `role` too, which makes current_user
        another role at login: the check reads the session user's): a failed login, or settings stored for the
        role other than ragd's, are repaired from the privileged session, once. A login that still fails refuses
        this tenant's sessions only; a tenant at its connection limit is told so (Busy); a server that is not
        there is DatabaseUnavailable, nothing repaired."""
        url = self._login_url(role)
        repaired = False
        while True:
            try:
                with psycopg.connect(url, connect_timeout=5, autocommit=True) as conn:
                    row = conn.execute(queries.LOGIN_CHECK).fetchone()
            except psycopg.OperationalError as exc:
                self._login_failed(exc, tenant_id, repaired)
                self._repair_login(role)
                repaired = True
                continue
            assert row is not None
            superuser, bypass_rls, limit, stored, stored_here = row
            if superuser or bypass_rls:  # never true of a role ragd created; refused if someone made it so
                raise DatabaseUnavailable(
                    f"tenant {tenant_id!r}'s role is a superuser or bypasses row-level security; ragd runs no "
                    "tenant session over such a login. Run `ALTER ROLE ... NOSUPERUSER NOBYPASSRLS` on it")
            if not repaired and (limit != self.settings.tenant_connection_limit or stored_here
                                 or list(stored or ()) != self._role_limits()):
                self._repair_login(role, changed=bool(stored_here) or bool(set(stored or ()) - set(
                    self._role_limits(wanted=True))))
                repaired = True
                continue
            return url

    def _login_failed(self, exc: psycopg.OperationalError, tenant_id: str, repaired: bool) -> None:
        """Raise what a failed tenant login means, unless it is one a repair may cure (a changed password)."""
        reason = first_line(str(exc))
        if exc.sqlstate == "53300" or "too many connections for role" in reason:
            raise Busy(f"tenant {tenant_id!r} has too many connections open (its role's limit, "
                       f"RAGD_TENANT_CONNECTION_LIMIT={self.settings.tenant_connection_limit}): close some of its "
                       "sessions, or retry later") from exc
        if any(sign in reason for sign in UNREACHABLE):  # no server there: nothing to repair
            raise DatabaseUnavailable(f"the database is unavailable ({redact(self.url)}): {reason}") from exc
        if repaired:
            raise DatabaseUnavailable(
                f"tenant {tenant_id!r} cannot log in to PostgreSQL as its own role: {reason}. Allow password "
                "logins for the ragd_t_* roles in pg_hba.conf (or set RAGD_APP_DATABASE_URL to an address where "
                "they may log in)") from exc

    def _role_limits(self, *, wanted: bool = False) -> list[str]:
        """The settings stored for every tenant role (its `setconfig`): temp_file_limit, where this login may set
        it (a superuser, or one granted SET on it), else none; with `wanted`, as if it may."""
        setting = [f"temp_file_limit={self.settings.tenant_temp_file_limit_mb * 1024}"]
        return setting if wanted or self._limits_settable is not False else []

    def _repair_login(self, role: str, *, changed: bool = True) -> None:
        """Give a tenant role back its password, its attributes and its limits, and no other stored settings."""
        assert self._secret is not None
        if changed:
            _log.warning("repairing the login of tenant role %s (its password or stored settings were changed)", role)
        with self.admin() as conn:
            # one change of tenant roles at a time across processes (as their creation): PostgreSQL refuses
            # concurrent changes of one role ("tuple concurrently updated"); a second repair repeats harmlessly
            conn.execute(queries.TENANT_ROLE_LOCK)
            for statement in queries.repair_tenant_role(role, role_password(self._secret, role),
                                                        str(conn.info.dbname), self.settings.tenant_connection_limit):
                conn.execute(statement)
            if self._limits_settable is False:
                return
            try:
                with conn.transaction():
                    conn.execute(queries.tenant_role_limits(role, self.settings.tenant_temp_file_limit_mb * 1024))
                self._limits_settable = True
            except psycopg.errors.InsufficientPrivilege as exc:
                self._limits_settable = False
                _log.warning("tenant roles get no temp_file_limit (%s): a tenant's SQL may write temporary files "
                             "up to the server's own limit. Run `GRANT SET ON PARAMETER temp_file_limit TO %s` as "
                             "a superuser to bound them", first_line(str(exc)), conn.info.user)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_reachable(self) -> None:
        try:
            with psycopg.connect(self.url, connect_timeout=5) as conn:
                conn.execute("SELECT 1")
        except psycopg.ProgrammingError as exc:  # not a connection string at all
            raise DatabaseUnavailable(f"the database URL {redact(self.url)!r} is not valid: {str(exc).strip()}; "
                                      "use postgresql://USER:PASSWORD@HOST:PORT/DATABASE") from exc
        except psycopg.OperationalError as exc:
            where = "the embedded server" if self.embedded else "RAGD_DATABASE_URL"
            raise DatabaseUnavailable(
                f"cannot connect to PostgreSQL ({where}: {redact(self.url)}): {str(exc).strip()}. "
                "Check that the server is running and the URL is right, or unset RAGD_DATABASE_URL "
                "to use the embedded server."
            ) from exc

    # -- sessions -----------------------------------------------------------------------------

    @contextmanager
    def admin(self, tenant: str | None = None) -> Iterator[psycopg.Connection[Any]]:
        """A transaction as the session user (schema owner): collection DDL, tenant creation. On behalf of a tenant
        (`tenant`: a request's work, which may meet that tenant's own locks), it is a bulkhead: the tenant holds at
        most ADMIN_SHARE of the pool's connections at once, waits at most RAGD_DB_TIMEOUT_S for one and at most
        RAGD_DB_LOCK_TIMEOUT_S for a lock, and past either gets Busy; other tenants' work goes on."""
        if tenant is None:
            with self._connection() as conn, conn.transaction():
                yield conn
            return
        share = self._shares.setdefault(tenant, threading.BoundedSemaphore(ADMIN_SHARE))
        deadline = time.monotonic() + self.settings.db_timeout_s
        if not share.acquire(timeout=self.settings.db_timeout_s):
            raise Busy(f"tenant {tenant!r} has {ADMIN_SHARE} requests waiting on the database already; retry later")
        if not self._tenants_work.acquire(timeout=max(0.0, deadline - time.monotonic())):
            share.release()
            raise Busy(f"the {ADMIN_POOL_SIZE - ADMIN_RESERVED} connections for tenants' requests were all in use "
                       f"for {self.settings.db_timeout_s:g} s (RAGD_DB_TIMEOUT_S); retry later")
        try:
            with self._connection() as conn, conn.transaction():
                conn.execute(queries.SET_LOCAL_LOCK_TIMEOUT, (f"{self.settings.db_lock_timeout_s:g}s",))
                try:
                    yield conn
                except psycopg.errors.LockNotAvailable as exc:
                    raise Busy(f"tenant {tenant!r}'s request waited {self.settings.db_lock_timeout_s:g} s for a lock "
                               "(RAGD_DB_LOCK_TIMEOUT_S), held by another session of that tenant; retry later") from exc
        finally:
            self._tenants_work.release()
            share.release()

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
    def dedicated(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection of the session user's of its own, outside every pool (autocommit), for work that may wait
        on others for long (an index build waits for every older transaction): it takes no slot a request needs."""
        try:
            conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10, application_name="ragd-maintenance")
        except psycopg.OperationalError as exc:
            raise DatabaseUnavailable(f"cannot connect to PostgreSQL ({redact(self.url)}): "
                                      f"{first_line(str(exc))}") from exc
        with conn:
            conn.execute("SET jit = off")
            yield conn

    @contextmanager
    def tenant(self, tenant_id: str) -> Iterator[psycopg.Connection[Any]]:
        """A transaction logged in as the tenant's role: row-level security shows and accepts its rows only."""
        role = self.tenant_role(tenant_id)
        with contextlib.ExitStack() as stack:
            pool = self._tenant_pool(role, tenant_id)
            try:
                conn = stack.enter_context(pool.connection())
            except (PoolTimeout, psycopg.OperationalError) as exc:
                if isinstance(exc, PoolTimeout) and saturated(pool):  # its own sessions hold them all: its wait
                    raise Busy(f"tenant {tenant_id!r} has every one of its {pool.max_size} sessions of this "
                               f"process in use for {pool.timeout:g} s (RAGD_DB_TIMEOUT_S); retry later") from exc
                # the pool's logins may have been changed under it: checked, repaired and opened again, once
                self._drop_pool(role)
                conn = stack.enter_context(self._connection(self._tenant_pool(role, tenant_id)))
            with conn.transaction():
                yield conn

    @contextmanager
    def reading(self, tenant_id: str, *, after_lsn: str | None = None) -> Iterator[psycopg.Connection[Any]]:
        """A tenant's read-only work (search, ask's retrieval): on the first replica that answers, replays the
        primary within RAGD_REPLICA_MAX_LAG_S and has replayed `after_lsn` (the client's last write; waited for up
        to RAGD_READ_YOUR_WRITES_WAIT_S), else on the primary. A replica down or behind is skipped with a warning,
        never an error to the caller."""
        with self.reading_pair(tenant_id, after_lsn=after_lsn, pair=False) as (conn, _):
            yield conn

    @contextmanager
    def reading_pair(self, tenant_id: str, *, after_lsn: str | None = None, pair: bool = True
                     ) -> Iterator[tuple[psycopg.Connection[Any], Beside | None]]:
        """reading()'s session and, with `pair`, a way to open a second session on the same server in its
        snapshot, for work that runs on both at once (a hybrid search's two legs): the first transaction is
        REPEATABLE READ and exports its snapshot, and `beside()` (a context manager, used in any thread while this
        one is open) yields a connection whose transaction imports it, so both see one state of the collection; or
        None when the tenant's pool has no connection free within SPARE_WAIT_S (the work then runs on the first
        alone): a caller never waits long for its own second connection."""
        with contextlib.ExitStack() as stack:
            session = None
            for replica in self.replicas:
                if not replica.usable(self, after_lsn):
                    continue
                try:
                    session = replica.store()._session_pair(stack, tenant_id, pair)
                    break
                except (RagdError, psycopg.Error) as exc:  # of any kind: the primary serves instead
                    replica.failed(exc)
            yield session or self._session_pair(stack, tenant_id, pair)

    def _session_pair(self, stack: contextlib.ExitStack, tenant_id: str, pair: bool
                      ) -> tuple[psycopg.Connection[Any], Beside | None]:
        """A tenant transaction, with `pair` exporting its snapshot for Beside; entered on `stack` only when the
        whole of it opened (a replica that fails half-way leaves nothing open)."""
        with contextlib.ExitStack() as opened:
            conn = opened.enter_context(self.tenant(tenant_id))
            beside = None
            if pair:  # set before the transaction's first query, which takes its snapshot
                exported = conn.execute(queries.REPEATABLE_READ + "; " + queries.EXPORT_SNAPSHOT)
                exported.nextset()
                beside = Beside(self, tenant_id, str(exported.fetchone()[0]))  # type: ignore[index]
            stack.enter_context(opened.pop_all())
            return conn, beside

    def _spare(self, stack: contextlib.ExitStack, tenant_id: str) -> psycopg.Connection[Any] | None:
        """A second connection of the tenant's pool if one is free (or opens) within SPARE_WAIT_S, else None. The
        caller already holds one: waiting longer could leave every caller holding one and waiting for another."""
        try:
            pool = self._tenant_pool(self.tenant_role(tenant_id), tenant_id)
            if saturated(pool):
                return None  # every connection is in use
            return stack.enter_context(pool.connection(timeout=SPARE_WAIT_S))
        except (PoolTimeout, psycopg.OperationalError):
            return None

    def write_lsn(self) -> str:
        """The primary's WAL position now: a read that must see what was committed before waits for it."""
        with self._connection() as conn:
            conn.autocommit = True
            try:
                return str(conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0])  # type: ignore[index]
            finally:
                conn.autocommit = False

    @staticmethod
    @contextmanager
    def exclusive(conn: psycopg.Connection[Any], name: str) -> Iterator[bool]:
        """Hold ragd's lock `name` (a row of ragd_locks naming this backend) for the block, on conn in autocommit
        mode, across the block's statements (CREATE INDEX CONCURRENTLY waits for every open transaction, so no
        transaction may hold it); yields False, holding nothing, when a live backend holds it. A killed holder's
        claim lapses with its backend."""
        assert conn.autocommit
        conn.execute(queries.ADD_LOCK, {"name": name})
        mine = conn.execute(queries.CLAIM_LOCK, {"name": name}).fetchone() is not None
        try:
            yield mine
        finally:
            if mine and not conn.closed:
                with contextlib.suppress(psycopg.OperationalError):  # a lost backend's claim has lapsed with it
                    conn.execute(queries.RELEASE_LOCK, {"name": name})

    @contextmanager
    def serialized(self, conn: psycopg.Connection[Any], name: str, poll_s: float = 0.5) -> Iterator[None]:
        """exclusive(conn, name), waited for: polled every poll_s until this backend holds it."""
        while True:
            with self.exclusive(conn, name) as mine:
                if mine:
                    yield
                    return
            time.sleep(poll_s)

    def prefetch(self, conn: psycopg.Connection[Any], relations: Sequence[str]) -> dict[str, int]:
        """Have the server read `relations` (of the schema) in order into the system's cache (pg_prewarm's `read`
        mode: sequential reads, which the kernel reads ahead of; shared buffers are left as they are), on conn (the
        session user's, autocommit), creating the pg_prewarm extension if it is missing and may be created (its
        functions then revoked from everyone else). The pages read, by relation; none where the extension is not to
        be had."""
        assert conn.autocommit
        if self._prewarm is None:
            try:
                conn.execute(queries.CREATE_PREWARM)
            except psycopg.Error as exc:  # not installed on the server, or not ours to create
                _log.info("indexes are not read ahead of ingest: pg_prewarm is not available (%s)", str(exc).strip())
            try:
                conn.execute(queries.REVOKE_PREWARM)  # (no tenant may call it)
            except psycopg.Error as exc:  # created by another role: theirs to restrict
                _log.warning("pg_prewarm's functions could not be revoked from PUBLIC (%s): revoke them as their "
                             "owner, or tenants' SQL may load tables into the shared buffers", str(exc).strip())
            row = conn.execute(queries.PREWARM_SCHEMA).fetchone()
            self._prewarm = row[0] if row else ""
        if not self._prewarm:
            return {}
        rows = conn.execute(queries.prewarm(self._prewarm), {"names": list(relations)}).fetchall()
        return {name: int(pages) for name, pages in rows}

    def rebuild_sparse_blocks_index(self, *, sparse: int = SPARSE_ENTRIES_PER_PAGE, wait: str = "10s") -> bool:
        """Rebuild the BM25 blocks' primary key (REINDEX CONCURRENTLY: reads and writes go on) when it holds fewer
        than `sparse` entries a page. Compaction deletes most of the blocks ingest writes, and a btree never
        merges the pages it leaves nearly empty: a store loaded before ingest compacted as it went kept a 1.5 GB
        index 3% full for 683k blocks (37 MB rebuilt, in 1.4 s), which every lexical search walks. Copies a
        stopped rebuild left invalid are dropped first. It waits at most `wait` for a lock or for a transaction
        older than it, then gives up: the copy it made is dropped then if it can be, else by the next call. One
        process rebuilds at a time; True if this one did."""
        with self.maintenance() as conn:
            row = conn.execute(queries.BLOCKS_INDEX_FILL).fetchone()
            assert row is not None
            pages, entries, stale = int(row[0]), int(row[1]), list(row[2])
            dense = pages < 8 or entries >= sparse * pages  # (a small index counts as dense)
            if dense and not stale:
                return False
            with self.exclusive(conn, "rebuild lexical_blocks_pkey") as mine:
                if not mine:
                    return False
                conn.execute(queries.SET_REBUILD_WAIT, {"wait": wait})  # not stuck behind a long transaction
                try:
                    _drop_indexes(conn, stale)
                    if dense:
                        return False
                    conn.execute(queries.REINDEX_BLOCKS)
                except psycopg.errors.DatabaseError as exc:  # searches are the same without it: said, not raised
                    _log.warning("the BM25 blocks' index was not rebuilt (%s); searches are exact without it",
                                 str(exc).strip())
                    with contextlib.suppress(psycopg.errors.DatabaseError):  # the copy it left, if it can
                        left = conn.execute(queries.BLOCKS_INDEX_COPIES).fetchone()
                        _drop_indexes(conn, list(left[0]) if left else [])
                    return False
                finally:
                    if not conn.closed:
                        with contextlib.suppress(psycopg.OperationalError):
                            conn.execute(queries.RESET_REBUILD_WAIT)
                return True

    @contextmanager
    def _connection(self, pool: ConnectionPool | None = None) -> Iterator[psycopg.Connection[Any]]:
        pool = pool or self._pool
        try:
            with pool.connection() as conn:
                yield conn
        except PoolTimeout as exc:
            if saturated(pool):  # every connection in use: the database is there, busy with other requests
                raise Busy(f"every connection of pool {pool.name} was in use for {pool.timeout:g} s "
                           "(RAGD_DB_TIMEOUT_S); retry later") from exc
            raise DatabaseUnavailable(f"lost the connection to PostgreSQL ({redact(self.url)}): {exc}") from exc
        except psycopg.OperationalError as exc:
            raise DatabaseUnavailable(f"lost the connection to PostgreSQL ({redact(self.url)}): {exc}") from exc

    # -- schema -------------------------------------------------------------------------------

    def migrate(self) -> list[int]:
        """Apply pending numbered migrations; safe to call from several processes at once."""
        applied_now: list[int] = []
        try:
            with psycopg.connect(self.url, autocommit=True) as conn:
                for attempt in (1, 2):  # two processes creating the table at once: one of them fails, then finds it
                    try:
                        conn.execute(queries.CREATE_SCHEMA_MIGRATIONS)
                        break
                    except psycopg.errors.UniqueViolation:
                        if attempt == 2:
                            raise
                conn.autocommit = False
                with conn.transaction():  # the lock held to the end of the transaction that applies them
                    conn.execute(queries.MIGRATION_LOCK)
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


class Beside:
    """A second session in a reading_pair's snapshot: `with beside() as conn:` a tenant connection whose
    REPEATABLE READ transaction imported the first one's snapshot, or None when the pool has none free within
    SPARE_WAIT_S. Valid while the first session's transaction is open (it holds the snapshot)."""

    def __init__(self, store: Store, tenant_id: str, snapshot: str):
        self._store, self._tenant, self._snapshot = store, tenant_id, snapshot

    @contextmanager
    def __call__(self) -> Iterator[psycopg.Connection[Any] | None]:
        with contextlib.ExitStack() as stack:
            spare = self._store._spare(stack, self._tenant)
            if spare is not None:
                stack.enter_context(spare.transaction())
                spare.execute(queries.imported_snapshot(self._snapshot))
            yield spare


def _replica_store(url: str, settings: Settings) -> Store:
    """A replica's own store: its tenant sessions, never migrated (the primary's schema replicates)."""
    return Store(url, settings=settings, migrate=False)
