-- A tenant's SQL cannot block another tenant (issue 29).
--
-- 1. No table-level UPDATE, DELETE, TRUNCATE or MAINTAIN for ragd_app. Any one of them lets a role LOCK the
--    table in every mode (PostgreSQL's LockTableAclCheck asks for the table's own privileges, never its
--    columns'), and `LOCK TABLE chunks IN ACCESS EXCLUSIVE MODE` held in one tenant's transaction stalled every
--    tenant's searches and listings. UPDATE is granted per column instead (every column but tenant_id, which no
--    tenant changes): the same statements run, and a role holding only column privileges and INSERT can lock a
--    table in ROW EXCLUSIVE mode at most, which no read and no other tenant's write waits for.
-- 2. Deletes run through the SECURITY DEFINER functions below, which delete the calling login's rows only: the
--    tenant is the one mapped to session_user (a tenant session logs in as its tenant's role, which SET ROLE,
--    RESET ROLE or set_config cannot change), never a value a caller passes.
-- 3. ragd's own locks are rows of ragd_locks, which no tenant can read, lock or change, instead of advisory locks, which
--    any role may take on any key (and pg_locks shows every key held).
DO $$
DECLARE
    t record;
BEGIN
    FOR t IN SELECT c.oid::regclass AS tab, c.oid FROM pg_class c
             WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')
               AND (has_table_privilege('ragd_app', c.oid, 'UPDATE') OR has_table_privilege('ragd_app', c.oid, 'DELETE'))
             ORDER BY c.relname LOOP
        EXECUTE format('REVOKE UPDATE, DELETE, TRUNCATE ON %s FROM ragd_app', t.tab);
        EXECUTE format('GRANT UPDATE (%s) ON %s TO ragd_app',
                       (SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) FROM pg_attribute a
                        WHERE a.attrelid = t.oid AND a.attnum > 0 AND NOT a.attisdropped
                          AND a.attname <> 'tenant_id'), t.tab);
    END LOOP;
END
$$;
-- (PostgreSQL 17 and later: MAINTAIN, which ragd never granted, stays ungranted; REVOKE UPDATE above also removed
-- the column grant on collections.generation.)
GRANT UPDATE (generation) ON collections TO ragd_app;

-- The tenant of the session's login, for the definer functions (inside them current_user is the owner).
DO $$
BEGIN
    EXECUTE format(
        'CREATE FUNCTION %1$I.ragd_session_tenant() RETURNS text LANGUAGE sql STABLE '
        'SET search_path = pg_catalog, %1$I, pg_temp '
        'AS ''SELECT tenant_id FROM %1$I.tenant_roles WHERE role_name = session_user::text''',
        current_schema());
END
$$;
REVOKE ALL ON FUNCTION ragd_session_tenant() FROM PUBLIC;

CREATE FUNCTION ragd_delete_filter_values(doc_ids uuid[]) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
    DELETE FROM document_filter_values WHERE doc_id = ANY(doc_ids) AND tenant_id = ragd_session_tenant()
$$;

-- A retired version's postings, and the terms no active chunk of the collection holds any more.
CREATE FUNCTION ragd_delete_postings(versions uuid[], collection uuid) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
    DELETE FROM lexical_postings p USING chunks c
    WHERE c.chunk_id = p.chunk_id AND c.doc_version_id = ANY(versions)
      AND c.tenant_id = ragd_session_tenant() AND p.tenant_id = ragd_session_tenant();
    DELETE FROM lexical_terms WHERE df <= 0 AND collection_id = collection AND tenant_id = ragd_session_tenant();
$$;

CREATE FUNCTION ragd_delete_bands(collection uuid, versions uuid[], keys bigint[]) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
    DELETE FROM document_minhash_bands b USING unnest(versions, keys) AS x(v, k)
    WHERE b.tenant_id = ragd_session_tenant() AND b.collection_id = collection AND b.band_key = x.k
      AND b.doc_version_id = x.v
$$;

-- A document and, by the foreign keys' cascades, its versions, chunks, embeddings and filter values.
CREATE FUNCTION ragd_delete_document(doc uuid) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
    DELETE FROM documents WHERE doc_id = doc AND tenant_id = ragd_session_tenant()
$$;

DO $$
DECLARE
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['ragd_delete_filter_values(uuid[])', 'ragd_delete_postings(uuid[], uuid)',
                             'ragd_delete_bands(uuid, uuid[], bigint[])', 'ragd_delete_document(uuid)'] LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO ragd_app', f);
    END LOOP;
END
$$;

CREATE TABLE ragd_locks (
    name         text PRIMARY KEY,
    holder_pid   integer,      -- a claim held across statements (an index build): the backend holding it
    holder_start timestamptz   -- and its start, so a claim outlives no backend, even one whose pid is reused
);
REVOKE ALL ON ragd_locks FROM PUBLIC;
INSERT INTO ragd_locks (name) VALUES ('tenant_roles');
