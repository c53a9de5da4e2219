"""Each bench's figures as data: `bench/results/<bench>.json`, with the machine, the commit and the date they were
measured on, and the command that printed them. `bench/render.py` makes the benchmark page's tables (and the
README's headline figures) from these files, so a figure in the docs is always one a command printed."""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
REPO = Path(__file__).resolve().parent.parent


def machine() -> dict[str, Any]:
    """What the figures were measured on: the CPU and its cores available to this process, memory, OS, Python."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory_gib = None
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        memory_gib = round(pages * size / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu": cpu, "cores": cores, "memory_gib": memory_gib, "os": f"{platform.system()} {platform.release()}",
            "python": platform.python_version()}


def commit() -> tuple[str | None, bool]:
    """The commit measured, and whether the working tree differed from it."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True,
                              timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, check=True, timeout=10).stdout.strip() != ""
    except (OSError, subprocess.SubprocessError):
        return None, False
    return head, dirty


class Results:
    """A bench run's figures: tables of rows (one dict per row, the same keys in each row of a table), written
    to bench/results/<bench>.json by save()."""

    def __init__(self, bench: str, config: Mapping[str, Any] | None = None) -> None:
        self.bench = bench
        self.config = {k: (str(v) if isinstance(v, Path) else v) for k, v in dict(config or {}).items()}
        self.tables: dict[str, list[dict[str, Any]]] = {}

    def row(self, table: str, **figures: Any) -> None:
        """One row of a table, its figures in the order given (numbers as measured; rounding is the page's)."""
        self.tables.setdefault(table, []).append(figures)

    def save(self, folder: Path = RESULTS) -> Path | None:
        """Write the figures (not when RAGD_BENCH_SAVE=0: a quality gate's run is not a measurement to keep)."""
        if os.environ.get("RAGD_BENCH_SAVE", "1") == "0":
            return None
        head, dirty = commit()
        record = {"bench": self.bench, "command": " ".join(["python", *sys.argv]),
                  "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                  "commit": head, "dirty": dirty, "machine": machine(), "config": self.config,
                  "tables": self.tables}
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{self.bench}.json"
        path.write_text(json.dumps(record, indent=1, default=str) + "\n", encoding="utf-8")
        print(f"figures written to {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")
        return path
