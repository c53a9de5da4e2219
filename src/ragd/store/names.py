"""Names the store checks and makes: tenant ids and collection names (the schema's CHECK rule), each tenant's
PostgreSQL role (a keyed hash, so pg_roles tells no tenant who else exists), its login password and the settings
every tenant session is held to."""

from __future__ import annotations

import hmac
import re

from ..config import Settings
from ..errors import InvalidRequest

TENANT_ROLE_PREFIX = "ragd_t_"


def check_name(kind: str, value: str, max_length: int) -> str:
    """Tenant ids and collection names: the same rule as the schema's CHECK constraints."""
    pattern = rf"[A-Za-z0-9][A-Za-z0-9_.-]{{0,{max_length - 1}}}"
    if not isinstance(value, str) or not re.fullmatch(pattern, value):
        raise InvalidRequest(
            f"invalid {kind} {value!r}: use 1-{max_length} letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return value


def check_tenant(tenant_id: str) -> str:
    return check_name("tenant id", tenant_id, 64)


def tenant_role(secret: str, tenant_id: str) -> str:
    """The PostgreSQL role of a tenant: a keyed hash, so other tenants cannot tell from pg_roles who exists."""
    digest = hmac.new(secret.encode(), b"role\x1f" + tenant_id.encode(), "sha256").hexdigest()
    return TENANT_ROLE_PREFIX + digest[:40]


def role_password(secret: str, role: str) -> str:
    return hmac.new(secret.encode(), b"login\x1f" + role.encode(), "sha256").hexdigest()


def tenant_settings(schema: str, settings: Settings) -> str:
    """What every tenant connection is set to when it opens and before it serves again, whatever its role's
    stored settings say (`ALTER ROLE CURRENT_USER SET ...` in a tenant's session changes that tenant's next
    logins, and RESET ALL goes back to them): its own role, ragd's schema with temporary tables searched last, and
    the limits that keep one tenant's SQL from holding locks or a backend for long."""
    values = {"search_path": f'"{schema}", pg_temp', "statement_timeout": f"{settings.db_statement_timeout_s:g}s",
              "lock_timeout": f"{settings.db_lock_timeout_s:g}s",
              "idle_in_transaction_session_timeout": f"{settings.db_statement_timeout_s:g}s",
              "default_transaction_read_only": "off", "default_transaction_isolation": "read committed",
              "row_security": "on", "TimeZone": "UTC", "jit": "off"}
    return "SET ROLE NONE; SELECT " + ", ".join(f"set_config('{k}', '{v}', false)" for k, v in values.items())
