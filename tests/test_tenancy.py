"""Tenant isolation is enforced by PostgreSQL row-level security, even for raw SQL."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import numpy as np
import psycopg
import pytest

import ragd
from ragd import ids
from ragd.config import Settings
from ragd.errors import InvalidRequest
from ragd.ids import sha256_text


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
        assert conn.execute("SELECT count(*) FROM lexical_blocks WHERE tenant_id = 'globex'").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM collections WHERE tenant_id = 'globex'").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM document_filter_values WHERE tenant_id = 'globex'").fetchone()[0] == 0
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        with client.store.tenant("acme") as conn:
            conn.execute("INSERT INTO tenants (tenant_id, name) VALUES ('globex2', 'x')")
    with client.store.tenant("acme") as conn:  # the session itself is the tenant's unprivileged role
        role = client.store.tenant_role("acme")
        assert conn.execute("SELECT session_user, current_user").fetchone() == (role, role)
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


@pytest.mark.parametrize("tenant", ["../etc", "", "acme\n", "acme\r\n", " acme", "a" * 65])
def test_bad_tenant_id_is_refused(client: ragd.Ragd, tenant: str) -> None:
    with pytest.raises(InvalidRequest, match="invalid tenant"):
        client.collection("x", tenant=tenant)


def test_bad_collection_name_is_refused(client: ragd.Ragd) -> None:
    with pytest.raises(InvalidRequest, match="invalid collection name"):
        client.collection("docs\n", tenant="acme")


# -- a hostile tenant with a SQL session of its own (issue 9) ------------------------------------------------


@pytest.fixture
def two_tenants(client: ragd.Ragd, name: str) -> tuple[ragd.Collection, ragd.Collection]:
    a = client.collection(name, tenant="mallory")
    b = client.collection(name, tenant="victim")
    a.ingest(documents=[{"id": "a1", "text": "Mallory notes about rockets."}])
    b.ingest(documents=[{"id": "b1", "text": "Victim quarterly payroll figures for volcanoes."}])
    return a, b


def _visible(conn: psycopg.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT DISTINCT tenant_id FROM chunks UNION SELECT tenant_id FROM documents")}


def _superuser(client: ragd.Ragd) -> str:
    with client.store.admin() as conn:
        return str(conn.execute("SELECT current_user").fetchone()[0])


@pytest.mark.parametrize("switch", [
    "SELECT set_config('ragd.tenant_id', 'victim', false)",
    "SET ragd.tenant_id = 'victim'",
    "RESET ROLE",
    "RESET ALL",
    "SET ROLE NONE",
])
def test_session_settings_cannot_switch_tenant(client: ragd.Ragd, two_tenants: Any, switch: str) -> None:
    with client.store.tenant("mallory") as conn:
        conn.execute(switch)
        assert _visible(conn) == {"mallory"}
        assert conn.execute("SELECT count(*) FROM chunks WHERE tenant_id = 'victim'").fetchone()[0] == 0
        assert conn.execute("SELECT ragd_tenant()").fetchone()[0] == "mallory"


def test_roles_cannot_switch_tenant(client: ragd.Ragd, two_tenants: Any) -> None:
    victim_role = client.store.tenant_role("victim")
    for statement in (f'SET ROLE "{victim_role}"', f'SET SESSION AUTHORIZATION "{victim_role}"',
                      f'SET SESSION AUTHORIZATION "{_superuser(client)}"', "SET ROLE postgres",
                      f"SELECT set_config('role', '{victim_role}', false)"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege), client.store.tenant("mallory") as conn:
            conn.execute(statement)
    with client.store.tenant("mallory") as conn:  # the group role every tenant role belongs to sees nothing
        conn.execute("SET ROLE ragd_app")
        assert _visible(conn) == set()
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO ingestion_runs (run_id, tenant_id, collection_id, status) "
                         "VALUES (gen_random_uuid(), 'victim', %s, 'running')", (two_tenants[1].collection_id,))


def test_functions_and_catalogs_cannot_switch_or_reveal_tenants(client: ragd.Ragd, two_tenants: Any) -> None:
    victim_role = client.store.tenant_role("victim")
    with client.store.tenant("mallory") as conn:  # a temporary table cannot stand in for the role map
        conn.execute("CREATE TEMP TABLE tenant_roles (role_name text, tenant_id text)")
        conn.execute("INSERT INTO pg_temp.tenant_roles VALUES (current_user, 'victim')")
        conn.execute("SET search_path = pg_temp, public")
        assert _visible(conn) == {"mallory"}
        assert conn.execute("SELECT ragd_tenant()").fetchone()[0] == "mallory"
    with client.store.tenant("mallory") as conn:  # the role map shows its own row only
        assert conn.execute("SELECT tenant_id FROM public.tenant_roles").fetchall() == [("mallory",)]
        roles = [r[0] for r in conn.execute("SELECT rolname FROM pg_roles")]
        assert victim_role in roles and not any("victim" in r for r in roles)  # role names reveal no tenant
    for statement in ("SELECT secret FROM ragd_secret",
                      "CREATE FUNCTION public.ragd_tenant() RETURNS text LANGUAGE sql AS $$ SELECT 'victim' $$",
                      "CREATE TABLE public.x (y int)",
                      "ALTER POLICY tenant_isolation ON chunks USING (true)",
                      "ALTER TABLE chunks DISABLE ROW LEVEL SECURITY",
                      "INSERT INTO tenant_roles VALUES (current_user, 'victim')",
                      "UPDATE tenant_roles SET tenant_id = 'victim'"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege), client.store.tenant("mallory") as conn:
            conn.execute(statement)


def test_embedding_cache_cannot_be_planted_or_probed(client: ragd.Ragd, name: str) -> None:
    a = client.collection(name, tenant="mallory")
    b = client.collection(name, tenant="victim")
    text = "Victim merger target is Initech, announced next week."
    search_text = ragd.chunk(text)[0].search_text
    digest = sha256_text(search_text)
    bogus = np.ones(a.dims, dtype=np.float32) / np.sqrt(a.dims)
    with client.store.tenant("mallory") as conn:  # plant a vector under the hash of a text victim will ingest
        conn.execute("INSERT INTO embedding_cache (embed_model, content_hash, embedding) VALUES (%s, %s, %s)",
                     (a.embed_model, digest, bogus))
    report = b.ingest(documents=[{"id": "m1", "text": text}])
    assert report.embedded == 1 and report.cache_hits == 0
    with client.store.tenant("victim") as conn:
        stored = conn.execute("SELECT e.embedding FROM chunk_embeddings e JOIN chunks c USING (chunk_id) "
                              "WHERE c.content LIKE 'Victim merger%'").fetchone()[0]
    expected = b.embedder.embed_documents([search_text])[0]
    assert np.allclose(np.asarray(stored.to_numpy()), expected, atol=1e-6)
    with client.store.tenant("mallory") as conn:  # probing for victim's exact text finds nothing of victim's
        assert conn.execute("SELECT count(*) FROM embedding_cache WHERE content_hash = %s AND tenant_id <> 'mallory'",
                            (digest,)).fetchone()[0] == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO embedding_cache (tenant_id, embed_model, content_hash, embedding) "
                         "VALUES ('victim', %s, 'x', %s)", (a.embed_model, bogus))
    again = b.ingest(documents=[{"id": "m2", "text": text}], duplicates="keep")
    assert again.embedded == 0 and again.cache_hits == 1  # the same tenant never embeds a text twice


def test_ids_of_another_tenant_cannot_be_squatted(client: ragd.Ragd, name: str) -> None:
    a = client.collection(name, tenant="mallory")
    victim_collection = ids.collection_id("victim", name)
    future_doc = ids.doc_id(victim_collection, "b1")
    with client.store.tenant("mallory") as conn:  # a document of mallory's under the id victim's b1 will get
        conn.execute("INSERT INTO documents (doc_id, tenant_id, collection_id, external_id, source_uri, source_type) "
                     "VALUES (%s, 'mallory', %s, 'squat', 'x', 'text')", (future_doc, a.collection_id))
    for statement, error in (  # rows pointing into victim's collection, or creating it first
        ("INSERT INTO lexical_terms (collection_id, term, tenant_id, df) VALUES (%s, 'volcano', 'mallory', 1)",
         psycopg.errors.ForeignKeyViolation),
        ("INSERT INTO lexical_stats (collection_id, tenant_id) VALUES (%s, 'mallory')",
         psycopg.errors.ForeignKeyViolation),
        ("INSERT INTO collections (collection_id, tenant_id, name, embed_model, embed_dims) "
         "VALUES (%s, 'mallory', 'x', 'm', 3)", psycopg.errors.InsufficientPrivilege),
    ):
        with pytest.raises(error), client.store.tenant("mallory") as conn:
            conn.execute(statement, (victim_collection,))
    b = client.collection(name, tenant="victim")
    assert b.collection_id == victim_collection
    report = b.ingest(documents=[{"id": "b1", "text": "Victim volcano survey results."}])
    assert report.count("ingested") == 1, report.failed
    assert [h.external_id for h in b.search("volcano survey", k=3)] == ["b1"]
    with client.store.tenant("mallory") as conn:
        assert conn.execute("SELECT external_id FROM documents WHERE doc_id = %s", (future_doc,)).fetchall() == [
            ("squat",)]


def test_catalog_views_show_nothing_of_another_tenant(client: ragd.Ragd, two_tenants: Any) -> None:
    with client.store.admin() as conn:
        conn.execute("ANALYZE chunks")  # statistics (most common values) cover every tenant's rows
    with client.store.tenant("victim") as busy, client.store.tenant("mallory") as conn:
        busy.execute("SELECT 'victim-secret-query', pg_sleep(0)")  # victim's session, open and visible to the server
        assert conn.execute("SELECT count(*) FROM pg_stats WHERE tablename = 'chunks'").fetchone()[0] == 0
        queries = [r[0] or "" for r in conn.execute("SELECT query FROM pg_stat_activity")]
        assert queries and not any("victim-secret-query" in q for q in queries)
        texts = [r[0] or "" for r in conn.execute("SELECT query FROM pg_stat_activity WHERE usename = current_user")]
        assert any("pg_stat_activity" in q for q in texts)  # its own sessions it does see


def test_many_tenants_keep_a_bounded_number_of_pools(client: ragd.Ragd) -> None:
    from ragd.store.postgres import MAX_TENANT_POOLS

    for i in range(MAX_TENANT_POOLS + 4):
        client.store.tenant_role(f"many-{i}", create=True)  # tenants exist only once created explicitly
        with client.store.tenant(f"many-{i}") as conn:
            assert conn.execute("SELECT ragd_tenant()").fetchone()[0] == f"many-{i}"
    assert client.store.tenant_pools <= MAX_TENANT_POOLS
    with client.store.tenant("many-0") as conn:  # a tenant whose pool was closed logs in again
        assert conn.execute("SELECT ragd_tenant(), current_user = session_user").fetchone() == ("many-0", True)


def test_what_a_session_leaves_behind_is_gone_before_its_connection_serves_again(
        client: ragd.Ragd, two_tenants: Any) -> None:
    with client.store.tenant("mallory") as conn:
        real = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        conn.execute("CREATE TEMP TABLE chunks (tenant_id text)")  # would shadow the real table
        conn.execute("SET search_path = pg_temp")
        conn.execute("SELECT pg_advisory_lock(42)")
    for _ in range(12):  # more sessions than the tenant's pool has connections: each is reused
        with client.store.tenant("mallory") as conn:
            assert conn.execute("SELECT count(*) FROM chunks").fetchone()[0] == real
            assert conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                                "AND pid = pg_backend_pid()").fetchone()[0] == 0


# -- a hostile tenant's locks (issue 29) ----------------------------------------------------------------------

RAGD_TABLES = ("tenants", "collections", "documents", "document_versions", "chunks", "chunk_embeddings",
               "lexical_blocks", "lexical_terms", "lexical_stats", "document_filter_values", "document_minhash",
               "embedding_cache", "ingestion_runs", "ingestion_items", "query_executions",
               "tenant_roles", "api_keys", "ragd_locks", "schema_migrations", "ragd_secret")


@pytest.mark.parametrize("role", ["own", "ragd_app"])
def test_a_tenant_cannot_lock_a_table_against_others(client: ragd.Ragd, two_tenants: Any, role: str) -> None:
    for table in RAGD_TABLES:
        for mode in ("ACCESS EXCLUSIVE", "EXCLUSIVE", "SHARE ROW EXCLUSIVE", "SHARE"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege), client.store.tenant("mallory") as conn:
                if role == "ragd_app":
                    conn.execute("SET ROLE ragd_app")
                conn.execute(f"LOCK TABLE {table} IN {mode} MODE")


def test_what_a_tenant_may_lock_stalls_no_other_tenant(client: ragd.Ragd, two_tenants: Any,
                                                       settings: Any) -> None:
    """Mallory holds every lock its roles allow, and the advisory keys ragd used, while a new process (a store
    whose tenants wait at most 3 s for a lock) serves the victim's first session: search, listing, ingest and
    delete all go through."""
    import threading

    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with client.store.tenant("mallory") as conn:
            for table in RAGD_TABLES:
                with contextlib.suppress(psycopg.errors.InsufficientPrivilege), conn.transaction():
                    conn.execute(f"LOCK TABLE {table} IN ROW EXCLUSIVE MODE")
            for key in ("ragd.tenant_roles", "ragd.migrate"):
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (key,))
            conn.execute("SELECT doc_id FROM documents FOR UPDATE")
            held.set()
            release.wait(60)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(30)
        with ragd.connect(settings=settings.model_copy(update={"db_lock_timeout_s": 3.0})) as other:
            victim = other.collection(two_tenants[1].name, tenant="victim", create=False)
            assert [h.external_id for h in victim.search("payroll volcanoes", k=5)] == ["b1"]
            assert [d["external_id"] for d in victim.documents()] == ["b1"]
            assert victim.ingest(documents=[{"id": "b2", "text": "Victim budget for lava."}]).count("ingested") == 1
            victim.delete("b2")
            assert [d["external_id"] for d in victim.documents()] == ["b1"]
    finally:
        release.set()
        holder.join()


def test_tenant_sessions_run_with_time_limits(client: ragd.Ragd, two_tenants: Any, settings: Any) -> None:
    with ragd.connect(settings=settings.model_copy(update={"db_statement_timeout_s": 0.5,
                                                           "db_lock_timeout_s": 0.25})) as other:
        with other.store.tenant("mallory") as conn:
            assert conn.execute("SELECT current_setting('statement_timeout'), current_setting('lock_timeout'), "
                                "current_setting('idle_in_transaction_session_timeout')").fetchone() == (
                "500ms", "250ms", "500ms")
        with pytest.raises(psycopg.errors.QueryCanceled), other.store.tenant("mallory") as conn:
            conn.execute("SELECT pg_sleep(5)")
        with other.store.tenant("mallory") as conn:  # SET inside a session lasts until its connection is reused
            conn.execute("SET statement_timeout = 0")
        with other.store.tenant("mallory") as conn:
            assert conn.execute("SHOW statement_timeout").fetchone() == ("500ms",)


def test_a_tenant_deletes_through_ragd_only_its_own_rows(client: ragd.Ragd, two_tenants: Any) -> None:
    with client.store.tenant("victim") as conn:
        victim_doc = conn.execute("SELECT doc_id FROM documents").fetchone()[0]
    with client.store.tenant("mallory") as conn:
        for statement in ("DELETE FROM chunks", "DELETE FROM documents", "TRUNCATE chunks",
                          "SELECT * FROM ragd_locks", "UPDATE chunks SET tenant_id = tenant_id"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
                conn.execute(statement)
        conn.execute("SELECT ragd_delete_document(%s)", (victim_doc,))
        conn.execute("SET ROLE ragd_app")
        conn.execute("SELECT ragd_delete_document(%s)", (victim_doc,))
    assert [d["external_id"] for d in two_tenants[1].documents()] == ["b1"]
    assert [h.external_id for h in two_tenants[1].search("payroll volcanoes", k=5)] == ["b1"]


def test_band_lookups_find_only_the_callers_own_signatures(client: ragd.Ragd, two_tenants: Any) -> None:
    """ragd_band_candidates reads the band index as its owner (row security cannot serve the array operator): given
    the victim's collection and the victim's own band keys, mallory's session finds nothing, and the victim's finds
    its document; mallory's near-duplicate of the victim's text is not a duplicate of anything of the victim's."""
    mallory, victim = two_tenants
    with client.store.admin() as conn:
        keys = conn.execute("SELECT bands FROM document_minhash WHERE tenant_id = 'victim' AND collection_id = %s",
                            (victim.collection_id,)).fetchone()[0]
    lookup = "SELECT doc_version_id FROM ragd_band_candidates(%s, %s::integer[], %s::bigint[])"
    with client.store.tenant("mallory") as conn:
        assert conn.execute(lookup, (victim.collection_id, [0] * len(keys), keys)).fetchall() == []
        assert conn.execute(lookup, (mallory.collection_id, [0] * len(keys), keys)).fetchall() == []
    with client.store.tenant("victim") as conn:
        assert len(conn.execute(lookup, (victim.collection_id, [0] * len(keys), keys)).fetchall()) == 1
    copy = mallory.ingest(documents=[{"id": "a2", "text": "Victim quarterly payroll figures for volcanoes!"}])
    assert copy.items[0].status == "ingested" and mallory.run(str(copy.run_id))["stats"]["near_duplicates"] == []


