"""`ragd keys create|list|revoke`: API keys, stored hashed."""

from __future__ import annotations

from typing import Any

import click

from ..config import load_settings
from ..store.postgres import Store
from .base import emit_json, handle_errors, main, out, print_table


@main.group("keys")
def keys_group() -> None:
    """API keys per tenant for `ragd serve` (stored hashed; a key is shown once)."""


def _store() -> Store:
    store = Store.open(load_settings())
    click.get_current_context().call_on_close(store.close)
    return store


@keys_group.command("create")
@click.option("--tenant", envvar="RAGD_TENANT", required=True, help="The tenant the key acts for.")
@click.option("--name", default="", help="A label to tell keys apart.")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def keys_create(tenant: str, name: str, as_json: bool) -> None:
    """Make a key for a tenant and print it once (it is stored only as its hash)."""
    from .. import keys

    record, key = keys.create(_store(), tenant, name)
    if as_json:
        emit_json({**record, "key": key})
        return
    out.print(f"key {record['key_id']} for tenant {tenant!r}; shown once, keep it secret:")
    click.echo(key)


@keys_group.command("list")
@click.option("--tenant", help="Only this tenant's keys.")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def keys_list(tenant: str | None, as_json: bool) -> None:
    """Keys with their tenant, name, prefix, creation, last use and revocation (never the key)."""
    from .. import keys

    items = keys.list_keys(_store(), tenant)
    if as_json:
        emit_json({"keys": items})
        return
    print_table(("key id", "prefix", "tenant", "name", "created", "last used", "revoked"),
                ((str(k["key_id"]), k["prefix"], k["tenant_id"], k["name"], _when(k["created_at"]),
                  _when(k["last_used_at"]), _when(k["revoked_at"])) for k in items))


def _when(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else ""


@keys_group.command("revoke")
@click.argument("key_id")
@handle_errors
def keys_revoke(key_id: str) -> None:
    """Revoke a key by its id or prefix; requests with it get 401 from then on."""
    from .. import keys

    tenant = keys.revoke(_store(), key_id)
    out.print(f"revoked {key_id} (tenant {tenant!r})")
