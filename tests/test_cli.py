"""The `ragd` command line, run as a real subprocess against the session's embedded server."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from ragd.store.embedded import SharedMemory
from ragd.store.schema import migrations

from .conftest import SAMPLES, run_cli

LATEST = max(v for v, _, _ in migrations())


def ok(result):  # type: ignore[no-untyped-def]
    assert result.returncode == 0, result.stderr + result.stdout
    return result


def test_ingest_search_documents_runs(cli_env: dict[str, str], name: str, tmp_path: Path) -> None:
    report = json.loads(ok(run_cli(["ingest", str(SAMPLES), "-c", name, "--tags", "demo,hr", "--json"],
                                   cli_env)).stdout)
    assert report["counts"]["ingested"] == 7 and report["counts"]["failed"] == 0
    out = json.loads(ok(run_cli(["search", "per diem London", "-c", name, "--k", "3", "--json"], cli_env)).stdout)
    results = out["results"]
    assert len(results) == 3
    assert set(results[0]) >= {"chunk_id", "doc_id", "chunk_index", "score", "content"}
    assert "London" in results[0]["content"] and results[0]["chunk_type"] == "table"
    filtered = json.loads(ok(run_cli(["search", "leave", "-c", name, "--filter", "tag=hr", "--filter",
                                      "meta.topic=leave", "--json"], cli_env)).stdout)["results"]
    assert [r["external_id"] for r in filtered] == ["faq-003"]
    explained = json.loads(ok(run_cli(["search", "per diem", "-c", name, "--explain", "--json"], cli_env)).stdout)
    assert [leg["leg"].split(",")[0] for leg in explained["legs"]] == ["vector (hnsw", "lexical (bm25"]
    # PostgreSQL's own plan (on 7 documents it may rightly scan instead of using HNSW: test_retrieve checks the
    # index on a collection large enough to need it)
    assert "Execution Time" in explained["legs"][0]["plan"] and "chunk_embeddings" in explained["legs"][0]["sql"]
    assert "lexical_blocks" in explained["legs"][1]["sql"]
    human = ok(run_cli(["search", "lost laptop", "-c", name, "-k", "2"], cli_env)).stdout
    assert "security.txt" in human and "results in" in human
    again = ok(run_cli(["ingest", str(SAMPLES), "-c", name, "--tags", "demo,hr"], cli_env)).stdout
    assert "unchanged" in again
    compacted = json.loads(ok(run_cli(["compact", "-c", name, "--json"], cli_env)).stdout)
    assert compacted["terms"] == 0 and compacted["rows_before"] == compacted["rows_after"] == 0  # one batch
    assert "compacted 0 terms" in ok(run_cli(["compact", "-c", name], cli_env)).stdout
    listing = json.loads(ok(run_cli(["documents", "list", "-c", name, "--json"], cli_env)).stdout)["documents"]
    assert len(listing) == 7
    shown = json.loads(ok(run_cli(["documents", "show", "faq-001", "-c", name, "--json"], cli_env)).stdout)
    assert shown["title"] == "Remote work" and shown["versions"][0]["is_active"] is True
    ok(run_cli(["documents", "delete", "faq-001", "-c", name], cli_env))
    gone = run_cli(["documents", "show", "faq-001", "-c", name], cli_env)
    assert gone.returncode == 4 and "no document 'faq-001'" in gone.stderr
    runs = json.loads(ok(run_cli(["runs", "list", "-c", name, "--json"], cli_env)).stdout)["runs"]
    assert runs[0]["collection"] == name and runs[0]["status"] == "succeeded"
    first = [r for r in runs if r["collection"] == name][-1]  # the list is the tenant's, other tests' runs too
    run = json.loads(ok(run_cli(["runs", "show", str(first["run_id"])[:8], "--json"], cli_env)).stdout)
    assert len(run["items"]) == 7
    cols = json.loads(ok(run_cli(["collections", "list", "--json"], cli_env)).stdout)["collections"]
    assert any(c["name"] == name and c["embed_model"] == "hash-v1-384" for c in cols)


def test_bad_input_exit_codes_and_messages(cli_env: dict[str, str], name: str, tmp_path: Path) -> None:
    unknown = run_cli(["search", "anything", "-c", "no-such-collection"], cli_env)
    assert unknown.returncode == 4 and "collection 'no-such-collection' does not exist" in unknown.stderr
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "junk.dat").write_bytes(b"\x00\x01\x02binary\xff" * 50)
    (tmp_path / "fine.txt").write_text("Fine content about pumps.")
    mixed = run_cli(["ingest", str(tmp_path), "-c", name], cli_env)
    assert mixed.returncode == 1
    assert "empty.txt is empty" in mixed.stdout and "binary content" in mixed.stdout
    assert json.loads(ok(run_cli(["search", "pumps", "-c", name, "--json"], cli_env)).stdout)["results"]
    wrong_dims = run_cli(["ingest", str(tmp_path / "fine.txt"), "-c", name, "--embedder", "hash:256"], cli_env)
    assert wrong_dims.returncode == 2 and "pinned to embedding model hash-v1-384 (384 dims)" in wrong_dims.stderr
    bad_k = run_cli(["search", "pumps", "-c", name, "--k", "0"], cli_env)
    assert bad_k.returncode == 2
    bad_filter = run_cli(["search", "pumps", "-c", name, "--filter", "color=red"], cli_env)
    assert bad_filter.returncode == 2 and "unknown key 'color'" in bad_filter.stderr
    down = run_cli(["search", "pumps", "-c", name],
                   {**cli_env, "RAGD_DATABASE_URL": "postgresql://ragd@127.0.0.1:1/ragd?connect_timeout=2"})
    assert down.returncode == 3 and "cannot connect to PostgreSQL" in down.stderr
    # nothing stored was damaged by any of it
    assert json.loads(ok(run_cli(["search", "pumps", "-c", name, "--json"], cli_env)).stdout)["results"]


def test_db_commands_and_migrate(cli_env: dict[str, str]) -> None:
    status = json.loads(ok(run_cli(["db", "status", "--json"], cli_env)).stdout)
    assert status["running"] is True or status["external"] is True
    url = ok(run_cli(["db", "url"], cli_env)).stdout.strip()
    assert url.startswith("postgresql://")
    assert f"schema version {LATEST}" in ok(run_cli(["migrate"], cli_env)).stdout


def test_db_start_stop_on_its_own_home(tmp_path: Path) -> None:
    env = {"RAGD_HOME": str(tmp_path / "home")}
    assert run_cli(["db", "status"], env).returncode == 1
    assert "running" in ok(run_cli(["db", "start"], env)).stdout
    try:
        text = ok(run_cli(["db", "status"], env)).stdout
        assert text.startswith("running")
        assert f"schema version {LATEST}" in ok(run_cli(["migrate"], env)).stdout
        # what the server's shared memory is made of, as the server itself says
        status = json.loads(ok(run_cli(["db", "status", "--json"], env)).stdout)
        with psycopg.connect(ok(run_cli(["db", "url"], env)).stdout.strip(), autocommit=True) as conn:
            shown = dict(conn.execute(
                "SELECT name, setting FROM pg_settings WHERE name = ANY(%s)",
                (["shared_buffers", "block_size", "huge_pages_status", "shared_memory_size_in_huge_pages"],)))
        assert status["shared_buffers_mb"] == int(shown["shared_buffers"]) * int(shown["block_size"]) >> 20
        assert status["huge_pages"] == shown["huge_pages_status"]
        needed = int(shown["shared_memory_size_in_huge_pages"])  # (-1: the platform has none)
        assert status["huge_pages_needed"] == (needed if needed >= 0 else None)
        assert f"shared buffers {status['shared_buffers_mb']} MB, huge pages {status['huge_pages']}" in text
        advised = status["huge_pages"] == "off" and status["shared_buffers_mb"] >= 1024
        assert (f"vm.nr_hugepages={status['huge_pages_needed']}" in text) is advised
    finally:
        assert "stopped" in ok(run_cli(["db", "stop"], env)).stdout
    assert run_cli(["db", "status"], env).returncode == 1


def test_huge_pages_are_advised_only_for_large_buffers_on_small_pages() -> None:
    hint = SharedMemory(buffers_mb=6016, huge_pages="off", huge_pages_needed=3107).hint()
    assert hint is not None and "sysctl -w vm.nr_hugepages=3107" in hint and "ragd db stop" in hint
    assert SharedMemory(buffers_mb=6016, huge_pages="on", huge_pages_needed=3107).hint() is None
    assert SharedMemory(buffers_mb=512, huge_pages="off", huge_pages_needed=265).hint() is None  # small: no matter
    assert SharedMemory(buffers_mb=6016, huge_pages="off", huge_pages_needed=None).hint() is None  # none to reserve
    assert SharedMemory(buffers_mb=6016, huge_pages="unknown", huge_pages_needed=3107).hint() is None


@pytest.mark.model
def test_end_to_end_with_the_real_onnx_model(tmp_path: Path) -> None:
    """The default path: embedded server + bge-small-en, ingesting the bundled samples."""
    env = {"RAGD_HOME": str(tmp_path / "home")}
    try:
        report = json.loads(ok(run_cli(["ingest", str(SAMPLES), "-c", "demo", "--json"], env)).stdout)
        assert report["counts"]["ingested"] == 7
        out = json.loads(ok(run_cli(["search", "How long can parents take Elternzeit?", "-c", "demo", "--json"],
                                    env)).stdout)["results"]
        assert out[0]["heading_path"] == ["Parental Leave Policy", "Germany"]
        vec = json.loads(ok(run_cli(["search", "What should I do if my laptop is stolen?", "-c", "demo",
                                     "--fusion", "vector", "--json"], env)).stdout)["results"]
        assert vec[0]["external_id"].endswith("security.txt")
        cols = json.loads(ok(run_cli(["collections", "list", "--json"], env)).stdout)["collections"]
        assert cols[0]["embed_model"] == "bge-small-en" and cols[0]["embed_dims"] == 384
    finally:
        run_cli(["db", "stop"], env)


def test_ingest_shows_each_failed_item_and_reports_progress_without_a_terminal(cli_env: dict[str, str], name: str,
                                                                               tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "good.txt").write_text("Heat pumps move heat from outside air into the house.")
    (folder / "broken.pdf").write_bytes(b"%PDF-1.7\n this is not a PDF body")
    (folder / "empty.txt").write_text("   \n")
    env = {**cli_env, "RAGD_PROGRESS_INTERVAL_S": "0"}
    as_json = run_cli(["ingest", str(folder), "-c", name, "--json"], env)
    assert as_json.returncode == 1
    items = json.loads(as_json.stdout)["items"]
    assert sorted((Path(i["source_uri"]).name, i["error_code"]) for i in items if i["status"] == "failed") == [
        ("broken.pdf", "corrupt_document"), ("empty.txt", "empty_document")]
    assert any(line.startswith("ragd: ingest ") for line in as_json.stderr.splitlines()), as_json.stderr
    human = run_cli(["ingest", str(folder), "-c", name], cli_env)
    assert human.returncode == 1
    failed = [line.strip() for line in human.stdout.splitlines() if line.strip().startswith("failed")]
    assert len(failed) == 2 and any("broken.pdf [corrupt_document]: " in line for line in failed), human.stdout
    assert not [line for line in human.stderr.splitlines() if line.startswith("ragd: ")]


def test_a_file_of_many_records_reports_progress_while_it_is_read(cli_env: dict[str, str], name: str,
                                                                  tmp_path: Path) -> None:
    """One JSONL file of 1,200 records is one item of the run: progress names the records read so far, so a long
    ingest before an eval's questions is not silent."""
    records = tmp_path / "corpus.jsonl"
    records.write_text("".join(json.dumps({"_id": f"r{i}", "text": f"Record {i} is about heat pump model {i}."})
                               + "\n" for i in range(1200)))
    result = run_cli(["ingest", str(records), "-c", name, "--json", "--embedder", "hash"],
                     {**cli_env, "RAGD_PROGRESS_INTERVAL_S": "0"})
    assert result.returncode == 0, result.stderr
    notes = [line for line in result.stderr.splitlines() if line.startswith("ragd: ingest 0/1 ")]
    assert any(line.endswith("; corpus.jsonl: 500 records") for line in notes), result.stderr
    assert any(line.endswith("; corpus.jsonl: 1000 records") for line in notes), result.stderr
    assert json.loads(result.stdout)["counts"]["ingested"] == 1200