HAND_BLOCK = """
INSERT INTO lexical_blocks (collection_id, term, first_ord, tenant_id, last_ord, n, max_tf, min_len, ords, tfs, lens)
VALUES (%(c)s, %(term)s, -5, %(t)s, 2147483647, 3, 1, 1,
        int4send(-5) || int4send(0) || int4send(2147483647),
        int2send(0::int2) || int2send(-3::int2) || int2send(1::int2),
        int4send(1) || int4send(-9) || int4send(1))"""


def test_hand_written_blocks_fail_no_search_and_reach_no_other_tenant(client: ragd.Ragd, two_tenants: Any) -> None:
    """A tenant may write BM25 blocks for itself through its SQL session, with any numbers in them (a negative or
    huge ordinal, a zero or negative tf or length): its own searches still answer, without allocating by the
    ordinal's size, and nothing it writes or replaces reaches another tenant's collection."""
    mallory, victim = two_tenants
    before = [(h.external_id, h.lexical_score) for h in victim.search("payroll volcanoes", k=5, fusion="lexical")]
    counts = "SELECT term, df, posted, partial FROM lexical_terms WHERE collection_id = %s ORDER BY term"
    with client.store.tenant("victim") as conn:
        victims_terms = conn.execute(counts, (victim.collection_id,)).fetchall()
    with client.store.tenant("mallory") as conn:
        for c in (mallory.collection_id, victim.collection_id):
            conn.execute(HAND_BLOCK, {"c": c, "t": "mallory", "term": "payrol"})
            conn.execute(HAND_BLOCK, {"c": c, "t": "mallory", "term": "rocket"})
        with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():  # row security
            conn.execute(HAND_BLOCK, {"c": victim.collection_id, "t": "victim", "term": "volcano"})
        # a compaction's replacement for the victim's collection deletes only the caller's own rows
        conn.execute("SELECT ragd_replace_blocks(%s, ARRAY['payrol', 'volcano'], ARRAY[-5, 0], '{}', '{}', '{}', "
                     "'{}', '{}', '{}', '{}', '{}', '{}', ARRAY['payrol', 'volcano'], ARRAY[0, 0], ARRAY[9, 9])",
                     (victim.collection_id,))
    assert [(h.external_id, h.lexical_score) for h in victim.search("payroll volcanoes", k=5,
                                                                  fusion="lexical")] == before
    with client.store.tenant("victim") as conn:
        assert conn.execute("SELECT count(*) FROM lexical_blocks WHERE tenant_id <> 'victim'").fetchone() == (0,)
        assert conn.execute(counts, (victim.collection_id,)).fetchall() == victims_terms  # nor its terms' counts
        assert conn.execute("SELECT sum(n) FROM lexical_blocks WHERE term = 'volcano' AND collection_id = %s",
                            (victim.collection_id,)).fetchone() == (1,)
    hits = mallory.search("rockets payroll", k=5, fusion="lexical")
    assert [h.external_id for h in hits] == ["a1"] and all(np.isfinite(h.lexical_score) for h in hits)
    assert victim.compact()["terms"] == 0  # nothing of mallory's is the victim's to compact


