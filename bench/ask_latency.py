"""`ask` latency on the sample corpus: the local reranker and the extractive generator, p50/p95 per stage.

    python bench/ask_latency.py [--rounds 5] [--repeat 100]

Each question is asked `rounds` times after one untimed pass (the model loaded, the pages warm); the result
cache is off, so every ask retrieves, reranks and extracts. Also prints how many distinct answers the repeats
gave (determinism) and how many questions abstained.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from _common import pct, private_ragd
from _results import Results

QUESTIONS = [
    "How many days of parental leave do employees in Germany get?",
    "What is the per diem for London?",
    "What should I do if my laptop is lost?",
    "How much is the learning budget?",
    "Who approves travel above the hotel limit?",
    "How do I report a security incident?",
    "Can I work remotely from another country?",
    "What is the capital of Mongolia?",
]
SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=100, help="identical asks of the first question")
    args = parser.parse_args()
    with private_ragd("bge-small-en") as client:
        col = client.collection("ask-bench")
        col.ingest([SAMPLES])
        for q in QUESTIONS:
            col.ask(q)
        totals: list[float] = []
        stages: dict[str, list[float]] = {}
        answers: dict[str, set[str]] = {q: set() for q in QUESTIONS}
        abstained = set()
        for _ in range(args.rounds):
            for q in QUESTIONS:
                started = time.perf_counter()
                answer = col.ask(q, debug=True)
                totals.append((time.perf_counter() - started) * 1000)
                for stage, ms in (answer.debug or {}).get("timings_ms", {}).items():
                    stages.setdefault(stage, []).append(ms)
                answers[q].add(answer.answer)
                if answer.abstained:
                    abstained.add(q)
        hashes = {col.ask(QUESTIONS[0]).result_hash for _ in range(args.repeat)}
    print(f"ask, {len(QUESTIONS)} questions x {args.rounds}: "
          f"p50 {pct(totals, 50):.0f} ms  p95 {pct(totals, 95):.0f} ms")
    for stage, values in sorted(stages.items()):
        print(f"  {stage:<9} p50 {pct(values, 50):7.1f} ms  p95 {pct(values, 95):7.1f} ms")
    print(f"{args.repeat} identical asks: {len(hashes)} distinct result_hash")
    print(f"distinct answers per question: {max(len(a) for a in answers.values())}; abstained: {len(abstained)} "
          f"({', '.join(sorted(abstained))})")
    results = Results("ask_latency", config={"rounds": args.rounds, "repeat": args.repeat, "questions": len(QUESTIONS)})
    results.row("ask", asks=len(totals), p50_ms=pct(totals, 50), p95_ms=pct(totals, 95),
                distinct_hashes_of_repeats=len(hashes), abstained=len(abstained))
    for stage, values in sorted(stages.items()):
        results.row("stages", stage=stage, p50_ms=pct(values, 50), p95_ms=pct(values, 95))
    results.save()


if __name__ == "__main__":
    main()
