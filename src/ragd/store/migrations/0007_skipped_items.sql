-- An input left out on purpose (a link pointing outside the folder being ingested) is recorded as 'skipped',
-- with its code and reason, not as a failure.
ALTER TABLE ingestion_items DROP CONSTRAINT ingestion_items_status_check,
    ADD CONSTRAINT ingestion_items_status_check
        CHECK (status IN ('ingested', 'updated', 'unchanged', 'duplicate', 'skipped', 'failed'));
