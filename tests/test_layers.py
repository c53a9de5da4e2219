"""Imports point down only: the ingestion pipeline, the store and retrieval know nothing of the engine above them;
the job layer uses the library and nothing uses the job layer but the adapters (CLI, REST, MCP)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "ragd"
ADAPTERS = {"ragd.cli", "ragd.server", "ragd.mcpserver"}
# (a module's name prefix, what it may never import, even for type checking)
RULES = [
    ("ragd.ingest", {"ragd.engine", "ragd.jobs", *ADAPTERS}),
    ("ragd.store", {"ragd.engine", "ragd.jobs", "ragd.ingest", *ADAPTERS}),
    ("ragd.retrieve", {"ragd.engine", "ragd.jobs", "ragd.ingest", *ADAPTERS}),
    ("ragd.engine", {"ragd.jobs", *ADAPTERS}),
    ("ragd.jobs", ADAPTERS),
]


def _module(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, module: str) -> set[str]:
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            found |= {base} | {f"{base}.{alias.name}" for alias in node.names}
    return found


def test_imports_point_down_only() -> None:
    broken = []
    for path in sorted(SRC.rglob("*.py")):
        module = _module(path)
        for prefix, banned in RULES:
            if module == prefix or module.startswith(prefix + "."):
                for name in sorted(_imports(path, module)):
                    if any(name == b or name.startswith(b + ".") for b in banned):
                        broken.append(f"{module} imports {name}")
    assert broken == []


def test_the_check_sees_relative_imports() -> None:
    path = SRC / "ingest" / "pipeline.py"
    assert "ragd.ingest.bounds" in _imports(path, "ragd.ingest.pipeline")
    assert "ragd.store.queries" in _imports(path, "ragd.ingest.pipeline")
