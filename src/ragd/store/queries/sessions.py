"""Sessions, tenant roles and migrations: what a pooled connection runs before it serves again, the roles
that keep tenants apart, the schema's versions, a search's shared snapshot and a replica's lag."""

from __future__ import annotations

from psycopg import sql

# Run on a pooled connection before it serves again: whatever SQL in the last session left behind is undone.
RESET_SESSION = ("RESET ALL", "RESET ROLE", "DISCARD TEMP", "UNLISTEN *", "SELECT pg_advisory_unlock_all()")
READ_SECRET = "SELECT secret FROM ragd_secret"
# Creating tenant roles is serialised across processes by a row of ragd_locks, which no tenant can read or lock
# (an advisory lock's key can be taken by any role: a tenant holding it stalled every new process's tenants).
# Role names are keyed by each database's own secret, so two databases of a cluster never create the same role.
TENANT_ROLE_LOCK = "SELECT 1 FROM ragd_locks WHERE name = 'tenant_roles' FOR UPDATE"
ROLE_EXISTS = "SELECT 1 FROM pg_roles WHERE rolname = %(role)s"
TENANT_MAPPED = "SELECT 1 FROM tenant_roles WHERE tenant_id = %(tenant_id)s AND role_name = %(role)s"
MAP_TENANT_ROLE = """
INSERT INTO tenant_roles (role_name, tenant_id) VALUES (%(role)s, %(tenant_id)s) ON CONFLICT DO NOTHING"""
CURRENT_TENANT = "SELECT ragd_tenant()"
# A tenant login's check: its attributes, and whether settings are stored for it (by ALTER ROLE ... SET).
# Read by the login being checked: its role is the session user (a stored `role` setting makes current_user another
# role at login), with what is stored for it, for every database and for this one.
SET_LOCAL_LOCK_TIMEOUT = "SELECT set_config('lock_timeout', %s, true)"
LOGIN_CHECK = """
SELECT r.rolsuper, r.rolbypassrls, r.rolconnlimit,
       (SELECT s.setconfig FROM pg_db_role_setting s WHERE s.setrole = r.oid AND s.setdatabase = 0),
       (SELECT s.setconfig FROM pg_db_role_setting s WHERE s.setrole = r.oid AND s.setdatabase = d.oid)
FROM pg_roles r, pg_database d WHERE r.rolname = session_user AND d.datname = current_database()"""


def repair_tenant_role(role: str, password: str, database: str, connection_limit: int) -> list[sql.Composed]:
    """A tenant role's login as ragd made it: its password, its connection limit, no stored settings (its
    attributes a tenant cannot change, and the login check refuses a role with more than a tenant's). The limits
    ragd stores for it are set afterwards (tenant_role_limits)."""
    name = sql.Identifier(role)
    return [sql.SQL("ALTER ROLE {role} LOGIN PASSWORD {password} CONNECTION LIMIT {limit}").format(
                role=name, password=sql.Literal(password), limit=sql.Literal(connection_limit)),
            sql.SQL("ALTER ROLE {role} RESET ALL").format(role=name),
            sql.SQL("ALTER ROLE {role} IN DATABASE {db} RESET ALL").format(role=name, db=sql.Identifier(database))]


def tenant_role_limits(role: str, temp_file_limit_kb: int) -> sql.Composed:
    """The setting stored for a tenant role that its sessions cannot change (only a superuser, or a role granted SET
    on it, may set temp_file_limit): the temporary files one of its statements may write."""
    return sql.SQL("ALTER ROLE {role} SET temp_file_limit = {kb}").format(role=sql.Identifier(role),
                                                                       kb=sql.Literal(temp_file_limit_kb))


def create_tenant_role(role: str, password: str, connection_limit: int) -> sql.Composed:
    """A login role for one tenant: no privilege of its own beyond ragd_app's, row-level security applies, at most
    `connection_limit` sessions at once."""
    return sql.SQL(
        "CREATE ROLE {role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS NOREPLICATION "
        "CONNECTION LIMIT {limit} PASSWORD {password} IN ROLE ragd_app"
    ).format(role=sql.Identifier(role), password=sql.Literal(password), limit=sql.Literal(connection_limit))


CREATE_SCHEMA_MIGRATIONS = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)"""
APPLIED_MIGRATIONS = "SELECT version FROM schema_migrations ORDER BY version"
RECORD_MIGRATION = "INSERT INTO schema_migrations (version, name) VALUES (%(version)s, %(name)s)"
SCHEMA_VERSION = "SELECT max(version) FROM schema_migrations"
# Migrations are serialised by a lock on their own table, which no tenant role may read or lock.
MIGRATION_LOCK = "LOCK TABLE schema_migrations IN SHARE ROW EXCLUSIVE MODE"


# -- read replicas -----------------------------------------------------------------------------------

REPLICA_STATE = """
SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn(),
       extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8"""


# A search's second session sees the first's snapshot (reading_pair): both REPEATABLE READ, set before any query.
REPEATABLE_READ = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"
EXPORT_SNAPSHOT = "SELECT pg_export_snapshot()"


def imported_snapshot(snapshot: str) -> sql.Composed:
    """The statements that make a transaction see an exported snapshot (one message: no parameters)."""
    return sql.SQL("{}; SET TRANSACTION SNAPSHOT {}").format(sql.SQL(REPEATABLE_READ), sql.Literal(snapshot))
