"""API keys per tenant: made with 256 random bits, shown once, stored as their sha256, revoked by id.

A key reads `ragd_<8 hex of its id>_<43 url-safe characters>`; the prefix before the second underscore is what
`ragd keys list` shows. Authentication hashes the presented key and looks the hash up (an index probe: timing
says nothing about how close a guess was)."""

from __future__ import annotations

import hashlib
import math
import re
import secrets
import uuid
from dataclasses import dataclass
from typing import Any

from .errors import InvalidRequest, NotFound
from .store import Store
from .store.names import check_tenant

_SHAPE = re.compile(r"ragd_[0-9a-f]{8}_[A-Za-z0-9_-]{43}")

CREATE = """
INSERT INTO api_keys (key_id, tenant_id, key_hash, name, prefix)
VALUES (%(key_id)s, %(tenant_id)s, %(key_hash)s, %(name)s, %(prefix)s)"""
LIST = """
SELECT key_id, tenant_id, name, prefix, created_at, last_used_at, revoked_at FROM api_keys
WHERE %(tenant_id)s::text IS NULL OR tenant_id = %(tenant_id)s ORDER BY tenant_id, created_at, key_id"""
REVOKE = "UPDATE api_keys SET revoked_at = now() WHERE key_id = %(key_id)s AND revoked_at IS NULL RETURNING tenant_id"
LOOKUP = """
UPDATE api_keys SET last_used_at = now()
WHERE key_hash = %(key_hash)s AND revoked_at IS NULL
  AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')
RETURNING tenant_id, key_id"""
LOOKUP_FRESH = "SELECT tenant_id, key_id FROM api_keys WHERE key_hash = %(key_hash)s AND revoked_at IS NULL"
COUNT_REQUEST = """
INSERT INTO rate_windows AS w (key_id, window_start, requests)
VALUES (%(key_id)s, date_trunc('minute', now()), 1)
ON CONFLICT (key_id, window_start) DO UPDATE SET requests = w.requests + 1
RETURNING requests, extract(epoch FROM date_trunc('minute', now()) + interval '1 minute' - now())::float8"""
FORGET_WINDOWS = """
DELETE FROM rate_windows WHERE key_id = %(key_id)s AND window_start < now() - interval '5 minutes'"""
# (active keys, keys ever issued, revoked ones included)
COUNTS = "SELECT count(*) FILTER (WHERE revoked_at IS NULL), count(*) FROM api_keys"


def digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def create(store: Store, tenant_id: str, name: str = "") -> tuple[dict[str, Any], str]:
    """(the key's record, the key itself: shown once, never stored)."""
    store.tenant_role(check_tenant(tenant_id), create=True)  # the tenant exists from now on
    key_id = uuid.uuid4()
    prefix = f"ragd_{key_id.hex[:8]}"
    key = f"{prefix}_{secrets.token_urlsafe(32)}"
    with store.admin() as conn:
        conn.execute(CREATE, {"key_id": key_id, "tenant_id": tenant_id, "key_hash": digest(key), "name": name,
                              "prefix": prefix})
    return {"key_id": str(key_id), "tenant_id": tenant_id, "name": name, "prefix": prefix}, key


def list_keys(store: Store, tenant_id: str | None = None) -> list[dict[str, Any]]:
    with store.admin() as conn:
        cur = conn.execute(LIST, {"tenant_id": tenant_id})
        names = [d.name for d in cur.description or ()]
        return [dict(zip(names, row)) for row in cur.fetchall()]


def revoke(store: Store, key_id: str) -> str:
    """Revoke a key by its id (or its `ragd_xxxxxxxx` prefix); returns its tenant."""
    with store.admin() as conn:
        rows = conn.execute("SELECT key_id FROM api_keys WHERE key_id::text = %(ref)s OR prefix = %(ref)s",
                            {"ref": key_id}).fetchall()
        if len(rows) != 1:
            raise NotFound(f"no API key {key_id!r} (see `ragd keys list`)") if not rows else InvalidRequest(
                f"{key_id!r} names {len(rows)} keys; give the key id")
        row = conn.execute(REVOKE, {"key_id": rows[0][0]}).fetchone()
        if row is None:
            raise InvalidRequest(f"API key {key_id!r} is already revoked")
        return str(row[0])


@dataclass(frozen=True)
class Caller:
    tenant_id: str
    key_id: str
    retry_after_s: float = 0.0  # > 0: over the rate limit, retry after this many seconds


def authenticate(store: Store, key: str, per_minute: int = 0) -> Caller | None:
    """The caller of a valid, unrevoked key (None otherwise), with the request counted against the key's limit
    of `per_minute` requests per wall-clock minute (0: no limit)."""
    if not _SHAPE.fullmatch(key):
        return None
    hashed = digest(key)
    with store.admin() as conn:
        row = conn.execute(LOOKUP, {"key_hash": hashed}).fetchone() or conn.execute(
            LOOKUP_FRESH, {"key_hash": hashed}).fetchone()
        if row is None:
            return None
        caller = Caller(str(row[0]), str(row[1]))
        if per_minute <= 0:
            return caller
        counted = conn.execute(COUNT_REQUEST, {"key_id": row[1]}).fetchone()
        assert counted is not None
        if counted[0] == 1:
            conn.execute(FORGET_WINDOWS, {"key_id": row[1]})
        if counted[0] > per_minute:
            return Caller(caller.tenant_id, caller.key_id, max(1.0, math.ceil(counted[1])))
        return caller


def counts(store: Store) -> tuple[int, int]:
    """(active keys, keys ever issued, revoked ones included), in one query."""
    with store.admin() as conn:
        row = conn.execute(COUNTS).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def keyed(store: Store, allow_open: bool) -> bool:
    """Whether requests need a key: while any key is active, and also once every key was revoked (a database that
    had keys holds tenants that trusted them), unless open mode is asked for explicitly (RAGD_ALLOW_OPEN)."""
    active, ever = counts(store)
    return active > 0 or (not allow_open and ever > 0)
