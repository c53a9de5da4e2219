"""Imports point down only: the ingestion pipeline, the store and retrieval know nothing of the engine above them;
the job layer uses the library and nothing uses the job layer but the adapters (CLI, REST, MCP). Ingestion's rooms
(walk, read, the worker processes, write, and the pipeline that runs a file through them) are layered too, and no
module of ragd imports, even lazily inside a function, a module that imports it back (no circle)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "ragd"
ADAPTERS = {"ragd.cli", "ragd.server", "ragd.mcpserver"}
ROOMS = ["ragd.ingest.walk", "ragd.ingest.read", "ragd.ingest.worker", "ragd.ingest.write", "ragd.ingest.pipeline"]
# (a module's name prefix, what it may never import, even for type checking)
RULES = [
    ("ragd.ingest", {"ragd.engine", "ragd.jobs", *ADAPTERS}),
    ("ragd.store", {"ragd.engine", "ragd.jobs", "ragd.ingest", *ADAPTERS}),
    ("ragd.retrieve", {"ragd.engine", "ragd.jobs", "ragd.ingest", *ADAPTERS}),
    ("ragd.answer", {"ragd.engine", "ragd.jobs", "ragd.ingest", *ADAPTERS}),
    ("ragd.engine", {"ragd.jobs", *ADAPTERS}),
    ("ragd.jobs", ADAPTERS),
    ("ragd.remote", {"ragd.engine", "ragd.jobs", *ADAPTERS}),  # the client knows the server only over HTTP
    ("ragd.integrations", {"ragd.engine", "ragd.store", "ragd.jobs", *ADAPTERS}),
    ("ragd.ingest.state", set(ROOMS)),  # what the rooms share knows none of them
    ("ragd.ingest.extract", set(ROOMS)),  # the formats know nothing of who reads them
    *((room, set(ROOMS[n + 1:])) for n, room in enumerate(ROOMS)),  # a room knows only the rooms before it
    ("ragd.ingest.write", {"ragd.ingest.worker", "ragd.ingest.read"}),  # writing never reads a file
]


def _module(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(path): path for path in sorted(SRC.rglob("*.py"))}


def _imports(path: Path, module: str) -> set[str]:
    """Every name the module imports, anywhere in it: `from . import x` names the module x when x is one, else
    the package."""
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
            found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names}
    return found


def _graph() -> dict[str, set[str]]:
    """Each ragd module and the ragd modules it imports (a name resolved to the longest module it names)."""
    graph = {}
    for module, path in MODULES.items():
        edges = set()
        for name in _imports(path, module):
            while name not in MODULES and "." in name:
                name = name.rsplit(".", 1)[0]
            if name in MODULES and name != module:
                edges.add(name)
        graph[module] = edges
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(sorted(group))
    return groups


def test_imports_point_down_only() -> None:
    broken = []
    for module, path in MODULES.items():
        for prefix, banned in RULES:
            if module == prefix or module.startswith(prefix + "."):
                for name in sorted(_imports(path, module)):
                    if any(name == b or name.startswith(b + ".") for b in banned):
                        broken.append(f"{module} imports {name}")
    assert broken == []


def test_the_metrics_import_nothing_of_ragd() -> None:
    """Every layer counts into ragd.metrics, so it may know none of them."""
    assert _graph()["ragd.metrics"] == set()


def test_no_module_imports_one_that_imports_it_back() -> None:
    assert _circles(_graph()) == []


def test_the_circle_check_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _circles(graph) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_the_check_sees_relative_imports() -> None:
    path = SRC / "ingest" / "pipeline.py"
    assert "ragd.ingest.chunk" in _imports(path, "ragd.ingest.pipeline")
    assert "ragd.store.queries" in _imports(path, "ragd.ingest.pipeline")
    assert "ragd.ingest.write" in _graph()["ragd.ingest.pipeline"]


MAX_MODULE_LINES = 600  # issue 58: a module a newcomer can read whole


def test_no_module_is_longer_than_a_newcomer_reads() -> None:
    long = {module: n for module, path in MODULES.items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert long == {}


def test_the_rest_app_is_only_assembled_in_create_app() -> None:
    import inspect

    from ragd.server import create_app

    assert len(inspect.getsource(create_app).splitlines()) < 60
