"""Answers from long filings, FinanceBench's way: questions about one document of a shared collection.

A filings set is a JSONL file, one question a line, FinanceBench's fields:
    {"financebench_id": "...", "question": "...", "answer": "$1577.00", "doc_name": "ACME_2018_10K",
     "evidence": [{"evidence_page_num": 59, "evidence_text": "..."}], "question_type": "..."}
with the documents as `<doc_name>.pdf` in a folder (`pdfs/` beside the file unless told). Evidence pages are
0-based there. The documents are ingested under neutral names (the first 16 hex digits of their sha256), so that
nothing but their content tells which issuer and period they are.

Per question it measures: the filing (the first cited document, or the first retrieved when the answer
abstained, is the evidence filing), the evidence page among the first 1/5/10 retrieved chunks (a chunk holds
the page when its pages include it, in the evidence filing), and the answer: `correct`, `wrong` or `abstained`.
A numeric gold ("$1577.00", "24.26", "1.9%") is matched by any figure of the answer within 1% after its scale
(thousand, million, billion) and sign; a percentage also as a fraction; a gold written with one or two
decimals also by what rounds to it. Other golds are judged by containment: a gold holding figures (not years)
needs them all in the answer (its wording is the annotator's), one without needs half of its content words;
these are marked `judged: containment` in the per-question CSV, for a person to read.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DatabaseUnavailable, InvalidRequest, RagdError
from ..fiscal import MONTH
from ..ingest.write import SAME_CONTENT
from .answers import _MARKER
from .runner import percentile

MATCH = 0.01  # a figure matches a numeric gold within this relative difference
_GOLD_NUMBER = re.compile(r"^\s*\(?-?\$?\s*-?([\d,]*\.?\d+)\s*\)?\s*(%|percent)?\s*(?:\.|$)", re.IGNORECASE)
_FIGURE = re.compile(r"(?<![\w.])\(?-?\$?\s?(\d[\d,]*(?:\.\d+)?|\.\d+)\)?\s*(%|percent\b|bn\b|billion\b|b\b|"
                     r"million\b|mn\b|m\b|thousand\b|k\b)?", re.IGNORECASE)
_SCALES = {"thousand": 1e3, "k": 1e3, "million": 1e6, "mn": 1e6, "m": 1e6, "billion": 1e9, "bn": 1e9, "b": 1e9}
_WHEN = re.compile(rf"\b{MONTH}\s+\d{{1,2}}\b|\b\d{{1,2}}\s+{MONTH}(?=\s|,|$)|"
                   r"\b\d{1,2}[\s-]+(?:months?|weeks?)\s+(?:ended|ending)\b", re.IGNORECASE)
_YEARISH = re.compile(r"^(?:19|20)\d\d$")
_WORD = re.compile(r"[a-z]+")
_STOP = frozenset("""a an the of in on at to for from by with and or as is are was were be been this that these
those it its their there which who what when how than then has have had not no yes due primarily mostly also into
over under between fy q per""".split())


@dataclass(frozen=True)
class FilingQuestion:
    qid: str
    question: str
    answer: str
    doc_name: str
    pages: tuple[int, ...]  # evidence pages, 1-based (as ragd numbers them)
    kind: str = ""
    answerable: bool = True  # false: the collection holds no answer (an issuer or a period it lacks)


@dataclass(frozen=True)
class FilingSet:
    name: str
    questions: tuple[FilingQuestion, ...]
    documents: Path  # the folder of <doc_name>.pdf


def is_filings(path: Path) -> bool:
    """Whether a file is a filings set: JSONL whose first record has `doc_name` and `evidence`."""
    if not path.is_file() or path.suffix != ".jsonl":
        return False
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                try:
                    first = json.loads(line)
                except json.JSONDecodeError:
                    return False
                return isinstance(first, dict) and "doc_name" in first and "evidence" in first
    return False


def load_filings(path: Path, documents: Path | None = None) -> FilingSet:
    folder = documents or path.parent / "pdfs"
    if not folder.is_dir():
        raise InvalidRequest(f"{path}: its documents are not in {folder}; pass --documents FOLDER")
    questions = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
                pages = tuple(sorted({int(e["evidence_page_num"]) + 1 for e in raw.get("evidence") or ()}))
                answerable = raw.get("answerable", True) is not False
                if answerable and not raw.get("doc_name"):
                    raise KeyError("doc_name")
                questions.append(FilingQuestion(str(raw.get("financebench_id") or raw.get("id") or number),
                                                str(raw["question"]), str(raw.get("answer") or ""),
                                                str(raw.get("doc_name") or ""), pages,
                                                str(raw.get("question_type") or ""), answerable))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise InvalidRequest(f"{path}:{number}: not a filings question ({type(exc).__name__}: {exc}); "
                                     "expected question, answer, doc_name and evidence[].evidence_page_num") from exc
    missing = sorted({q.doc_name for q in questions if q.doc_name and not (folder / f"{q.doc_name}.pdf").is_file()})
    if missing:
        raise InvalidRequest(f"{path}: no {missing[0]}.pdf in {folder} ({len(missing)} documents missing)")
    return FilingSet(path.stem, tuple(questions), folder)


def neutral_names(filings: FilingSet, folder: Path) -> dict[str, str]:
    """Each document of the set linked (or copied) into `folder` as <sha256[:16]>.pdf; doc_name -> that name.
    Every document of the folder is taken, not only the questions': the others are look-alikes to tell apart."""
    folder.mkdir(parents=True, exist_ok=True)
    names: dict[str, str] = {}
    for source in sorted(filings.documents.glob("*.pdf")):
        digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
        target = folder / f"{digest}.pdf"
        if not target.exists():
            try:
                os.link(source, target)
            except OSError:
                shutil.copyfile(source, target)
        names[source.stem] = target.name
    return names


