"""Connection pools: connections configured when they open (pgvector's types, the session's settings) and reset
before they serve again, checked before use, waited for at most a timeout; and how a database URL or error is
told without its password."""

from __future__ import annotations

import contextlib
import re
import threading
from collections import OrderedDict
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool

from . import queries

# What libpq says when no server answers at all (psycopg gives connection failures no SQLSTATE): a tenant login that
# fails so is the database's trouble, not its role's, and nothing is repaired.
UNREACHABLE = ("Connection refused", "No such file or directory", "timeout expired", "could not translate host",
                "the database system is", "server closed the connection", "Network is unreachable", "No route to host")


def configure(conn: psycopg.Connection[Any], session: str = "SET jit = off") -> None:
    conn.execute(session)
    with contextlib.suppress(psycopg.ProgrammingError):  # no vector extension yet: registered after migrating
        register_vector(conn)
    conn.commit()


def pool(url: str, name: str, *, min_size: int, max_size: int = 8, max_idle: float = 600,
          timeout: float = 10.0, session: str = "SET jit = off") -> ConnectionPool:
    """Connections checked before use (a server restart leaves none broken for a caller); a caller waits at most
    `timeout` seconds for one, so a lost database is reported (503) within that time, not after minutes."""
    return ConnectionPool(url, min_size=min_size, max_size=max_size, max_idle=max_idle,
                          configure=lambda conn: configure(conn, session),
                          reset=lambda conn: reset(conn, session), check=ConnectionPool.check_connection,
                          open=True, timeout=timeout, name=name)


def saturated(pool: ConnectionPool) -> bool:
    """Whether every connection the pool may have is open and in use."""
    stats = pool.get_stats()
    return stats.get("pool_available", 0) == 0 and stats.get("pool_size", 0) >= pool.max_size


def usage(pools: list[ConnectionPool]) -> dict[str, int]:
    """Connections of these pools summed: open, in use, idle, requests waiting for one, and the most they may open."""
    stats = [p.get_stats() for p in pools]
    size = sum(st.get("pool_size", 0) for st in stats)
    idle = sum(st.get("pool_available", 0) for st in stats)
    return {"open": size, "in_use": size - idle, "idle": idle, "waiting": sum(st.get("requests_waiting", 0)
                                                                             for st in stats),
            "max": sum(p.max_size for p in pools)}


def close_pools(admin: ConnectionPool, tenants: OrderedDict[str, ConnectionPool], lock: threading.Lock) -> None:
    with lock:
        pools = list(tenants.values())
        tenants.clear()
    for pool in pools:
        pool.close()
    admin.close()


def reset(conn: psycopg.Connection[Any], session: str) -> None:
    """Undo whatever SQL in a session left behind (settings, role, temporary tables that would shadow ragd's own,
    listeners, session advisory locks) before the connection serves again."""
    conn.execute("; ".join((*queries.RESET_SESSION, session)))  # one message: a search's connections return at once
    conn.commit()


def first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "no reason given"


def redact(url: str) -> str:
    return re.sub(r"://([^:/@]+):[^@]*@", r"://\1:***@", url)
