"""The schema's numbered migrations (store/migrations/NNNN_name.sql, the job queue's tables included as the
pinned procrastinate creates them) and the version this ragd needs."""

from __future__ import annotations

import re
from importlib import resources


def migrations() -> list[tuple[int, str, str]]:
    """(version, name, sql) of every numbered migration, in order."""
    found = []
    for entry in resources.files("ragd.store").joinpath("migrations").iterdir():
        match = re.match(r"^(\d{4})_(\w+)\.sql$", entry.name)
        if match:
            text = entry.read_text(encoding="utf-8")
            found.append((int(match.group(1)), match.group(2), text.replace(_PROCRASTINATE, _procrastinate_schema())))
    return sorted(found)


_PROCRASTINATE = "-- include: procrastinate schema\n"


def _procrastinate_schema() -> str:
    """The job queue's tables and functions as the installed procrastinate creates them (its release is pinned:
    a new one brings its migrations here as a numbered migration of ragd's)."""
    from procrastinate.schema import SchemaManager

    return SchemaManager.get_schema() + "\n"


def latest_migration() -> int:
    """The schema version this ragd needs: its highest migration."""
    return max(version for version, _, _ in migrations())
