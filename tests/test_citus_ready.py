"""The live schema stays distributable on Citus the way docs/scale.md says: tables distributed by tenant_id (every
key and unique index holds it, every foreign key between them joins on it), reference tables, and tables kept on
the coordinator. A new table or key that would not shard that way fails here. (No Citus runs in these tests.)"""

from __future__ import annotations

from typing import Any

import ragd

# copied to every node: the tenants and their roles (the row-level security function reads the role map there)
REFERENCE = {"tenants", "tenant_roles"}
# kept on the coordinator only: what is looked up before the tenant is known (a key at login, its rate window),
# the job queue (workers connect to the coordinator), and ragd's own bookkeeping
COORDINATOR = {"api_keys", "rate_windows", "ragd_locks", "ragd_secret", "schema_migrations",
               "procrastinate_jobs", "procrastinate_events", "procrastinate_periodic_defers", "procrastinate_workers"}
DISTRIBUTION = "tenant_id"


def _schema(client: ragd.Ragd) -> dict[str, Any]:
    with client.store.admin() as conn:
        tables = {r[0]: r[1] for r in conn.execute(
            "SELECT c.relname, c.oid FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace "
            "AND c.relkind IN ('r', 'p') ORDER BY c.relname")}

        def columns(oid: int, numbers: list[int]) -> list[str]:
            names = dict(conn.execute("SELECT attnum, attname FROM pg_attribute WHERE attrelid = %s AND attnum > 0",
                                      (oid,)).fetchall())
            return [names[n] for n in numbers]

        not_null = {t: {r[0] for r in conn.execute("SELECT attname FROM pg_attribute WHERE attrelid = %s "
                                                   "AND attnum > 0 AND attnotnull AND NOT attisdropped", (oid,))}
                    for t, oid in tables.items()}
        unique = {t: [(name, columns(oid, list(keys))) for name, keys in conn.execute(
            "SELECT c.relname, i.indkey::int2[] FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = %s AND i.indisunique ORDER BY c.relname", (oid,))] for t, oid in tables.items()}
        foreign = {t: [(name, columns(oid, list(keys)), target, columns(target_oid, list(target_keys)))
                       for name, keys, target, target_oid, target_keys in conn.execute(
                           "SELECT conname, conkey, confrelid::regclass::text, confrelid, confkey FROM pg_constraint "
                           "WHERE conrelid = %s AND contype = 'f' ORDER BY conname", (oid,))]
                   for t, oid in tables.items()}
        exclusion = {t: [r[0] for r in conn.execute("SELECT conname FROM pg_constraint WHERE conrelid = %s AND "
                                                    "contype = 'x'", (oid,))] for t, oid in tables.items()}
    return {"tables": sorted(tables), "not_null": not_null, "unique": unique, "foreign": foreign,
            "exclusion": exclusion}


def _kind(table: str) -> str:
    return "reference" if table in REFERENCE else "coordinator" if table in COORDINATOR else "distributed"


def problems(schema: dict[str, Any]) -> list[str]:
    """Why the schema would not shard by tenant_id as docs/scale.md says (empty: it would)."""
    found = []
    for table in schema["tables"]:
        kind = _kind(table)
        if kind == "distributed":
            if DISTRIBUTION not in schema["not_null"][table]:
                found.append(f"{table}: distributed by {DISTRIBUTION}, but has no NOT NULL {DISTRIBUTION} column "
                             "(or classify it as a reference or coordinator table)")
            for name, cols in schema["unique"][table]:
                if DISTRIBUTION not in cols:
                    found.append(f"{table}: unique index {name} ({', '.join(cols)}) lacks {DISTRIBUTION}")
            for name in schema["exclusion"][table]:
                found.append(f"{table}: exclusion constraint {name} cannot be checked across shards")
        for name, cols, target, target_cols in schema["foreign"][table]:
            target_kind = _kind(target)
            if kind == "distributed" and target_kind == "distributed":
                pairs = list(zip(cols, target_cols))
                if (DISTRIBUTION, DISTRIBUTION) not in pairs:
                    found.append(f"{table}: foreign key {name} to {target} does not join on {DISTRIBUTION} "
                                 "(a cross-shard foreign key)")
            elif kind == "distributed" and target_kind == "coordinator":
                found.append(f"{table}: foreign key {name} to the coordinator table {target}")
            elif kind == "reference" and target_kind != "reference":
                found.append(f"{table}: reference table with a foreign key {name} to {target_kind} table {target}")
    return found


def test_the_live_schema_shards_by_tenant(client: ragd.Ragd) -> None:
    schema = _schema(client)
    assert set(REFERENCE | COORDINATOR) <= set(schema["tables"]), "a classified table no longer exists"
    assert problems(schema) == []
    distributed = [t for t in schema["tables"] if _kind(t) == "distributed"]
    assert {"documents", "chunks", "chunk_embeddings", "lexical_blocks", "ingestion_runs",
            "ingestion_files"} <= set(distributed)


def test_the_check_catches_what_would_not_shard(client: ragd.Ragd) -> None:
    """The rules fail on the faults they name: a key without the tenant, a cross-shard foreign key, a foreign key
    to the coordinator, a reference table pointing at a distributed one, a table without the column."""
    schema = _schema(client)
    schema["unique"]["documents"] = [*schema["unique"]["documents"], ("bad_key", ["collection_id", "external_id"])]
    schema["foreign"]["chunks"] = [*schema["foreign"]["chunks"], ("bad_fk", ["doc_id"], "documents", ["doc_id"])]
    schema["foreign"]["query_executions"] = [("to_keys", ["key_id"], "api_keys", ["key_id"])]
    schema["foreign"]["tenant_roles"] = [("to_docs", ["tenant_id"], "documents", ["tenant_id"])]
    schema["tables"] = [*schema["tables"], "new_table"]
    schema["not_null"]["new_table"], schema["unique"]["new_table"] = {"id"}, []
    schema["foreign"]["new_table"], schema["exclusion"]["new_table"] = [], []
    found = "\n".join(problems(schema))
    for expected in ("documents: unique index bad_key", "chunks: foreign key bad_fk to documents",
                     "query_executions: foreign key to_keys to the coordinator table api_keys",
                     "tenant_roles: reference table with a foreign key to_docs",
                     "new_table: distributed by tenant_id, but has no NOT NULL tenant_id"):
        assert expected in found, found
