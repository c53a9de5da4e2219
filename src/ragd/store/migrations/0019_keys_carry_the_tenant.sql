-- Citus-ready keys (issue 32, docs/scale.md): every primary key and unique constraint of a table distributed by
-- tenant_id holds tenant_id, so each tenant's rows can live on one shard and every key is checked there. The
-- four that did not get it (the ids they hold were already unique on their own: uuids, and terms per collection).
ALTER TABLE collections DROP CONSTRAINT collections_pkey;  -- collections_tenant_key, UNIQUE (collection_id, tenant_id)
ALTER TABLE lexical_stats DROP CONSTRAINT lexical_stats_pkey, ADD PRIMARY KEY (collection_id, tenant_id);
ALTER TABLE lexical_terms DROP CONSTRAINT lexical_terms_pkey, ADD PRIMARY KEY (collection_id, term, tenant_id);
ALTER TABLE documents DROP CONSTRAINT documents_collection_id_external_id_key,
    ADD CONSTRAINT documents_external_id UNIQUE (collection_id, external_id, tenant_id);
