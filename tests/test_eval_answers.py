"""Answer evaluation: SQuAD's answer scoring, the scope split, threshold calibration, and `ragd eval --answers`
end to end on real SQuAD 2.0 articles."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from ragd.eval.answers import NEVER, choose, contains_answer, halves, normalise, scope_split, token_f1
from ragd.eval.datasets import load_squad

from .conftest import DATA, run_cli
from .fakes import JsonService, serving

SQUAD = DATA / "qa" / "squad2" / "dev-v2.0-first16.json"


def test_answers_are_scored_as_squad_scores_them() -> None:
    assert normalise("The  Normans, in 10th-century France!") == "normans in 10thcentury france"
    assert contains_answer("They came from Normandy, a region of France [chunk:abc].", ["normandy"])
    assert not contains_answer("Normandyshire is elsewhere.", ["Normandy"])  # whole words only
    assert not contains_answer("No answer here.", [])
    assert token_f1("the Norman conquest of England [chunk:x]", ["Norman conquest"]) == pytest.approx(2 * 0.5 / 1.5)
    assert token_f1("anything", ["Norman", "anything"]) == 1.0 and token_f1("x", ["y"]) == 0.0


def test_the_scope_split_takes_half_of_the_articles_by_hash(tmp_path: Path) -> None:
    articles = []
    for a in range(6):
        paragraphs = [{"context": f"Article {a} paragraph {p}.", "qas": [
            {"id": f"q{a}{p}", "question": f"What is in article {a} paragraph {p}?", "is_impossible": False,
             "answers": [{"text": f"paragraph {p}", "answer_start": 0}]},
            {"id": f"x{a}{p}", "question": f"Is article {a} fake?", "is_impossible": True, "answers": []}]}
            for p in range(2)]
        articles.append({"title": f"Article_{a}", "paragraphs": paragraphs})
    path = tmp_path / "squad.json"
    path.write_text(json.dumps({"version": "v2.0", "data": articles}))
    split = scope_split(load_squad(path))
    assert (split.groups_in, split.groups_out, len(split.documents)) == (3, 3, 6)
    inside = {d["id"].split("/")[0] for d in split.documents}
    assert {q[1] for q in split.in_scope} == {t.split("_")[1] for t in inside}
    assert all(q.startswith("q") for q in split.in_scope) and all(q.startswith("x") for q in split.adversarial)
    assert len(split.out_of_scope) == 12 and not {q[1] for q in split.out_of_scope} & {q[1] for q in split.in_scope}
    assert scope_split(load_squad(path)) == split  # deterministic
    cal, held = halves(sorted(q for q in (*split.in_scope, *split.out_of_scope)))
    assert cal and held and not set(cal) & set(held)


def test_calibration_picks_the_best_f1_that_keeps_enough_answered() -> None:
    inside = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.35, 0.3, 0.2, 0.05]  # answerable: keep 90% answered
    outside = [0.01, 0.02, 0.1, 0.15, 0.25, 0.3, 0.45]
    choice = choose(inside, outside, min_answered=0.9)
    assert choice.threshold == 0.2 and choice.answered == 0.9
    assert choice.recall == pytest.approx(4 / 7) and choice.precision == pytest.approx(4 / 5)
    loose = choose(inside, outside, min_answered=0.5)
    assert loose.f1 >= choice.f1 and loose.answered >= 0.5
    assert choose([0.1], [0.9], min_answered=1.0).threshold == 0.0  # nothing separates: answer everything
    # questions the answerability checks abstain on at every threshold (NEVER) are abstained at any threshold: the
    # share to keep answered is of the others, and the threshold still separates the rest
    never = [NEVER, NEVER]
    checked = choose([*inside, *never], [*outside, *never], min_answered=0.9 * len(inside) / (len(inside) + 2))
    assert checked.threshold == 0.2 and checked.recall == pytest.approx(6 / 9)


def test_ragd_eval_answers_on_real_squad_articles(tmp_path: Path, cli_env: dict[str, str]) -> None:
    data = json.loads(SQUAD.read_text(encoding="utf-8"))["data"]
    subset = [{"title": a["title"], "paragraphs": a["paragraphs"][:4]} for a in data[:6]]
    path = tmp_path / "squad-subset.json"
    path.write_text(json.dumps({"version": "v2.0", "data": subset}))
    out = tmp_path / "out"
    result = run_cli(["eval", str(path), "--answers", "--max-queries", "60", "--json", "--out", str(out)], cli_env)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)["answers"]
    split, thresholds, held = report["split"], report["thresholds"], report["parts"]["held_out"]
    assert split["documents"] == 12 and split["asked"] == 60 == split["calibration"] + split["held_out"]
    assert thresholds["calibrated"] and 0 <= thresholds["rerank"] < 1 and thresholds["questions"] > 10
    for part in report["parts"].values():
        for key in ("abstain_precision", "abstain_recall", "abstain_f1", "answered", "answer_recall",
                    "citation_precision", "citation_recall"):
            assert 0 <= part[key] <= 1, key
        assert part["at_most_3_pieces"] == 1.0 and "rerank" in part["stages_ms"]
    # out-of-scope questions are mostly abstained on, and answers mostly hold the gold answer
    assert held["abstain_recall"] > 0.6 and held["answer_recall"] > 0.5
    rows = list(csv.DictReader((out / "answers_per_query.csv").open(encoding="utf-8")))
    assert len(rows) == 60 and {r["kind"] for r in rows} <= {"in_scope", "out_of_scope", "adversarial"}
    assert json.loads((out / "answers.json").read_text())["thresholds"] == thresholds
    assert (out / "answers.png").read_bytes().startswith(b"\x89PNG")
    gate = run_cli(["eval", str(path), "--answers", "--max-queries", "16", "--no-calibrate",
                    "--fail-under", "answers:abstain_f1=1.01"], cli_env)
    assert gate.returncode == 5 and "answers abstain_f1 =" in gate.stderr
    over = run_cli(["eval", str(path), "--answers", "--max-queries", "16", "--no-calibrate",
                    "--fail-over", "answers:wrong_document_answers=-0.01"], cli_env)
    assert over.returncode == 5 and "answers wrong_document_answers = " in over.stderr and "> -0.01" in over.stderr


class _DownLLM(JsonService):
    """An OpenAI-compatible API that fails every request (as a service does in an outage)."""

    def answer(self, body: Any) -> None:
        self.send_json(500, {"error": {"message": "internal error"}})


def test_a_question_that_fails_is_reported_and_the_others_are_measured(tmp_path: Path,
                                                                       cli_env: dict[str, str]) -> None:
    data = json.loads(SQUAD.read_text(encoding="utf-8"))["data"]
    path = tmp_path / "squad-subset.json"
    path.write_text(json.dumps({"version": "v2.0", "data": [
        {"title": a["title"], "paragraphs": a["paragraphs"][:2]} for a in data[:4]]}))
    with serving(_DownLLM) as url:
        env = {**cli_env, "RAGD_GENERATOR": "openai:down", "RAGD_LLM_BASE_URL": f"{url}/v1",
               "RAGD_LLM_API_KEY": "k", "RAGD_LLM_MAX_RETRIES": "0"}
        result = run_cli(["eval", str(path), "--answers", "--max-queries", "24", "--no-calibrate", "--json"], env)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)["answers"]
    failed = report["failed"]
    assert failed and all(reason.startswith("llm_unavailable: ") for reason in failed.values())
    parts = report["parts"]
    assert parts["calibration"]["failed"] + parts["held_out"]["failed"] == len(failed)
    # what did not need the generator (the abstentions) is still measured
    assert parts["calibration"]["questions"] + parts["held_out"]["questions"] == 24 - len(failed) > 0
    assert f"{len(failed)} questions failed and are not scored" in result.stderr
