"""Evaluation: metrics against hand-computed cases and trec_eval (pytrec_eval), and `ragd eval` end to end."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
import pytrec_eval

import ragd
from ragd.config import Settings
from ragd.eval import metrics
from ragd.eval.datasets import load_beir, load_questions
from ragd.eval.runner import plan_overrides

from .conftest import run_cli


def test_metrics_hand_computed() -> None:
    qrels = {"a": 1, "b": 2, "c": 1}
    run = ["x", "b", "y", "a", "z"]
    assert metrics.hit_at(run, qrels, 1) == 0.0 and metrics.hit_at(run, qrels, 2) == 1.0
    assert metrics.mrr_at(run, qrels, 10) == 0.5
    assert metrics.mrr_at(run, qrels, 1) == 0.0
    assert metrics.recall_at(run, qrels, 4) == pytest.approx(2 / 3)
    assert metrics.precision_at(run, qrels, 5) == pytest.approx(2 / 5)
    dcg = 2 / math.log2(3) + 1 / math.log2(5)
    idcg = 2 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)
    assert metrics.ndcg_at(run, qrels, 10) == pytest.approx(dcg / idcg)
    assert metrics.ndcg_at([], qrels, 10) == 0.0
    perfect = metrics.evaluate({"q": ["b", "a", "c"]}, {"q": qrels, "unjudged": {}})
    assert perfect["ndcg@10"] == pytest.approx(1.0) and perfect["mrr@10"] == 1.0


def test_metrics_match_trec_eval_on_a_random_run() -> None:
    rng = random.Random(7)
    docs = [f"d{i}" for i in range(300)]
    qrels = {f"q{q}": {d: rng.choice([1, 1, 2]) for d in rng.sample(docs, rng.randint(1, 6))} for q in range(60)}
    runs = {q: rng.sample(docs, 120) for q in qrels}
    for q in list(runs)[:20]:  # make some rankings good
        runs[q] = list(qrels[q]) + [d for d in runs[q] if d not in qrels[q]]
    ours = metrics.evaluate(runs, qrels)
    trec_run = {q: {d: float(len(ranked) - i) for i, d in enumerate(ranked)} for q, ranked in runs.items()}
    measures = {"ndcg_cut.10", "recip_rank", "recall.10", "recall.50", "recall.100", "P.10"}
    per_query = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(trec_run)

    def mean(key: str) -> float:
        return sum(v[key] for v in per_query.values()) / len(per_query)

    assert ours["ndcg@10"] == pytest.approx(mean("ndcg_cut_10"), abs=1e-9)
    assert ours["recall@10"] == pytest.approx(mean("recall_10"), abs=1e-9)
    assert ours["recall@50"] == pytest.approx(mean("recall_50"), abs=1e-9)
    assert ours["recall@100"] == pytest.approx(mean("recall_100"), abs=1e-9)
    assert ours["precision@10"] == pytest.approx(mean("P_10"), abs=1e-9)
    # trec_eval's recip_rank has no cut-off; with MRR@10 they agree wherever the first hit is in the top 10
    capped = {q: r for q, r in runs.items() if any(d in qrels[q] for d in r[:10])}
    ours_capped = metrics.evaluate(capped, {q: qrels[q] for q in capped})
    theirs = sum(per_query[q]["recip_rank"] for q in capped) / len(capped)
    assert ours_capped["mrr@10"] == pytest.approx(theirs, abs=1e-9)


def write_beir(root: Path) -> Path:
    (root / "qrels").mkdir(parents=True)
    docs = {
        "d1": ("Heat pumps", "Heat pumps move heat from outside air into the house."),
        "d2": ("Solar panels", "Photovoltaic panels turn sunlight into electricity."),
        "d3": ("Wind turbines", "Wind turbines convert the wind's kinetic energy."),
        "d4": ("Insulation", "Good insulation keeps heat inside during winter."),
    }
    with open(root / "corpus.jsonl", "w") as fh:
        for did, (title, text) in docs.items():
            fh.write(json.dumps({"_id": did, "title": title, "text": text, "metadata": {}}) + "\n")
    with open(root / "queries.jsonl", "w") as fh:
        for qid, text in [("q1", "how do heat pumps work"), ("q2", "sunlight electricity"),
                          ("q3", "wind energy"), ("q9", "not judged")]:
            fh.write(json.dumps({"_id": qid, "text": text}) + "\n")
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\nq3\td3\t1\n")
    return root


def test_beir_and_questions_loaders(tmp_path: Path) -> None:
    beir = load_beir(write_beir(tmp_path / "tiny"))
    assert list(beir.queries) == ["q1", "q2", "q3"] and beir.qrels["q2"] == {"d2": 1}
    questions = tmp_path / "questions.jsonl"
    questions.write_text('{"id": "a", "question": "q?", "relevant_doc_ids": ["x"]}\n'
                         '{"question": "unanswerable?", "answerable": false}\n')
    qs = load_questions(questions)
    assert qs.queries == {"a": "q?", "2": "unanswerable?"} and qs.qrels == {"a": {"x": 1}}
    assert qs.answerable == {"a": True, "2": False}
    assert plan_overrides("weighted:0.3") == {"fusion": "weighted", "keyword_weight": 0.3,
                                              "semantic_weight": pytest.approx(0.7)}


def test_ragd_eval_end_to_end(tmp_path: Path, cli_env: dict[str, str]) -> None:
    root = write_beir(tmp_path / "tiny")
    out = tmp_path / "out"
    args = ["eval", str(root), "--plans", "lexical,vector,rrf,weighted", "--out", str(out), "--json"]
    first = run_cli(args, cli_env)
    assert first.returncode == 0, first.stderr
    result = json.loads(first.stdout)
    assert set(result["plans"]) == {"lexical", "vector", "rrf", "weighted"}
    lexical = result["plans"]["lexical"]
    assert lexical["ndcg@10"] == pytest.approx(1.0) and lexical["recall@100"] == 1.0
    assert set(lexical["latency_ms"]) == {"p50", "p95"} and "lexical" in lexical["stages_ms"]
    assert result["ingest"]["ingested"] == 4 and result["ingest"]["embedded"] == 4
    assert {p.name for p in out.iterdir()} >= {"results.json", "results.csv", "per_query.csv"}
    second = json.loads(run_cli(args, cli_env).stdout)
    assert second["ingest"]["unchanged"] == 4 and second["ingest"]["embedded"] == 0  # nothing embedded again
    assert second["plans"]["lexical"]["ndcg@10"] == lexical["ndcg@10"]
    gate = run_cli(["eval", str(root), "--plans", "lexical", "--fail-under", "lexical:ndcg@10=1.01"], cli_env)
    assert gate.returncode == 5 and "quality gate failed: lexical ndcg@10 = 1.0000 < 1.01" in gate.stderr
    human = run_cli(["eval", str(root), "--plans", "rrf", "--save"], cli_env)
    assert human.returncode == 0 and "ndcg@10" in human.stdout and "latency per stage" in human.stdout
    assert "kept as evaluation" in human.stdout
    saved = json.loads(run_cli(["eval", str(root), "--plans", "lexical", "--save", "--json"], cli_env).stdout)
    with ragd.connect(settings=Settings(home=Path(cli_env["RAGD_HOME"]), embedder="hash",
                                        database_url=cli_env.get("RAGD_DATABASE_URL"))) as client:
        kept = {str(e["eval_id"]): e for e in client.evaluations()}
    figures = kept[saved["eval_id"]]["metrics"]["lexical"]
    assert figures["ndcg@10"] == pytest.approx(1.0) and figures["latency_p95_ms"] > 0
    assert kept[saved["eval_id"]]["dataset"] == "tiny" and kept[saved["eval_id"]]["kind"] == "retrieval"


def test_squad_loader_and_head(tmp_path: Path) -> None:
    from ragd.eval.datasets import load

    squad = tmp_path / "squad.json"
    squad.write_text(json.dumps({"version": "v2.0", "data": [{"title": "Solar_power", "paragraphs": [
        {"context": "Panels convert light.", "qas": [
            {"id": "a1", "question": "What do panels convert?", "answers": [{"text": "light"}], "is_impossible": False},
            {"id": "a2", "question": "Who invented panels?", "answers": [], "is_impossible": True}]},
        {"context": "Inverters change DC to AC.", "qas": [
            {"id": "b1", "question": "What changes DC to AC?", "answers": [{"text": "Inverters"}]}]}]}]}))
    ds = load(squad)
    assert [d["id"] for d in ds.documents] == ["Solar_power/0", "Solar_power/1"]
    assert ds.documents[0]["title"] == "Solar power"
    assert ds.qrels == {"a1": {"Solar_power/0": 1}, "b1": {"Solar_power/1": 1}}
    assert ds.answerable == {"a1": True, "a2": False, "b1": True}
    first = ds.head(2)
    assert list(first.queries) == ["a1", "a2"] and list(first.qrels) == ["a1"]


def test_questions_file_against_an_existing_collection(client, name: str, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                       cli_env: dict[str, str]) -> None:
    client.collection(name).ingest(documents=[
        {"id": "leave", "title": "Parental leave", "text": "Parents in Germany may take Elternzeit for three years."},
        {"id": "travel", "title": "Travel", "text": "Book flights through the travel portal."},
        {"id": "security", "title": "Security", "text": "Report a stolen laptop within one hour."}])
    questions = tmp_path / "questions.jsonl"
    questions.write_text("\n".join(json.dumps(q) for q in [
        {"id": "q1", "question": "How long is Elternzeit?", "relevant_doc_ids": ["leave"]},
        {"id": "q2", "question": "my laptop was stolen", "relevant_doc_ids": ["security"]},
        {"id": "q3", "question": "What is the CEO's salary?", "answerable": False}]) + "\n")
    done = run_cli(["eval", str(questions), "--collection", name, "--plans", "lexical,weighted", "--json",
                    "--out", str(tmp_path / "out")], cli_env)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["queries"] == 3 and result["ingest"] == {"judged_documents": 2, "judged_missing": 0}
    assert result["plans"]["weighted"]["hit@10"] == 1.0
    missing = run_cli(["eval", str(questions), "--plans", "lexical"], cli_env)
    assert missing.returncode == 2 and "pass --collection" in missing.stderr


def test_eval_keeps_the_corpus_as_published_and_shows_what_failed(tmp_path: Path, cli_env: dict[str, str]) -> None:
    """Two judged documents with the same text are both searchable (they were skipped as `duplicate`); an item
    that fails is shown with its code and reason, the judged documents missing from the collection are counted,
    the default plan is marked, and without a terminal progress lines go to stderr."""
    root = tmp_path / "dups"
    (root / "qrels").mkdir(parents=True)
    docs = [("a", "Heat pumps", "Heat pumps move heat from outside air into the house."),
            ("b", "Heat pumps", "Heat pumps move heat from outside air into the house."),
            ("c", "Solar", "Photovoltaic panels turn sunlight into electricity."),
            ("e", "", "")]
    (root / "corpus.jsonl").write_text("".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n"
                                               for i, t, x in docs))
    (root / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "heat pumps"}) + "\n"
                                        + json.dumps({"_id": "q2", "text": "solar panels"}) + "\n")
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\ta\t1\nq1\tb\t1\nq2\tc\t1\nq2\te\t1\n")
    env = {**cli_env, "RAGD_PROGRESS_INTERVAL_S": "0"}
    args = ["eval", str(root), "--plans", "lexical,weighted", "--out", str(tmp_path / "out")]
    result = run_cli([*args, "--json"], env)
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    ingest = payload["ingest"]
    assert ingest["ingested"] == 3 and ingest["duplicate"] == 0 and ingest["failed"] == 1
    assert [(f["item"], f["code"]) for f in ingest["failed_items"]] == [("e", "empty_document")]
    assert ingest["judged_documents"] == 4 and ingest["judged_missing"] == 1
    assert payload["default_plan"] == "weighted"
    assert payload["plans"]["lexical"]["recall@10"] == pytest.approx(0.75)  # a and b both found; e cannot be
    progress = [line for line in result.stderr.splitlines() if line.startswith("ragd: ")]
    assert any(line.startswith("ragd: ingest ") for line in progress), result.stderr
    assert any(line.startswith("ragd: lexical 2/2 ") for line in progress), result.stderr
    human = run_cli(args, cli_env)
    assert human.returncode == 0, human.stderr
    assert "weighted (default)" in human.stdout and "lexical (default)" not in human.stdout
    assert "failed e [empty_document]:" in human.stdout, human.stdout
    assert "1 of 4 judged documents are not in the collection" in human.stdout
    assert not [line for line in human.stderr.splitlines() if line.startswith("ragd: ")]  # 10 s: too short


def test_eval_says_when_the_reranker_failed_open_and_reranks_without_the_interactive_timeout(
        tmp_path: Path, cli_env: dict[str, str]) -> None:
    """(issue 30) Under load the reranker passed its 3 s fail-open timeout on every query and the table still said
    `weighted+rerank` with the fused plan's figures."""
    root = write_beir(tmp_path / "tiny")
    args = ["eval", str(root), "--plans", "weighted,weighted+rerank", "--out", str(tmp_path / "out"), "--json"]
    env = {**cli_env, "RAGD_RERANKER": "local", "RAGD_RERANK_TIMEOUT_S": "0.000001"}  # what a loaded machine gives
    honest = run_cli(args, env)
    assert honest.returncode == 0, honest.stderr
    plans = json.loads(honest.stdout)["plans"]
    assert plans["weighted+rerank"]["rerank_skipped"] == 0 and plans["weighted"]["rerank_skipped"] == 0
    starved = run_cli(args[:-1], {**env, "RAGD_EVAL_RERANK_TIMEOUT_S": "0.000001"})
    assert starved.returncode == 0, starved.stderr
    assert "weighted+rerank: the reranker failed open on 3 of 3 queries" in " ".join(starved.stdout.split())


def test_a_squad_file_missing_a_field_is_a_bad_request(tmp_path: Path, cli_env: dict[str, str]) -> None:
    squad = tmp_path / "squad.json"
    squad.write_text(json.dumps({"data": [{"paragraphs": [{"context": "Bees make honey.", "qas": [
        {"id": "a", "question": "What do bees make?", "answers": [{"text": "honey"}]}]}]}]}))
    result = run_cli(["eval", str(squad), "--answers"], cli_env)
    assert result.returncode == 2 and "data[0] has no 'title' field" in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1
