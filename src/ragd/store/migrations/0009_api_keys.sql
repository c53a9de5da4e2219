-- API keys (SPEC section 7): each belongs to one tenant and is stored as the sha256 of the whole key (a key holds
-- 256 random bits, so no salt or slow hash is needed). The name and the visible prefix help operators tell keys
-- apart; the key itself is shown once, when it is made. Only the privileged session reads or writes this table
-- (0006), so no tenant session can list, plant or probe keys.
ALTER TABLE api_keys
    ADD COLUMN name         text NOT NULL DEFAULT '' CHECK (length(name) <= 200),
    ADD COLUMN prefix       text NOT NULL DEFAULT '',
    ADD COLUMN last_used_at timestamptz;
CREATE INDEX api_keys_tenant ON api_keys (tenant_id, created_at);
