"""Tenant isolation is enforced by PostgreSQL row-level security, even for raw SQL."""

from __future__ import annotations

import psycopg
import pytest

import ragd
from ragd.errors import InvalidRequest


def test_rls_hides_other_tenants_rows_from_raw_queries(client: ragd.Ragd, name: str) -> None:
    a = client.collection(name, tenant="acme")
    b = client.collection(name, tenant="globex")
    a.ingest(documents=[{"id": "a1", "text": "Acme secret launch plan for rockets."}])
    b.ingest(documents=[{"id": "b1", "text": "Globex secret launch plan for volcanoes."}])
    with client.store.tenant("acme") as conn:
        tenants = {r[0] for r in conn.execute("SELECT DISTINCT tenant_id FROM chunks")}
        assert tenants == {"acme"}
        assert conn.execute("SELECT count(*) FROM chunks WHERE tenant_id = 'globex'").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM documents WHERE external_id = 'b1'").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM chunk_embeddings WHERE tenant_id = 'globex'").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM lexical_postings WHERE tenant_id = 'globex'").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM collections WHERE tenant_id = 'globex'").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM document_filter_values WHERE tenant_id = 'globex'").fetchone()[0] == 0
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        with client.store.tenant("acme") as conn:
            conn.execute("INSERT INTO tenants (tenant_id, name) VALUES ('globex2', 'x')")
    with client.store.tenant("acme") as conn:  # the session itself is the unprivileged role: no way back up
        assert conn.execute("SELECT session_user, current_user").fetchone() == ("ragd_app", "ragd_app")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SET ROLE postgres")
    with client.store.tenant("acme") as conn:  # even a forged tenant_id cannot be written
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("UPDATE chunks SET tenant_id = 'globex' WHERE tenant_id = 'acme'")
    assert [h.external_id for h in a.search("secret launch plan", k=5)] == ["a1"]
    assert [h.external_id for h in b.search("secret launch plan", k=5)] == ["b1"]


def test_same_collection_name_in_two_tenants_is_two_collections(client: ragd.Ragd, name: str) -> None:
    a = client.collection(name, tenant="t-one")
    b = client.collection(name, tenant="t-two")
    assert a.collection_id != b.collection_id
    assert [c["name"] for c in client.collections("t-one")] == [name]


def test_bad_tenant_id_is_refused(client: ragd.Ragd) -> None:
    with pytest.raises(InvalidRequest, match="invalid tenant"):
        client.collection("x", tenant="../etc")
