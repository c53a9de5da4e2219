"""`ragd documents list|show|delete`."""

from __future__ import annotations

import click

from .base import common, emit_json, handle_errors, main, open_collection, out, print_table


@main.group()
def documents() -> None:
    """List, show and delete documents."""


@documents.command("list")
@common
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 100000))
@click.option("--offset", default=0, type=click.IntRange(0))
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def documents_list(collection: str | None, tenant: str | None, limit: int, offset: int, as_json: bool) -> None:
    """Documents of a collection with their active version."""
    docs = open_collection(collection, tenant, None, create=False).documents(limit=limit, offset=offset)
    if as_json:
        emit_json({"documents": docs})
        return
    print_table(("external_id", "title", "type", "version", "chunks", "tags"),
                ((d["external_id"], d["title"] or "", d["source_type"], d["version_label"] or "-",
                  str(d["chunk_count"] or 0), ",".join(d["tags"])) for d in docs))


@documents.command("show")
@click.argument("ref")
@common
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def documents_show(ref: str, collection: str | None, tenant: str | None, as_json: bool) -> None:
    """A document (by external id or doc id) and its versions."""
    doc = open_collection(collection, tenant, None, create=False).document(ref)
    if as_json:
        emit_json(doc)
        return
    for key in ("doc_id", "external_id", "title", "source_uri", "source_type", "tags", "metadata", "updated_at"):
        out.print(f"[bold]{key}[/]: {doc[key]}")
    for v in doc["versions"]:
        mark = "active" if v["is_active"] else "inactive"
        out.print(f"  {v['version_label']} {mark} {v['chunk_count']} chunks {v['content_hash'][:12]} {v['created_at']}")


@documents.command("delete")
@click.argument("ref")
@common
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def documents_delete(ref: str, collection: str | None, tenant: str | None, as_json: bool) -> None:
    """Delete a document and all its versions; it leaves search results at once."""
    doc_id = open_collection(collection, tenant, None, create=False).delete(ref)
    if as_json:
        emit_json({"deleted": str(doc_id)})
    else:
        out.print(f"deleted {ref} ({doc_id})")
