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


def test_sigkill_mid_run_leaves_nothing_half_active_and_a_rerun_completes(
        client: ragd.Ragd, name: str, tmp_path: Path, cli_env: dict[str, str]) -> None:
    import os
    import random
    import signal
    import time

    vocabulary = [f"{a}{b}" for a in ("ka", "lo", "mi", "nu", "pe", "ra", "si", "tu") for b in ("ban", "cor", "del",
                  "fin", "gor", "hul", "jin", "kel", "lum", "mor", "nel", "pix")]
    folder = tmp_path / "docs"
    folder.mkdir()
    total = 1200
    for i in range(total):
        rng = random.Random(i)
        words = " ".join(rng.choice(vocabulary) for _ in range(120))
        (folder / f"d{i:04d}.md").write_text(f"# Note {i}\n\nmarker{i}x {words}.\n")
    col = client.collection(name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGD_")} | cli_env
    proc = subprocess.Popen([sys.executable, "-m", "ragd.cli", "ingest", str(folder), "-c", name, "--json"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=REPO)

    def stored() -> int:
        with client.store.tenant(col.tenant) as conn:
            row = conn.execute("SELECT count(*) FROM documents WHERE collection_id = %s", (col.collection_id,))
            return int(row.fetchone()[0])  # type: ignore[index]

    deadline = time.monotonic() + 120
    while stored() < 64 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    before = stored()
    assert 64 <= before < total, before  # killed in the middle of the run

    with client.store.tenant(col.tenant) as conn:
        half = conn.execute(
            "SELECT count(*) FROM document_versions v JOIN documents d USING (doc_id) "
            "WHERE d.collection_id = %s AND v.is_active AND v.chunk_count <> "
            "(SELECT count(*) FROM chunks c WHERE c.doc_version_id = v.doc_version_id AND c.is_active)",
            (col.collection_id,)).fetchone()
        unembedded = conn.execute(
            "SELECT count(*) FROM chunks c WHERE c.collection_id = %s AND c.is_active AND NOT EXISTS "
            "(SELECT 1 FROM chunk_embeddings e WHERE e.chunk_id = c.chunk_id)", (col.collection_id,)).fetchone()
        versionless = conn.execute(
            "SELECT count(*) FROM documents d WHERE d.collection_id = %s AND NOT EXISTS "
            "(SELECT 1 FROM document_versions v WHERE v.doc_id = d.doc_id AND v.is_active)",
            (col.collection_id,)).fetchone()
        killed = conn.execute("SELECT run_id, status FROM ingestion_runs WHERE collection_id = %s",
                              (col.collection_id,)).fetchall()
    assert half == (0,) and unembedded == (0,) and versionless == (0,)
    lexical_stats_consistent(client, col)
    assert [status for _, status in killed] == ["running"]

    rerun = subprocess.run([sys.executable, "-m", "ragd.cli", "ingest", str(folder), "-c", name, "--json"],
                           capture_output=True, text=True, env=env, cwd=REPO, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    counts = json.loads(rerun.stdout)["counts"]
    assert counts["unchanged"] == before and counts["ingested"] == total - before
    assert stored() == total
    lexical_stats_consistent(client, col)
    first = client.run(str(killed[0][0]))
    assert first["status"] == "failed" and first["error"].startswith("interrupted")
    assert col.search(f"marker{total - 1}x", k=1, fusion="lexical")[0].external_id.endswith(f"d{total - 1:04d}.md")