# -- judging an answer -----------------------------------------------------------------------------------------


def figures(text: str) -> list[float]:
    """Every figure of a text, as written and scaled by a word after it ("1.2 billion" is 1.2 and 1.2e9); a
    percentage also as its fraction. Signs and parentheses are dropped (a sign is a matter of wording)."""
    out: list[float] = []
    for m in _FIGURE.finditer(text):
        try:
            value = float(m.group(1).replace(",", ""))
        except ValueError:
            continue
        out.append(value)
        unit = (m.group(2) or "").lower()
        if unit in _SCALES:
            out.append(value * _SCALES[unit])
        elif unit in ("%", "percent"):
            out.append(value / 100)
    return out


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= MATCH * max(abs(a), abs(b)) if a or b else True


def numeric_gold(gold: str) -> float | None:
    """The gold's value when the gold is one figure ("$1577.00", "24.26", "1.9%"; a percentage as written)."""
    m = _GOLD_NUMBER.match(gold)
    return float(m.group(1).replace(",", "")) if m else None


def matches_figure(value: float, answer: str, percent: bool = False, decimals: int | None = None) -> bool:
    """Whether the answer holds the value within MATCH, at any scale a filing writes it in (units, thousands,
    millions, billions of the gold's unit); a percentage also as its fraction. A gold written with `decimals`
    decimals ("3.1%": rounded to one) also matches what rounds to it."""
    scales = (1.0, 1e3, 1e6, 1e9, 1e-3, 1e-6, 1e-9) if not percent else (1.0, 0.01)
    yearish = _YEARISH.match(f"{abs(value):.0f}") is not None and float(value).is_integer()
    found = [f for f in figures(answer) if yearish or not (f.is_integer() and _YEARISH.match(f"{f:.0f}"))]
    half = 0.5 * 10.0 ** -decimals if decimals is not None and decimals <= 2 else 0.0
    return any(_close(abs(f), abs(value) * s) or abs(abs(f) - abs(value) * s) <= half * s * (1 + 1e-9)
               for f in found for s in scales)


def judge_answer(answer: str, gold: str, abstained: bool) -> tuple[str, str]:
    """("correct" | "wrong" | "abstained", how it was judged: "figure" or "containment")."""
    text = _MARKER.sub("", answer)
    value = numeric_gold(gold)
    how = "figure" if value is not None else "containment"
    if abstained:
        return "abstained", how
    if value is not None:
        written = re.search(r"\.(\d+)", gold)
        decimals = len(written.group(1)) if written and written.group(1).strip("0") else None
        percent = "%" in gold or "percent" in gold.lower()
        return ("correct" if matches_figure(value, text, percent, decimals) else "wrong"), how
    key = _gold_figures(gold)
    if key:  # the gold's figures are what an answer must get right; its wording is the annotator's
        return ("correct" if all(matches_figure(v, text, pct, places) for v, pct, places in key) else "wrong"), how
    words = [w for w in dict.fromkeys(_WORD.findall(gold.lower())) if w not in _STOP and len(w) > 2]
    lower = text.lower()
    held = sum(1 for w in words if w in lower) / len(words) if words else 1.0
    return ("correct" if held >= 0.5 else "wrong"), how


