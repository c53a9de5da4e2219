-- Every ingest batch adds to the document frequency of thousands of lexical_terms rows. With full pages each update
-- wrote the new row version to another page and a new entry into the primary key; with room left on the page it is
-- a heap-only update (df is not indexed), and page pruning reuses the space. Pages written from now on keep it.
ALTER TABLE lexical_terms SET (fillfactor = 70);