def test_reading_as_an_unknown_tenant_creates_nothing(client: ragd.Ragd, base_url: str, name: str) -> None:
    from ragd.errors import TenantNotFound

    tenant = "never-" + name

    def roles() -> int:
        with psycopg.connect(base_url) as conn:
            return int(conn.execute("SELECT count(*) FROM pg_roles WHERE rolname LIKE 'ragd_t_%'").fetchone()[0])

    before = roles()
    with pytest.raises(TenantNotFound), client.store.tenant(tenant):
        pass
    assert client.collections(tenant) == []
    with pytest.raises(ragd.errors.CollectionNotFound):
        client.collection("x", tenant=tenant, create=False)
    assert roles() == before
    client.collection("x", tenant=tenant)  # creating a collection creates its tenant
    assert roles() == before + 1


def test_the_job_queue_and_queued_bytes_are_closed_to_tenants(client: ragd.Ragd, two_tenants: Any,
                                                               tmp_path: Any) -> None:
    from ragd import jobs
    from tests.test_replicas import _probe_tenant_session

    (tmp_path / "queued.md").write_text("# Queued\n\nA file of the victim's, its bytes in the queue.\n")
    queued = jobs.enqueue(two_tenants[1], [tmp_path / "queued.md"])
    try:
        _probe_tenant_session(client.store, "mallory", "victim")
    finally:
        jobs.cancel(client, str(queued.run_id), tenant="victim")


def test_concurrent_first_sessions_repair_a_changed_login_once(settings: Settings) -> None:
    """A tenant whose role needs repair (here its connection limit changed by hand), met first by many requests
    at once in a fresh process: each waits for one repair, none fails with PostgreSQL's "tuple concurrently
    updated" (seen as a 500 on an upload racing a poll)."""
    from concurrent.futures import ThreadPoolExecutor

    from ragd.store.postgres import Store

    tenant = "race-" + uuid.uuid4().hex[:8]
    setup = ragd.connect(settings=settings)
    role = setup.store.tenant_role(tenant, create=True)
    setup.close()
    for attempt in range(3):  # a race: three fresh processes' worth of chances to lose it
        with psycopg.connect(settings.database_url, autocommit=True) as conn:
            conn.execute(f'ALTER ROLE "{role}" CONNECTION LIMIT {7 + attempt}')
        store = Store.open(settings, settings.database_url)

        def session(_: int, store: Store = store) -> str:
            with store.tenant(tenant) as conn:
                return str(conn.execute("SELECT ragd_tenant()").fetchone()[0])

        try:
            with ThreadPoolExecutor(8) as pool:
                assert list(pool.map(session, range(8))) == [tenant] * 8
        finally:
            store.close()
