"""Stable identifiers: derived from content and names, never from sequences, time or randomness.

A freshly built database given the same inputs assigns the same ids.
"""

from __future__ import annotations

import hashlib
import uuid

_NAMESPACE = uuid.UUID("6f1d3c1e-8a52-5b7e-9c1a-2d0b7f4e9a11")


def stable_uuid(*parts: str) -> uuid.UUID:
    """UUIDv5 over the parts joined with a separator that cannot occur in them."""
    return uuid.uuid5(_NAMESPACE, "\x1f".join(parts))


def collection_id(tenant_id: str, name: str) -> uuid.UUID:
    return stable_uuid("collection", tenant_id, name)


def doc_id(collection: uuid.UUID, external_id: str) -> uuid.UUID:
    return stable_uuid("document", str(collection), external_id)


def doc_version_id(doc: uuid.UUID, content_hash: str) -> uuid.UUID:
    return stable_uuid("version", str(doc), content_hash)


def chunk_id(version: uuid.UUID, chunk_index: int) -> uuid.UUID:
    return stable_uuid("chunk", str(version), str(chunk_index))


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
