"""`ragd` command line: each command parses, makes one library call, formats the result, maps errors.

One module per command group; `base` holds the group itself (`main`) and what every command shares."""

from __future__ import annotations

from . import ask, db, documents, evaluate, ingest, keys, runs, serve
from .base import main

__all__ = ["ask", "db", "documents", "evaluate", "ingest", "keys", "main", "runs", "serve"]
