"""Original files, kept once per tenant by content hash (store/originals.py)."""

from __future__ import annotations

ORIGINAL_INSERT = """
INSERT INTO originals (tenant_id, sha256, size, content) VALUES (%(tenant_id)s, %(sha256)s, %(size)s, %(content)s)
ON CONFLICT DO NOTHING"""
ORIGINAL_KEPT = "SELECT 1 FROM originals WHERE tenant_id = %(tenant_id)s AND sha256 = %(sha256)s"
ORIGINAL_SELECT = "SELECT size, content FROM originals WHERE tenant_id = %(tenant_id)s AND sha256 = %(sha256)s"
ORIGINAL_FORGET = "SELECT ragd_forget_originals(%(shas)s)"
