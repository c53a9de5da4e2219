"""Paraphrase invariance on FinanceBench's development half: each question as given and in three rewrites
(`bench/paraphrases/financebench_dev.jsonl`: terse analyst shorthand, wrapped in instructions, casual lower case
with another period notation), asked of one collection with `ragd eval`, scored by its judge.

Prints, per wording and per half of the companies (the tuned half: the first seven by name; the held-aside half:
the other seven), correct / wrong / abstained, and the share of questions whose four wordings agree (the same
verdict, and for answers judged correct or wrong, the same verdict on each). Writes bench/results/paraphrase.json.

    python bench/paraphrase.py [--data ../shared/data/qa/financebench] [--home DIR] [--out DIR]

The collection is ingested once per RAGD_HOME (`--home` keeps it between runs)."""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from _results import Results

HERE = Path(__file__).resolve().parent
REWRITES = HERE / "paraphrases" / "financebench_dev.jsonl"
STYLES = ("original", "terse", "wrapped", "casual")


def company(doc_name: str) -> str:
    """The issuer a FinanceBench document name starts with ("JOHNSON_JOHNSON_2022_10K": JOHNSON_JOHNSON)."""
    parts = doc_name.split("_")
    return "_".join(p for p in parts[: next(i for i, p in enumerate(parts) if p[:2] in ("19", "20"))])


def build(data: Path, out: Path) -> tuple[Path, dict[str, tuple[str, str, str]]]:
    """The set of every wording (ids `<id>~<style>`) as a filings JSONL named like the original (so its
    collection is the one `ragd eval` of the original builds), and id -> (original id, style, company)."""
    source = [json.loads(line) for line in (data / "financebench_dev.jsonl").read_text("utf-8").splitlines()
              if line.strip()]
    rewrites = defaultdict(dict)
    for line in REWRITES.read_text("utf-8").splitlines():
        if line.strip():
            r = json.loads(line)
            rewrites[r["financebench_id"]][r["style"]] = r["question"]
    out.mkdir(parents=True, exist_ok=True)
    path = out / "financebench_dev.jsonl"
    index = {}
    with open(path, "w", encoding="utf-8") as fh:
        for record in source:
            qid = record["financebench_id"]
            for style in STYLES:
                question = record["question"] if style == "original" else rewrites[qid].get(style)
                if question is None:
                    continue
                key = f"{qid}~{style}"
                index[key] = (qid, style, company(record["doc_name"]))
                fh.write(json.dumps({**record, "financebench_id": key, "question": question}) + "\n")
    return path, index


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=HERE.parent.parent / "shared" / "data" / "qa" / "financebench")
    parser.add_argument("--home", type=Path, default=None, help="RAGD_HOME to keep the collection in")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--scored", action="store_true", help="score the eval already in --out (do not ask again)")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="ragd-paraphrase-"))
    path, index = build(args.data, out / "set")
    env = {**os.environ, **({"RAGD_HOME": str(args.home)} if args.home else {})}
    ragd = Path(sys.executable).with_name("ragd")
    if not args.scored:
        run = subprocess.run([str(ragd), "eval", str(path), "--documents", str(args.data / "pdfs"),
                              "--out", str(out / "eval")], env=env, check=False)
        if run.returncode not in (0, 5):
            return run.returncode
    with open(out / "eval" / "filings_per_query.csv", encoding="utf-8") as fh:
        rows = {r["query_id"]: r for r in csv.DictReader(fh)}
    companies = sorted({c for _, _, c in index.values()})
    tuned = set(companies[: len(companies) // 2])
    figures: dict[str, dict[str, float]] = {}
    for half in ("tuned", "held-aside", "all"):
        for style in STYLES:
            verdicts = [rows[k]["verdict"] for k, (_, s, c) in index.items() if s == style and k in rows
                        and (half == "all" or (c in tuned) == (half == "tuned"))]
            if verdicts:
                figures[f"{half}:{style}"] = {v: round(verdicts.count(v) / len(verdicts), 3)
                                              for v in ("correct", "wrong", "abstained")} | {"n": len(verdicts)}
    by_question = defaultdict(dict)
    for key, (qid, style, _) in index.items():
        if key in rows:
            by_question[qid][style] = rows[key]["verdict"]
    agree = [len(set(v.values())) == 1 for v in by_question.values() if len(v) == len(STYLES)]
    figures["agreement"] = {"share": round(sum(agree) / max(len(agree), 1), 3), "n": len(agree)}
    for name, f in figures.items():
        print(f"{name:22} " + "  ".join(f"{k} {v}" for k, v in f.items()))
    results = Results("paraphrase", config={"questions": len(by_question), "wordings": list(STYLES)})
    for name, f in figures.items():
        if name != "agreement":
            half, style = name.split(":")
            results.row("answers by wording (FinanceBench development half)", companies=half, wording=style, **f)
    agreement = figures["agreement"]
    results.row("paraphrase agreement", questions=agreement["n"], all_four_agree=agreement["share"])
    results.save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