def _gold_figures(gold: str) -> list[tuple[float, bool, int | None]]:
    """The figures of a text gold: value, whether a percentage, and the decimals it is written with (a figure
    an answer rounds to it matches, as a numeric gold's: "$2.5bn" is 2,544 million rounded)."""
    out = []
    gold = _WHEN.sub(lambda m: " " * len(m.group(0)), gold)  # "January 28, 2023", "12 months ended": when, not what
    for m in _FIGURE.finditer(gold):
        raw = m.group(1).replace(",", "")
        if _YEARISH.match(raw):
            continue
        written = re.search(r"\.(\d+)", raw)
        try:
            out.append((float(raw), (m.group(2) or "") in ("%", "percent"),
                        len(written.group(1)) if written and written.group(1).strip("0") else None))
        except ValueError:
            continue
    return out


# -- running it ------------------------------------------------------------------------------------------------


@dataclass
class FilingAsked:
    qid: str
    doc_name: str
    kind: str
    verdict: str  # correct, wrong, abstained
    judged: str  # figure, containment
    filing_first: bool
    page_rank: int | None  # the rank (1-based) of the first retrieved chunk holding an evidence page
    cited_pages: list[str]  # "<doc_name>:<page>" of the citations (or of the closest passages)
    latency_ms: float
    answer: str
    gold: str
    reason: str = ""
    answerable: bool = True
    stages_ms: dict[str, float] = field(default_factory=dict)  # ask's timings by stage (retrieval, rerank, ...)
    in_context: bool = False  # an evidence page is among the pages of the context a generator would be given


@dataclass
class FilingReport:
    collection: str
    documents: int
    pages: int
    ingest_seconds: float
    figures: dict[str, Any]
    asked: list[FilingAsked] = field(repr=False, default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"collection": self.collection, "documents": self.documents, "pages": self.pages,
                "ingest_seconds": round(self.ingest_seconds, 1), "figures": self.figures, "failed": self.failed}


def evaluate_filings(client: Any, filings: FilingSet, *, collection: str | None = None, tenant: str | None = None,
                     k: int = 12, max_queries: int | None = None,
                     on_progress: Callable[..., None] | None = None) -> FilingReport:
    """Ingest the set's documents under neutral names into one collection, ask every question, score."""
    from ..answer.compose import ask

    home = client.settings.home / "eval" / filings.name / "documents"
    names = neutral_names(filings, home)
    col = client.collection(collection or f"eval-{filings.name}", tenant=tenant)
    started = time.perf_counter()
    report = col.ingest([home], on_progress=(lambda d, t, note: on_progress("ingest", d, t, note))
                        if on_progress else None)
    ingest_seconds = time.perf_counter() - started
    if report.failed:
        first = report.failed[0]
        raise InvalidRequest(f"{len(report.failed)} documents of {filings.name} failed to ingest "
                             f"(first: {first.source_uri}: {first.reason})")
    by_external = {Path(name).stem: doc for doc, name in names.items()}
    for item in report.items:  # a file the collection held under another name before: the set's document is that one
        reason = item.reason or ""
        mine = by_external.get(Path(item.external_id or item.source_uri).stem)
        if item.status == "duplicate" and reason.startswith(SAME_CONTENT) and mine:
            by_external.setdefault(Path(reason.removeprefix(SAME_CONTENT)).stem, mine)
    by_id = {str(d["doc_id"]): by_external.get(Path(str(d["external_id"])).stem, "")
             for d in col.documents(limit=10_000)}
    reranking = col.settings.reranker != "none"
    questions = filings.questions[:max_queries] if max_queries else filings.questions
    asked: list[FilingAsked] = []
    failed: dict[str, str] = {}
    for n, q in enumerate(questions, start=1):
        t0 = time.perf_counter()
        try:
            result = ask(q.question, col.plan(k, None, rerank=reranking), col, debug=True, emit_log=False)
        except RagdError as exc:
            if isinstance(exc, DatabaseUnavailable):
                raise
            failed[q.qid] = f"{exc.code}: {exc}"
            continue
        latency = (time.perf_counter() - t0) * 1000
        retrieved = (result.debug or {}).get("retrieved", [])
        docs = [by_external.get(Path(str(r.get("external_id") or "")).stem, "") for r in retrieved]
        cited = [by_id.get(str(c.get("doc_id")), "") for c in (result.citations or result.closest)]
        first_doc = cited[0] if cited else (docs[0] if docs else "")
        rank = next((i for i, (r, d) in enumerate(zip(retrieved, docs), start=1)
                     if d == q.doc_name and set(r.get("pages") or ()) & set(q.pages)), None)
        context = set((result.debug or {}).get("context_chunk_ids") or ())
        in_context = any(d == q.doc_name and set(r.get("pages") or ()) & set(q.pages)
                         for r, d in zip(retrieved, docs) if r.get("chunk_id") in context)
        operands = (result.calculation or {}).get("operands") or []
        verdict, how = (judge_answer(result.answer, q.answer, result.abstained) if q.answerable
                        else ("correct" if result.abstained else "wrong", "abstention"))
        pages = ([f"{by_id.get(str(c.get('doc_id')), '')}:{','.join(map(str, _pages_of(c, retrieved)))}"
                  for c in (result.citations or result.closest)] if not operands else
                 [f"{cited[0] if cited else ''}:{o.get('page')}" for o in operands])
        asked.append(FilingAsked(q.qid, q.doc_name, q.kind, verdict, how, first_doc == q.doc_name, rank, pages,
                                 latency, result.answer, q.answer, result.reason or "", q.answerable,
                                 dict((result.debug or {}).get("timings_ms") or {}), in_context))
        if on_progress:
            on_progress("answers", n, len(questions))
    return FilingReport(col.name, len(names), _pages(col), ingest_seconds, score(asked), asked, failed)


