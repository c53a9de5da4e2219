"""A long-query retrieval set built from shared data, for BM25 on queries that repeat their words.

    python bench/long_queries.py [--squad ../shared/data/qa/squad2/dev-v2.0-first16.json] [--out DIR]
    .venv/bin/ragd eval DIR --plans lexical,vector,rrf,weighted

SQuAD 2.0 paragraphs are the corpus (`<title>/<n>`, as `ragd eval` loads SQuAD); each paragraph with at least
three answerable questions gets one query: all its answerable questions joined, in file order (about 40-120
words of natural language that repeat their key words, as a long TREC description or a pasted passage does).
Relevant: that paragraph. The set is written as a BEIR directory (corpus.jsonl, queries.jsonl, qrels/test.tsv)
to --out (default: a new temporary directory), never into the repository.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_SQUAD = HERE.parent.parent / "shared" / "data" / "qa" / "squad2" / "dev-v2.0-first16.json"
MIN_QUESTIONS = 3


def build(squad: Path, out: Path) -> tuple[int, int]:
    articles = json.loads(squad.read_text(encoding="utf-8"))["data"]
    corpus, queries, qrels = [], [], []
    for article in articles:
        title = str(article["title"])
        for number, para in enumerate(article["paragraphs"]):
            doc_id = f"{title}/{number}"
            corpus.append({"_id": doc_id, "title": title.replace("_", " "), "text": para["context"]})
            questions = [qa["question"].strip() for qa in para["qas"] if not qa.get("is_impossible", False)]
            if len(questions) >= MIN_QUESTIONS:
                qid = f"long-{len(queries)}"
                queries.append({"_id": qid, "text": " ".join(questions)})
                qrels.append(f"{qid}\t{doc_id}\t1")
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    (out / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in corpus), encoding="utf-8")
    (out / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    (out / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(qrels) + "\n",
                                            encoding="utf-8")
    return len(corpus), len(queries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--squad", type=Path, default=DEFAULT_SQUAD)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="ragd-long-queries-"))
    docs, queries = build(args.squad, out)
    words = [len(json.loads(line)["text"].split()) for line in (out / "queries.jsonl").read_text().splitlines()]
    words.sort()
    print(f"long queries: {queries} queries (median {words[len(words) // 2]} words, max {words[-1]}) over {docs} "
          f"paragraphs -> {out}")


if __name__ == "__main__":
    main()
