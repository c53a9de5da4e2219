"""Each module-level name of ragd's SQL statements is bound once: a second definition silently replaces the first
for every caller (queries.ACTIVE_CHUNKS, bound again for the statistics' chunk count, broke `ragd conformance`)."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import ragd.store.queries


def test_no_statement_name_is_bound_twice() -> None:
    tree = ast.parse(Path(ragd.store.queries.__file__).read_text(encoding="utf-8"))
    names = Counter(target.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
                    for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
                    if isinstance(target, ast.Name))
    names.update(node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)))
    assert [name for name, n in names.items() if n > 1] == []
    assert len(names) > 50  # the module's statements were read
