"""Evaluation sets: a BEIR directory, or ragd's own questions JSONL.

Questions JSONL, one object per line:
    {"id": "q1", "question": "...", "relevant_doc_ids": ["handbook.md"], "relevant_chunk_ids": [],
     "answer": "..." (or "answers": [...]), "answerable": true}
`id` defaults to the line number; relevance is judged by document external id (`relevant_doc_ids`, graded
with `{"id": grade}` objects if needed) or by chunk id (`relevant_chunk_ids`)."""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..errors import InvalidRequest

Unit = Literal["doc", "chunk"]


@dataclass(frozen=True)
class EvalSet:
    name: str
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    corpus: Path | None = None
    unit: Unit = "doc"
    answerable: dict[str, bool] = field(default_factory=dict)
    documents: tuple[dict[str, str], ...] = ()  # an in-memory corpus (SQuAD paragraphs)
    answers: dict[str, tuple[str, ...]] = field(default_factory=dict)  # gold answer strings
    groups: dict[str, str] = field(default_factory=dict)  # question -> its group (a SQuAD article)
    doc_groups: dict[str, str] = field(default_factory=dict)  # document -> its group
    kinds: dict[str, str] = field(default_factory=dict)  # question -> its kind of answer (TAT-QA: arithmetic, span…)

    @property
    def has_corpus(self) -> bool:
        return self.corpus is not None or bool(self.documents)

    def head(self, n: int | None) -> EvalSet:
        """The first n queries in file order (all when n is None)."""
        if n is None or n >= len(self.queries):
            return self
        keep = list(self.queries)[:n]
        return EvalSet(name=self.name, queries={q: self.queries[q] for q in keep},
                       qrels={q: self.qrels[q] for q in keep if q in self.qrels}, corpus=self.corpus,
                       unit=self.unit, answerable={q: self.answerable[q] for q in keep if q in self.answerable},
                       documents=self.documents, answers={q: self.answers[q] for q in keep if q in self.answers},
                       groups={q: self.groups[q] for q in keep if q in self.groups}, doc_groups=self.doc_groups,
                       kinds={q: self.kinds[q] for q in keep if q in self.kinds})


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.") or "eval"


def load(path: Path, split: str = "test") -> EvalSet:
    if path.is_dir():
        return load_beir(path, split)
    if path.is_file() and path.suffix == ".json":
        return load_tatqa(path) if _is_tatqa(path) else load_squad(path)
    if path.is_file():
        return load_questions(path)
    raise InvalidRequest(f"{path}: no such evaluation set (a BEIR directory or a questions .jsonl file)")


