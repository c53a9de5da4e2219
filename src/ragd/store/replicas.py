"""Streaming replicas (RAGD_READ_DATABASE_URL): whether one may serve a tenant's read now (in recovery, not
lagging past RAGD_REPLICA_MAX_LAG_S, and, for read-your-writes, past the primary's position after the tenant's last
write), checked at most once a second, with its own tenant sessions opened on first use."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

import psycopg

from ..config import Settings
from ..errors import RagdError
from . import queries
from .pools import first_line, redact

log = logging.getLogger("ragd.store.postgres")


class Closable(Protocol):
    def close(self) -> None: ...


class Primary(Protocol):
    """The primary's store, as a replica's check reads it."""

    def write_lsn(self) -> str: ...


S = TypeVar("S", bound=Closable)


def lsn_value(lsn: str) -> int:
    """A WAL position ('16/B374D848') as a number, to compare two."""
    high, low = lsn.split("/")
    return (int(high, 16) << 32) + int(low, 16)


class Replica(Generic[S]):
    """A streaming replica (RAGD_READ_DATABASE_URL): its tenant sessions (the same roles and policies as the
    primary's, replicated with it), and whether it may serve a read now, checked at most once a second."""

    CHECK_EVERY_S = 1.0

    def __init__(self, url: str, settings: Settings, opener: Callable[[str, Settings], S]):
        self.url = url
        self._opener = opener
        self.settings = settings.model_copy(update={"database_url": url, "app_database_url": None,
                                                    "read_database_url": None})
        self._store: S | None = None
        self._lock = threading.Lock()
        self._checked = -1e9
        self._usable = False
        self._replayed = 0
        self._heads: deque[tuple[float, int]] = deque(maxlen=600)  # (when, the primary's WAL position then)
        self._reason = ""

    def store(self) -> S:
        with self._lock:
            if self._store is None:
                self._store = self._opener(self.url, self.settings)
            return self._store

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None

    def failed(self, exc: BaseException) -> None:
        self._set(False, f"failed: {first_line(str(exc))}")
        self._checked = time.monotonic()

    def _set(self, usable: bool, reason: str = "") -> None:
        if usable != self._usable or reason.split(":")[0] != self._reason.split(":")[0]:
            if usable:
                if self._reason:  # (not on the first check)
                    log.warning("read replica %s serves reads again", redact(self.url))
            else:
                log.warning("read replica %s skipped (reads go to the primary): %s", redact(self.url), reason)
        self._usable, self._reason = usable, reason

    def usable(self, primary: Primary, after_lsn: str | None) -> bool:
        now = time.monotonic()
        if now - self._checked >= self.CHECK_EVERY_S:
            self._checked = now
            self._check(primary, now)
        if not self._usable:
            return False
        if after_lsn is None or self._replayed >= lsn_value(after_lsn):
            return True
        return self._wait_for(lsn_value(after_lsn))

    def _check(self, primary: Primary, now: float) -> None:
        try:
            with psycopg.connect(self.url, connect_timeout=2, autocommit=True) as conn:
                in_recovery, replayed, behind_s = conn.execute(queries.REPLICA_STATE).fetchone()  # type: ignore[misc]
            head = lsn_value(primary.write_lsn())
        except (psycopg.Error, RagdError) as exc:
            self._set(False, f"unreachable: {first_line(str(exc))}")
            return
        if not in_recovery:
            self._set(False, "not in recovery (promoted, or not a replica): it would serve writes of its own")
            return
        self._replayed = lsn_value(str(replayed)) if replayed else 0
        # it has replayed everything the primary had written at the last check whose position it passed: its lag
        # is the time since then (0 when it has what the primary has now); before any such check, the time since
        # the last transaction it replayed
        self._heads.append((now, head))
        passed = [when for when, position in self._heads if position <= self._replayed]
        lag = now - max(passed) if passed else max(float(behind_s or 0.0), now - self._heads[0][0])
        limit = self.settings.replica_max_lag_s
        if lag > limit:
            self._set(False, f"lagging: {lag:.1f}s behind the primary, over RAGD_REPLICA_MAX_LAG_S={limit:g}")
        else:
            self._set(True)

    def _wait_for(self, lsn: int) -> bool:
        """Wait (at most RAGD_READ_YOUR_WRITES_WAIT_S) for this replica to replay lsn; False past that."""
        deadline = time.monotonic() + self.settings.read_your_writes_wait_s
        try:
            with psycopg.connect(self.url, connect_timeout=2, autocommit=True) as conn:
                while True:
                    replayed = conn.execute("SELECT pg_last_wal_replay_lsn()").fetchone()[0]  # type: ignore[index]
                    self._replayed = max(self._replayed, lsn_value(str(replayed)) if replayed else 0)
                    if self._replayed >= lsn:
                        return True
                    if time.monotonic() >= deadline:
                        return False
                    time.sleep(0.01)
        except psycopg.Error as exc:
            self.failed(exc)
            return False
