-- Where a run's time went (issue 31): each item records the seconds its extraction took (reading the file into
-- documents and chunks; a file of several documents shares its time among them) and the seconds storing it took
-- (embedding and writing; a batch's time shared among its items by their chunks). Runs recorded before have none.
ALTER TABLE ingestion_items ADD COLUMN extract_seconds double precision,
                            ADD COLUMN store_seconds double precision;