def _pages_of(citation: dict[str, Any], retrieved: Sequence[dict[str, Any]]) -> list[int]:
    return next((list(r.get("pages") or ()) for r in retrieved if r["chunk_id"] == citation.get("chunk_id")), [])


def _pages(col: Any) -> int:
    total = 0
    offset = 0
    while True:
        docs = col.documents(limit=500, offset=offset)
        total += sum(int((col.document(d["external_id"]).get("metadata") or {}).get("pages") or 0) for d in docs)
        if len(docs) < 500:
            return total
        offset += 500


def score(everything: Sequence[FilingAsked]) -> dict[str, Any]:
    """Filing and page figures over the answerable questions, answers over all of them; the unanswerable ones'
    abstentions apart."""
    asked = [a for a in everything if a.answerable]
    unanswerable = [a for a in everything if not a.answerable]
    n = len(asked) or 1
    latencies = [a.latency_ms for a in everything]

    def share(test: Callable[[FilingAsked], bool]) -> float:
        return round(sum(1 for a in asked if test(a)) / n, 4)

    return {"questions": len(asked), "unanswerable": len(unanswerable),
            "unanswerable_abstained": round(sum(a.verdict == "correct" for a in unanswerable)
                                            / len(unanswerable), 4) if unanswerable else 1.0,
            "filing@1": share(lambda a: a.filing_first),
            "page_hit@1": share(lambda a: a.page_rank is not None and a.page_rank <= 1),
            "page_hit@5": share(lambda a: a.page_rank is not None and a.page_rank <= 5),
            "page_hit@10": share(lambda a: a.page_rank is not None and a.page_rank <= 10),
            # what an operator's LLM would get: the evidence page among the context ragd assembles for a generator
            "context_page_recall": share(lambda a: a.in_context),
            "correct": share(lambda a: a.verdict == "correct"),
            "wrong": share(lambda a: a.verdict == "wrong"),
            "abstained": share(lambda a: a.verdict == "abstained"),
            "correct_by_figure": share(lambda a: a.verdict == "correct" and a.judged == "figure"),
            "latency_p50_ms": round(percentile(latencies, 50), 1) if latencies else 0.0,
            "latency_p95_ms": round(percentile(latencies, 95), 1) if latencies else 0.0,
            # where the time goes: each stage's p50 over the questions that ran it (the rerank only on those whose
            # figure the statements did not give)
            "stage_p50_ms": {stage: round(percentile(spent, 50), 1) for stage in
                             sorted({k for a in everything for k in a.stages_ms})
                             if (spent := [a.stages_ms[stage] for a in everything if stage in a.stages_ms])}}


def write_filings(report: FilingReport, out_dir: Path) -> dict[str, str]:
    """filings.json (the figures) and filings_per_query.csv (a line a question, with its cited pages)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"filings_json": out_dir / "filings.json", "filings_per_query": out_dir / "filings_per_query.csv"}
    paths["filings_json"].write_text(json.dumps(report.as_dict(), indent=2, sort_keys=True) + "\n",
                                     encoding="utf-8")
    with open(paths["filings_per_query"], "w", newline="", encoding="utf-8") as fh:
        lines = csv.writer(fh)
        lines.writerow(["query_id", "doc_name", "kind", "verdict", "judged", "filing_first", "page_rank",
                        "in_context", "cited_pages", "latency_ms", "answer", "gold", "reason"])
        for a in report.asked:
            lines.writerow([a.qid, a.doc_name, a.kind, a.verdict, a.judged, int(a.filing_first),
                            a.page_rank or "", int(a.in_context), " ".join(a.cited_pages), round(a.latency_ms, 1),
                            _MARKER.sub("", a.answer), a.gold, a.reason])
    return {k: str(v) for k, v in paths.items()}
