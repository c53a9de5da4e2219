"""Render the benchmark page (docs/benchmarks.md) and the README's headline figures from bench/results/*.json.

    python bench/render.py           # write them
    python bench/render.py --check   # exit 1 when either differs from what the results give (CI's docs step)

Every figure on the page is one a bench printed and saved (bench/_results.py), with the machine, commit and date
it was measured on; a bench that was never run here says so and gives its command."""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results"
PAGE = REPO / "docs" / "benchmarks.md"
README = REPO / "README.md"
BEGIN, END = "<!-- figures: rendered by bench/render.py -->", "<!-- /figures -->"

# The benches in the page's order: (results name, script, the command a reader runs).
BENCHES = [
    ("ingest_throughput", "ingest_throughput.py", "python bench/ingest_throughput.py"),
    ("search_latency", "search_latency.py", "python bench/search_latency.py"),
    ("hnsw_recall", "hnsw_recall.py", "python bench/hnsw_recall.py"),
    ("ask_latency", "ask_latency.py", "python bench/ask_latency.py"),
    ("extraction_quality", "extraction_quality.py", "python bench/extraction_quality.py"),
    ("tables", "tables.py", "python bench/tables.py"),
    ("tablegen", "tablegen.py", "python bench/tablegen.py"),
    ("load", "load.py", "python bench/load.py"),
    ("workers", "workers.py", "python bench/workers.py"),
    ("hostile_tenant", "hostile_tenant.py", "python bench/hostile_tenant.py"),
    ("web", "web.py", "python bench/web.py"),
    ("remote", "remote.py", "python bench/remote.py"),
    ("scale", "scale.py", "python bench/scale.py --home DIR"),
    ("peers", "peers/run.py", "python bench/peers/run.py"),
    ("paraphrase", "paraphrase.py", "python bench/paraphrase.py --home DIR"),
]
COMMANDS = {name: command for name, _, command in BENCHES}

# The README's headline figures: (what, results name, table, the row's {key: value} to pick, the figure's key, unit).
HEADLINES = [
    ("Ingest, SciFact abstracts (bge-small-en)", "ingest_throughput", "corpora", {"embedder": "bge-small-en"},
     "docs_per_s", "documents/s"),
    ("Ingest, a 300-page PDF, one worker", "ingest_throughput", "long pdf", {}, "ingest_1_worker_pages_per_s",
     "pages/s"),
    ("Hybrid search p50, 100k documents", "search_latency", "latency",
     {"documents": 100000, "plan": "hybrid weighted"}, "p50_ms", "ms"),
    ("HNSW recall@10 (ef_search 40)", "hnsw_recall", "recall", {"ef_search": 40}, "recall_at_10", ""),
    ("Ask p50, extractive", "ask_latency", "ask", {}, "p50_ms", "ms"),
    ("PDF tables, ICDAR 2013 cell accuracy", "tables", "tables", {"set": "icdar2013 all", "system": "ragd"},
     "cell_acc", ""),
    ("REST search, 2 workers, 8 clients", "load", "load", {"route": "search", "workers": 2, "clients": 8},
     "rps", "req/s"),
    ("Remote client's search overhead p50", "remote", "overhead", {"call": "search"}, "overhead_p50_ms", "ms"),
]


def _doc(script: Path) -> str:
    """A bench's docstring, its first paragraph: what it measures."""
    try:
        text = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""
    except (OSError, SyntaxError):
        return ""
    return " ".join(text.split("\n\n", 1)[0].split())


def _number(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return "" if value is None else ("yes" if value else "no")
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        size = abs(value)
        return (f"{value:,.0f}" if size >= 100 else f"{value:.1f}" if size >= 10 else f"{value:.2f}" if size >= 1
                else f"{value:.3f}")
    return str(value).replace("|", "\\|")


def _table(rows: list[dict[str, Any]]) -> list[str]:
    columns: list[str] = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    out = ["| " + " | ".join(c.replace("_", " ") for c in columns) + " |",
           "| " + " | ".join("---" for _ in columns) + " |"]
    out += ["| " + " | ".join(_number(row.get(c)) for c in columns) + " |" for row in rows]
    return out


def _load() -> dict[str, dict[str, Any]]:
    found = {}
    for path in sorted(RESULTS.glob("*.json")):
        found[path.stem] = json.loads(path.read_text(encoding="utf-8"))
    return found


def _measured(record: dict[str, Any]) -> str:
    m = record.get("machine") or {}
    commit = (record.get("commit") or "unknown")[:10] + (" (with changes)" if record.get("dirty") else "")
    return (f"Measured {record.get('date', '?')[:10]} at commit `{commit}` on {m.get('cores', '?')} cores of "
            f"{m.get('cpu', '?')}, {m.get('memory_gib', '?')} GiB, Python {m.get('python', '?')}: "
            f"`{record.get('command', '')}`.")


def page(results: dict[str, dict[str, Any]]) -> str:
    lines = ["# Benchmarks", "",
             "Rendered by `python bench/render.py` from `bench/results/*.json`, which each bench writes when it runs: "
             "every figure here is one a bench printed, with the machine, commit and date it was measured on. The "
             "machine is shared and noisy: compare figures within one run (a bench's own tables), not across runs. "
             "How each design choice was measured over time is in the [measurement log](history.md).", ""]
    for name, script, command in BENCHES:
        lines += [f"## {name.replace('_', ' ').capitalize()}", "", _doc(HERE / script), ""]
        record = results.get(name)
        if record is None:
            lines += [f"Not run on this machine yet: `{command}`.", ""]
            continue
        lines += [_measured(record), ""]
        for title, rows in record.get("tables", {}).items():
            if rows:
                lines += [f"**{title}**", "", *_table(rows), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def headlines(results: dict[str, dict[str, Any]]) -> str:
    lines = ["| Figure | Value | Measured |", "| --- | --- | --- |"]
    for what, name, table, match, key, unit in HEADLINES:
        record = results.get(name, {})
        rows = [r for r in record.get("tables", {}).get(table, []) if all(r.get(k) == v for k, v in match.items())]
        if not rows or key not in rows[0]:
            lines.append(f"| {what} | not measured here yet | `{COMMANDS[name]}` |")
            continue
        value = f"{_number(rows[0][key])} {unit}".strip()
        lines.append(f"| {what} | {value} | {record.get('date', '?')[:10]}, {record['machine'].get('cores', '?')} "
                     f"cores ([details](docs/benchmarks.md)) |")
    return "\n".join(lines) + "\n"



def readme(text: str, block: str) -> str:
    if BEGIN not in text or END not in text:
        raise SystemExit(f"README.md has no {BEGIN} ... {END} block")
    head, rest = text.split(BEGIN, 1)
    return head + BEGIN + "\n" + block + END + rest.split(END, 1)[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true", help="fail when the page or the README is not up to date")
    args = parser.parse_args()
    results = _load()
    wanted = {PAGE: page(results), README: readme(README.read_text(encoding="utf-8"), headlines(results))}
    stale = [path for path, text in wanted.items() if not path.exists() or path.read_text(encoding="utf-8") != text]
    if args.check:
        if stale:
            print("not rendered from bench/results: " + ", ".join(str(p.relative_to(REPO)) for p in stale)
                  + " (run: python bench/render.py)", file=sys.stderr)
            sys.exit(1)
        return
    for path in stale:
        path.write_text(wanted[path], encoding="utf-8")
        print(f"wrote {path.relative_to(REPO)}")


if __name__ == "__main__":
    main()
