"""Long-query retrieval sets built from shared data, for BM25 on queries that repeat their words.

    python bench/long_queries.py --passages [--scifact ../shared/data/beir/scifact] [--out DIR]
    python bench/long_queries.py [--questions 2] [--squad ../shared/data/qa/squad2/dev-v2.0-first16.json] [--out DIR]
    .venv/bin/ragd eval DIR --plans lexical,vector,rrf,weighted

`--passages`: SciFact abstracts as queries (see `build_passages`), 150 words each, as ArguAna's arguments are.

SQuAD 2.0 paragraphs are the corpus (`<title>/<n>`, as `ragd eval` loads SQuAD); each paragraph's answerable
questions, in file order, are joined --questions at a time (default 2) into queries: natural language two or three
times longer than one question, that repeats its key words, as a long TREC description does. Relevant: that
paragraph. (All of a paragraph's questions in one query make it too easy: nDCG@10 0.99 for every plan.)

The set is written as a BEIR directory (corpus.jsonl, queries.jsonl, qrels/test.tsv) to --out (default: a new
temporary directory), never into the repository.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_SQUAD = HERE.parent.parent / "shared" / "data" / "qa" / "squad2" / "dev-v2.0-first16.json"
DEFAULT_SCIFACT = HERE.parent.parent / "shared" / "data" / "beir" / "scifact"
PASSAGE_WORDS = 150


def build(squad: Path, out: Path, questions_per_query: int = 2) -> tuple[int, int]:
    articles = json.loads(squad.read_text(encoding="utf-8"))["data"]
    corpus, queries, qrels = [], [], []
    for article in articles:
        title = str(article["title"])
        for number, para in enumerate(article["paragraphs"]):
            doc_id = f"{title}/{number}"
            corpus.append({"_id": doc_id, "title": title.replace("_", " "), "text": para["context"]})
            questions = [qa["question"].strip() for qa in para["qas"] if not qa.get("is_impossible", False)]
            for start in range(0, len(questions) - questions_per_query + 1, questions_per_query):
                qid = f"long-{len(queries)}"
                queries.append({"_id": qid, "text": " ".join(questions[start:start + questions_per_query])})
                qrels.append(f"{qid}\t{doc_id}\t1")
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    (out / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in corpus), encoding="utf-8")
    (out / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    (out / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(qrels) + "\n",
                                            encoding="utf-8")
    return len(corpus), len(queries)


def build_passages(scifact: Path, out: Path) -> tuple[int, int]:
    """SciFact with whole passages as queries (as ArguAna has): for each claim judged against two abstracts or
    more, each of them (title and its first PASSAGE_WORDS words) is a query whose relevant documents are the claim's
    other abstracts. The query's own abstract stays in the corpus, unjudged, as in ArguAna: every plan pays for it
    alike."""
    import csv

    claims: dict[str, list[str]] = {}
    with open(scifact / "qrels" / "test.tsv", encoding="utf-8", newline="") as fh:
        for row in csv.reader(fh, delimiter="\t"):
            if len(row) >= 3 and row[0] != "query-id":
                claims.setdefault(row[0], []).append(row[1])
    corpus = {}
    for line in (scifact / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        doc = json.loads(line)
        corpus[str(doc["_id"])] = doc
    queries, qrels = [], []
    for claim in sorted(claims, key=int):
        docs = claims[claim]
        if len(docs) < 2:
            continue
        for source in docs:
            qid = f"passage-{claim}-{source}"
            text = " ".join(f"{corpus[source]['title']}. {corpus[source]['text']}".split()[:PASSAGE_WORDS])
            queries.append({"_id": qid, "text": text})
            qrels.extend(f"{qid}\t{other}\t1" for other in docs if other != source)
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    (out / "corpus.jsonl").write_text((scifact / "corpus.jsonl").read_text(encoding="utf-8"), encoding="utf-8")
    (out / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    (out / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(qrels) + "\n",
                                            encoding="utf-8")
    return len(corpus), len(queries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--squad", type=Path, default=DEFAULT_SQUAD)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--questions", type=int, default=2, help="questions joined into one query")
    parser.add_argument("--passages", action="store_true", help="SciFact with whole abstracts as queries instead")
    parser.add_argument("--scifact", type=Path, default=DEFAULT_SCIFACT)
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="ragd-long-queries-"))
    docs, queries = build_passages(args.scifact, out) if args.passages else build(args.squad, out, args.questions)
    words = [len(json.loads(line)["text"].split()) for line in (out / "queries.jsonl").read_text().splitlines()]
    words.sort()
    print(f"long queries: {queries} queries (median {words[len(words) // 2]} words, max {words[-1]}) over {docs} "
          f"paragraphs -> {out}")


if __name__ == "__main__":
    main()
