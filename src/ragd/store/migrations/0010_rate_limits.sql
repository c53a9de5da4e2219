-- Requests per API key per minute (SPEC section 7: 429 with Retry-After), counted where every server process
-- sees the same number and a restart of ragd forgets nothing. One row per key and wall-clock minute; rows older
-- than a few minutes are deleted as a key opens a new one. Unlogged: a PostgreSQL crash resets the counters,
-- which only ever lets requests through. Read and written by the privileged session only (like api_keys).
CREATE UNLOGGED TABLE rate_windows (
    key_id       uuid NOT NULL REFERENCES api_keys ON DELETE CASCADE,
    window_start timestamptz NOT NULL,
    requests     integer NOT NULL,
    PRIMARY KEY (key_id, window_start)
);
REVOKE ALL ON rate_windows FROM PUBLIC;
