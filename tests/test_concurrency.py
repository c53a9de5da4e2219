"""Several processes share one embedded server: concurrent ingests into one collection stay consistent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import ragd

from .conftest import REPO
from .test_ingest import lexical_stats_consistent


def test_parallel_ingest_processes(client: ragd.Ragd, name: str, tmp_path: Path,
                                   cli_env: dict[str, str]) -> None:
    client.collection(name)  # created once, so both processes find it
    for part in range(3):
        folder = tmp_path / f"part{part}"
        folder.mkdir()
        for i in range(40):
            shared = "common words about maintenance schedules and audit trails"
            (folder / f"doc{i}.txt").write_text(f"{shared}. Part {part} document {i} mentions token{part}x{i}.")
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGD_")} | cli_env
    procs = [subprocess.Popen([sys.executable, "-m", "ragd.cli", "ingest", str(tmp_path / f"part{p}"), "-c", name,
                               "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                              cwd=REPO) for p in range(3)]
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        reports.append(json.loads(out))
    assert [r["counts"]["ingested"] for r in reports] == [40, 40, 40]
    col = client.collection(name)
    assert len(col.documents(limit=1000)) == 120
    lexical_stats_consistent(client, col)
    assert col.search("token2x17", k=1, fusion="lexical")[0].external_id.endswith("part2/doc17.txt")
