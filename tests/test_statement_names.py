"""Each module-level name of ragd's SQL statements is bound once, over all the modules of `store/queries/`: a second
definition silently replaces the first for every caller (queries.ACTIVE_CHUNKS, bound again for the statistics'
chunk count, broke `ragd conformance`), and two modules binding one name would hide one of them behind the
package's re-export."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import ragd.store.queries


def test_no_statement_name_is_bound_twice() -> None:
    names: Counter[str] = Counter()
    modules = sorted(Path(ragd.store.queries.__file__).parent.glob("*.py"))
    for path in modules:
        if path.name == "__init__.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names.update(target.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
                     for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
                     if isinstance(target, ast.Name))
        names.update(node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)))
    assert [name for name, n in names.items() if n > 1] == []
    assert len(modules) > 5 and len(names) > 50  # the modules' statements were read


def test_every_statement_is_named_by_the_package() -> None:
    public = {name for name in vars(ragd.store.queries) if not name.startswith("_") and name.isupper()}
    assert set(ragd.store.queries.__all__) >= public
    for name in ("INSERT_RUN", "CLAIM_IDEMPOTENCY_KEY", "ORIGINAL_INSERT", "SCHEMA_VERSION", "LEXICAL_BLOCKS"):
        assert isinstance(getattr(ragd.store.queries, name), str)