def test_runs_show_tells_where_the_time_went(cli_env: dict[str, str], name: str, tmp_path: Path) -> None:
    """Each item records its extraction and storing seconds; `runs show` lists the slowest items, slowest first."""
    import shutil

    from .conftest import DATA

    folder = tmp_path / "mixed"
    folder.mkdir()
    shutil.copy(DATA / "docs" / "synthetic" / "long_report.pdf", folder / "b_report.pdf")
    (folder / "a_notes.txt").write_text("Badges open doors.")
    (folder / "c_records.jsonl").write_text("".join(json.dumps({"id": f"r{i}", "text": f"Record {i} text."}) + "\n"
                                                    for i in range(4)))
    report = json.loads(ok(run_cli(["ingest", str(folder), "-c", name, "--json"], cli_env)).stdout)
    assert report["counts"]["ingested"] == 6
    run = json.loads(ok(run_cli(["runs", "show", report["run_id"], "--json"], cli_env)).stdout)
    items = {i["external_id"].rsplit("/", 1)[-1]: i for i in run["items"]}
    assert all(i["extract_seconds"] > 0 and i["store_seconds"] > 0 for i in items.values()), items
    pdf = items["b_report.pdf"]
    assert pdf["extract_seconds"] > 5 * max(i["extract_seconds"] for k, i in items.items() if k != "b_report.pdf")
    human = ok(run_cli(["runs", "show", report["run_id"]], cli_env)).stdout
    slowest = human[human.index("slowest 5 of 6 items"):]
    assert slowest.index("b_report.pdf") < min(slowest.index(f"r{i}") for i in range(4) if f"r{i}" in slowest)
