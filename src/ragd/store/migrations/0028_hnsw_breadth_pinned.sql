-- A collection's HNSW graph is built and grown at the breadth it was created with (issue 34): ef_construction, the
-- candidates each insert weighs when it links a vector into the graph (pgvector: 4 to 1000, at least 2 m; m is
-- 16). Chosen when the collection is created and pinned like its model and vector type: every insert and every
-- rebuild of its index uses it, and no tenant may change it (ragd_app's UPDATE on collections is its generation
-- only). Collections that exist already were built at pgvector's default, 64.
ALTER TABLE collections ADD COLUMN hnsw_ef_construction integer NOT NULL DEFAULT 64
    CHECK (hnsw_ef_construction BETWEEN 32 AND 1000);
