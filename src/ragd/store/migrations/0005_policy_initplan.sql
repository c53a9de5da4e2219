-- Every tenant policy compared tenant_id with `current_setting(...)` on each row: a stable function is not
-- folded, so a scan of 80k postings looked up the setting 80k times (14% of a long BM25 query at 100k chunks).
-- Written as a scalar subquery it becomes an InitPlan, evaluated once per statement; it can still serve as an
-- index key.
DO $$
DECLARE
    t text;
BEGIN
    FOR t IN SELECT tablename FROM pg_policies
             WHERE schemaname = current_schema() AND policyname = 'tenant_isolation' ORDER BY tablename LOOP
        EXECUTE format(
            'ALTER POLICY tenant_isolation ON %I USING (tenant_id = (SELECT current_setting(''ragd.tenant_id'', true))) '
            'WITH CHECK (tenant_id = (SELECT current_setting(''ragd.tenant_id'', true)))', t);
    END LOOP;
END
$$;
