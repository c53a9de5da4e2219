"""Waiting for a tenant pool's connections in tests of work that takes a second one only if it is free."""

from __future__ import annotations

import time

from ragd.store.postgres import Store


def two_free_connections(store: Store, tenant: str) -> None:
    """The tenant's pool holds two open connections (a fresh pool opens them as they are asked for), both free
    again: a connection handed back is reset before it can be taken, which on a loaded machine can take longer
    than the 20 ms a search waits for its second one (CI beside a bulk load once saw 'sequential')."""
    with store.tenant(tenant), store.tenant(tenant):
        pass
    pool = store._tenant_pool(store.tenant_role(tenant), tenant)
    deadline = time.monotonic() + 10
    while pool.get_stats()["pool_available"] < 2 and time.monotonic() < deadline:
        time.sleep(0.005)
