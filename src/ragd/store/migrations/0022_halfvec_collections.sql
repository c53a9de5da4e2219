-- A collection's vectors can be indexed at half precision (issue 34): `halfvec` builds its HNSW index over
-- embedding::halfvec(dims) (2 bytes a dimension instead of 4, so the graph that must stay in memory is about half
-- the size) and walks it with the query at half precision; the rows keep their float4 vectors, so exact scans and
-- every returned score stay at full precision. Chosen when the collection is created and pinned like its model:
-- no tenant may change it (ragd_app's UPDATE on collections is its generation only).
ALTER TABLE collections ADD COLUMN vector_type text NOT NULL DEFAULT 'vector'
    CHECK (vector_type IN ('vector', 'halfvec'));