def load_beir(root: Path, split: str = "test") -> EvalSet:
    corpus, queries_file, qrels_file = root / "corpus.jsonl", root / "queries.jsonl", root / "qrels" / f"{split}.tsv"
    missing = [p.name for p in (corpus, queries_file, qrels_file) if not p.exists()]
    if missing:
        raise InvalidRequest(f"{root} is not a BEIR directory: missing {', '.join(missing)}")
    qrels: dict[str, dict[str, int]] = {}
    with open(qrels_file, encoding="utf-8", newline="") as fh:
        for row in csv.reader(fh, delimiter="\t"):
            if len(row) < 3 or row[0] == "query-id":
                continue
            qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    queries: dict[str, str] = {}
    with open(queries_file, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                rec = json.loads(line)
                if str(rec["_id"]) in qrels:
                    queries[str(rec["_id"])] = str(rec["text"])
    unknown = sorted(set(qrels) - set(queries))
    if unknown:
        raise InvalidRequest(f"{qrels_file}: {len(unknown)} judged queries are missing from queries.jsonl")
    return EvalSet(name=_slug(root.name), queries=queries, qrels=qrels, corpus=corpus)


def load_squad(path: Path) -> EvalSet:
    """A SQuAD 2.0 JSON file: each paragraph is a document (`<title>/<n>`), each answerable question is judged
    relevant to its paragraph; unanswerable questions are kept (answerable: false) but carry no judgements."""
    try:
        articles = json.loads(path.read_text(encoding="utf-8"))["data"]
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidRequest(f"{path}: not a SQuAD JSON file: {exc}") from exc
    documents: list[dict[str, str]] = []
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    answerable: dict[str, bool] = {}
    answers: dict[str, tuple[str, ...]] = {}
    groups: dict[str, str] = {}
    doc_groups: dict[str, str] = {}
    for a, article in enumerate(articles if isinstance(articles, list) else []):
        title = str(_field(path, article, "title", f"data[{a}]"))
        for number, para in enumerate(_field(path, article, "paragraphs", f"data[{a}]")):
            doc_id = f"{title}/{number}"
            where = f"data[{a}].paragraphs[{number}]"
            documents.append({"id": doc_id, "title": title.replace("_", " "),
                              "text": _field(path, para, "context", where)})
            doc_groups[doc_id] = title
            for q, qa in enumerate(_field(path, para, "qas", where)):
                queries[_field(path, qa, "id", f"{where}.qas[{q}]")] = _field(path, qa, "question", f"{where}.qas[{q}]")
                groups[qa["id"]] = title
                answerable[qa["id"]] = not qa.get("is_impossible", False)
                if answerable[qa["id"]]:
                    qrels[qa["id"]] = {doc_id: 1}
                    answers[qa["id"]] = tuple(dict.fromkeys(a["text"] for a in qa.get("answers", [])))
    return EvalSet(name=_slug(path.stem), queries=queries, qrels=qrels, answerable=answerable,
                   documents=tuple(documents), answers=answers, groups=groups, doc_groups=doc_groups)


def _is_tatqa(path: Path) -> bool:
    """A TAT-QA file is a JSON list of items with a table (SQuAD's is an object with `data`); the first bytes say."""
    with open(path, "rb") as fh:
        return fh.read(64).lstrip().startswith(b"[")


def load_tatqa(path: Path) -> EvalSet:
    """A TAT-QA JSON file (a list of items: one table of an annual report with its paragraphs, and questions). Each
    item is a Markdown document (its paragraphs in order, the table after the paragraph that introduces it) and a
    group of its own: the scope split ingests half of the items, and the questions about the other half are about
    documents that look like the ingested ones but are not there. Gold answers are strings (an arithmetic answer's
    number as TAT-QA gives it, its `scale` kept apart in `kinds`, e.g. "arithmetic:percent")."""
    try:
        items = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise InvalidRequest(f"{path}: not a TAT-QA JSON file: {exc}") from exc
    documents: list[dict[str, str]] = []
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    answers: dict[str, tuple[str, ...]] = {}
    groups: dict[str, str] = {}
    kinds: dict[str, str] = {}
    for n, item in enumerate(items if isinstance(items, list) else []):
        where = f"[{n}]"
        table = _field(path, _field(path, item, "table", where), "table", f"{where}.table")
        doc_id = f"tatqa/{_field(path, item['table'], 'uid', f'{where}.table')}"
        paragraphs = [str(_field(path, p, "text", f"{where}.paragraphs[{i}]")).strip()
                      for i, p in enumerate(sorted(_field(path, item, "paragraphs", where),
                                                   key=lambda p: int(p.get("order", 0))))]
        documents.append({"id": doc_id, "text": tatqa_markdown(paragraphs, table), "source_type": "markdown"})
        for i, qa in enumerate(_field(path, item, "questions", where)):
            qwhere = f"{where}.questions[{i}]"
            qid = str(_field(path, qa, "uid", qwhere))
            queries[qid] = str(_field(path, qa, "question", qwhere))
            groups[qid] = doc_id
            qrels[qid] = {doc_id: 1}
            gold = _field(path, qa, "answer", qwhere)
            answers[qid] = tuple(str(a) for a in (gold if isinstance(gold, list) else [gold]))
            kinds[qid] = f"{qa.get('answer_type', 'span')}:{qa.get('scale') or ''}".rstrip(":")
    if not documents:
        raise InvalidRequest(f"{path}: not a TAT-QA JSON file: no items")
    return EvalSet(name=_slug(path.stem), queries=queries, qrels=qrels, answerable=dict.fromkeys(queries, True),
                   documents=tuple(documents), answers=answers, groups=groups,
                   doc_groups={d["id"]: d["id"] for d in documents}, kinds=kinds)


def tatqa_markdown(paragraphs: list[str], table: list[list[str]]) -> str:
    """Paragraphs and one table as Markdown; the table follows the first paragraph that ends with a colon (the
    one that introduces it), else the last paragraph."""
    width = max((len(row) for row in table), default=0)
    lines = ["| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ").strip() for c in
                               [*row, *[""] * (width - len(row))]) + " |" for row in table]
    if len(lines) > 1:
        lines.insert(1, "|" + " --- |" * width)
    at = next((i + 1 for i, p in enumerate(paragraphs) if p.rstrip().endswith(":")), len(paragraphs))
    return "\n\n".join([*paragraphs[:at], "\n".join(lines), *paragraphs[at:]])


def _field(path: Path, obj: Any, name: str, where: str) -> Any:
    """obj[name] of a SQuAD file, or a bad request naming the field and where it is missing."""
    if not isinstance(obj, dict) or name not in obj:
        raise InvalidRequest(f"{path}: not SQuAD 2.0 JSON: {where} has no {name!r} field")
    return obj[name]


def load_questions(path: Path) -> EvalSet:
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    answerable: dict[str, bool] = {}
    answers: dict[str, tuple[str, ...]] = {}
    units: set[str] = set()
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                qid = str(rec.get("id", number))
                queries[qid] = str(rec["question"])
            except (ValueError, KeyError, TypeError) as exc:
                raise InvalidRequest(f"{path}:{number}: expected an object with a 'question': {exc}") from exc
            for key, unit in (("relevant_doc_ids", "doc"), ("relevant_chunk_ids", "chunk")):
                value = rec.get(key) or []
                grades = value if isinstance(value, dict) else {str(v): 1 for v in value}
                if grades:
                    units.add(unit)
                    qrels.setdefault(qid, {}).update({str(k): int(v) for k, v in grades.items()})
            answerable[qid] = bool(rec.get("answerable", qid in qrels))
            gold = rec.get("answers", rec.get("answer"))
            if gold:
                answers[qid] = tuple(str(a) for a in (gold if isinstance(gold, list) else [gold]))
    if len(units) > 1:
        raise InvalidRequest(f"{path}: use either relevant_doc_ids or relevant_chunk_ids, not both")
    return EvalSet(name=_slug(path.stem), queries=queries, qrels=qrels, unit="chunk" if units == {"chunk"} else "doc",
                   answerable=answerable, answers=answers)
