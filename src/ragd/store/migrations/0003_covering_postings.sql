-- Row-level security adds `tenant_id = current_setting(...)` to every scan of lexical_postings. With tenant_id
-- outside the indexes, each posting cost a heap fetch; carrying it in both indexes lets BM25 run on
-- index-only scans (measured: 85k buffer reads for one query at 100k chunks before this change).
DROP INDEX IF EXISTS lexical_postings_term;
CREATE INDEX lexical_postings_term ON lexical_postings (collection_id, term) INCLUDE (chunk_id, tf, doc_len, tenant_id);
ALTER TABLE lexical_postings DROP CONSTRAINT lexical_postings_pkey;
ALTER TABLE lexical_postings ADD PRIMARY KEY (chunk_id, term) INCLUDE (tf, doc_len, tenant_id);
