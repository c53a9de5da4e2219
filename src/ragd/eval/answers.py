"""Answers under evaluation: abstention calibrated on questions with and without support, then `ask` on every
question, scored as SQuAD scores answers and by what it cites.

The scope split (SQuAD and any set whose questions belong to groups, e.g. articles): the paragraphs of half of
the groups (ordered by the sha256 of their name, so the split does not follow file order) are ingested; questions
about them are in scope, questions about the other half are out of scope and must be abstained on. A set without
groups uses its own answerable flags. Questions marked unanswerable inside the scope (SQuAD 2.0's adversarial
ones, written to look answerable from their paragraph) are reported apart: retrieval finds their paragraph, so an
evidence threshold cannot tell them, and an extractive generator cannot either.

Calibration and report: questions are split again by the parity of the sha256 of their id. The thresholds are
chosen on the calibration half, then every question is asked with them, and the held-out half is reported
beside the calibration half so that tuning to the questions shows as a gap.
"""

from __future__ import annotations

import hashlib
import re
import string
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..answer.abstain import judge
from ..answer.answerable import judge as judge_answerable
from ..answer.answerable import relevance
from ..answer.compose import answer_limits, answer_terms, ask
from ..embed import make_embedder
from ..engine import Collection
from ..errors import DatabaseUnavailable, InvalidRequest, RagdError
from ..retrieve.search import retrieve
from ..types import Candidate
from .datasets import EvalSet
from .runner import external_ids, percentile

# the calibrated threshold keeps at least this share of the in-scope answerable questions answered (of those the
# answerability checks let be answered at some threshold)
MIN_ANSWERED = 0.90
NEVER = -1.0  # the evidence signal of a question the answerability checks abstain on at every threshold


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# -- SQuAD's answer normalisation and token F1 ----------------------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)
_MARKER = re.compile(r"\s?\[chunk:[^\]]*\]")


def normalise(text: str) -> str:
    """Lower case, no punctuation, no articles, single spaces (the SQuAD evaluation script's rule)."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCT)).split())


def contains_answer(answer: str, golds: Sequence[str]) -> bool:
    text = f" {normalise(_MARKER.sub('', answer))} "
    return any(f" {normalise(g)} " in text for g in golds if normalise(g))


def token_f1(answer: str, golds: Sequence[str]) -> float:
    """The best SQuAD token F1 of the answer (markers removed) against any gold answer."""
    pred = normalise(_MARKER.sub("", answer)).split()
    best = 0.0
    for gold in golds:
        ref = normalise(gold).split()
        common = sum((Counter(pred) & Counter(ref)).values())
        if common:
            p, r = common / len(pred), common / len(ref)
            best = max(best, 2 * p * r / (p + r))
    return best


# -- the split ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Split:
    documents: tuple[dict[str, str], ...]  # what is ingested
    in_scope: tuple[str, ...]  # answerable, about the ingested documents
    out_of_scope: tuple[str, ...]  # must be abstained on
    adversarial: tuple[str, ...]  # unanswerable although about an ingested document (reported apart)
    groups_in: int = 0
    groups_out: int = 0


def scope_split(dataset: EvalSet) -> Split:
    if dataset.groups:
        names = sorted(set(dataset.groups.values()), key=_digest)
        kept = set(names[: (len(names) + 1) // 2])
        docs = tuple(d for d in dataset.documents if dataset.doc_groups.get(d["id"]) in kept)
        inside = [q for q in dataset.queries if dataset.groups.get(q) in kept]
        outside = tuple(q for q in dataset.queries if dataset.groups.get(q) not in kept)
        return Split(docs, tuple(q for q in inside if dataset.answerable.get(q, True)), outside,
                     tuple(q for q in inside if not dataset.answerable.get(q, True)), len(kept), len(names) - len(kept))
    if not any(v is False for v in dataset.answerable.values()):
        raise InvalidRequest(f"{dataset.name}: answer evaluation needs questions that must be abstained on: "
                             "groups of documents (SQuAD articles) or questions marked answerable: false")
    return Split(dataset.documents, tuple(q for q in dataset.queries if dataset.answerable.get(q, True)),
                 tuple(q for q in dataset.queries if not dataset.answerable.get(q, True)), ())


def halves(qids: Sequence[str]) -> tuple[list[str], list[str]]:
    """(calibration, held-out) by the parity of sha256(question id)."""
    cal = [q for q in qids if int(_digest(q)[-1], 16) % 2 == 0]
    return cal, [q for q in qids if int(_digest(q)[-1], 16) % 2 == 1]


# -- calibration ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Signals:
    rerank: float | None  # best cross-encoder probability among the first candidates (None: reranker skipped)
    rrf: float  # best RRF score (k = 60) among the first candidates of the fused order


def signals(question: str, col: Collection, k: int) -> Signals:
    """Both evidence signals of one question from one reranked retrieval: the fused order is the candidates
    sorted back by their fused score. With the answerability checks on, each signal is the highest threshold at
    which the question is still answered: the checks look only at candidates above the rerank threshold, so the
    rerank signal is the best candidate probability at which they pass (0 when they pass at none)."""
    info: dict[str, Any] = {}
    ranked = retrieve(question, col.plan(k, None, rerank=True), col, debug=info)
    fused = sorted(ranked, key=lambda c: (-(c.fused_score if c.fused_score is not None else c.score), c.sort_key))
    rrf = judge(fused, reranked=False).score
    rr = judge(ranked, reranked=True).score if info.get("reranker_used") else None
    if col.settings.answerable:
        dfs, chunks = answer_terms(question, col)
        limits = answer_limits(col.settings)

        def highest(candidates: Sequence[Candidate], reranked: bool) -> float:
            """The highest relevance threshold at which the checks let the question be answered (NEVER: none)."""
            levels = sorted({relevance(c, reranked) for c in candidates[: limits.look]}, reverse=True)
            return round(next((t for t in levels if not judge_answerable(
                question, candidates, dfs, chunks, threshold=t, reranked=reranked, limits=limits).abstain),
                NEVER), 6)

        rrf = min(rrf, highest(fused, False))
        if rr is not None:
            rr = min(rr, highest(ranked, True))
    return Signals(rr, rrf)


@dataclass(frozen=True)
class Choice:
    threshold: float
    precision: float
    recall: float
    f1: float
    answered: float  # share of in-scope answerable questions that pass


def choose(scores_in: Sequence[float], scores_out: Sequence[float], min_answered: float = MIN_ANSWERED) -> Choice:
    """The threshold with the best abstain F1 among those that keep at least `min_answered` of the in-scope
    questions answered (the highest answered share when none does); ties go to the lower threshold."""
    candidates = sorted({0.0, *(x for x in (*scores_in, *scores_out) if x >= 0)})
    best: Choice | None = None
    for t in candidates:
        c = _score_threshold(t, scores_in, scores_out)
        key = (c.answered >= min_answered, c.f1 if c.answered >= min_answered else c.answered, -t)
        if best is None or key > (best.answered >= min_answered,
                                  best.f1 if best.answered >= min_answered else best.answered, -best.threshold):
            best = c
    assert best is not None
    return best


def _score_threshold(t: float, scores_in: Sequence[float], scores_out: Sequence[float]) -> Choice:
    abstained_out = sum(1 for s in scores_out if s < t)
    abstained_in = sum(1 for s in scores_in if s < t)
    return Choice(round(t, 6), *_prf(abstained_out, abstained_in, len(scores_out)),
                  1 - abstained_in / len(scores_in) if scores_in else 0.0)


def _prf(true_pos: int, false_pos: int, positives: int) -> tuple[float, float, float]:
    precision = true_pos / (true_pos + false_pos) if true_pos + false_pos else 1.0
    recall = true_pos / positives if positives else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


# -- the answer pass -----------------------------------------------------------------------------------------------

@dataclass
class Asked:
    qid: str
    kind: str  # in_scope, out_of_scope, adversarial
    abstained: bool
    answer: str
    cited_docs: list[str]
    pieces: int
    timings: dict[str, float]
    latency_ms: float
    calculation: dict[str, Any] | None = None


@dataclass
class AnswerReport:
    collection: str
    split: dict[str, int]
    thresholds: dict[str, Any]
    parts: dict[str, dict[str, Any]]
    asked: list[Asked] = field(repr=False, default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # question id -> the error that ended its ask

    def as_dict(self) -> dict[str, Any]:
        return {"collection": self.collection, "split": self.split, "thresholds": self.thresholds,
                "parts": self.parts, "failed": self.failed}


def evaluate_answers(client: Any, dataset: EvalSet, *, collection: str | None = None, tenant: str | None = None,
                     k: int = 12, calibrate: bool = True, min_answered: float = MIN_ANSWERED,
                     max_queries: int | None = None,
                     on_progress: Callable[..., None] | None = None) -> AnswerReport:
    split = scope_split(dataset)
    if not split.in_scope or not split.out_of_scope:
        raise InvalidRequest(f"{dataset.name}: answer evaluation needs both in-scope and out-of-scope questions")
    kinds = {**{q: "in_scope" for q in split.in_scope}, **{q: "out_of_scope" for q in split.out_of_scope},
             **{q: "adversarial" for q in split.adversarial}}
    qids = sorted(kinds, key=_digest)[:max_queries] if max_queries else sorted(kinds, key=_digest)
    if split.documents:
        embedder = client._explicit_embedder() or make_embedder(client.settings.embedder, client.settings)
        name = collection or f"eval-{dataset.name}-scope-{embedder.name}"
        col = client.collection(name, tenant=tenant)
        col.ingest(documents=split.documents, duplicates="keep", near_duplicates=1.0,
                   on_progress=(lambda d, t, note: on_progress("ingest", d, t, note)) if on_progress else None)
    else:
        if not collection:
            raise InvalidRequest("a questions file is evaluated against an existing collection: pass --collection")
        col = client.collection(collection, tenant=tenant, create=False)
    s = col.settings
    cal, held = halves(qids)
    thresholds: dict[str, Any] = {"rerank": s.abstain_rerank_threshold, "rrf": s.abstain_rrf_threshold,
                                  "calibrated": False}
    if calibrate:
        thresholds = _calibrate(col, [q for q in cal if kinds[q] != "adversarial"], kinds, dataset, k,
                                min_answered, on_progress) | {"calibrated": True}
    reranking = s.reranker != "none"
    asked: list[Asked] = []
    external = external_ids(col)
    failed: dict[str, str] = {}
    for n, qid in enumerate(qids, start=1):
        started = time.perf_counter()
        try:
            result = ask(dataset.queries[qid], col.plan(k, None, rerank=reranking), col, debug=True,
                         abstain_thresholds=(float(thresholds["rerank"]), float(thresholds["rrf"])))
        except RagdError as exc:  # one question's failure (an LLM API down) is reported; the others are measured
            if isinstance(exc, DatabaseUnavailable):
                raise
            failed[qid] = f"{exc.code}: {exc}"
            if on_progress:
                on_progress("answers", n, len(qids))
            continue
        debug = result.debug or {}
        asked.append(Asked(qid, kinds[qid], result.abstained, result.answer,
                           [external.get(c["doc_id"], c["doc_id"]) for c in result.citations],
                           len(_MARKER.findall(result.answer)), dict(debug.get("timings_ms", {})),
                           (time.perf_counter() - started) * 1000, result.calculation))
        if on_progress:
            on_progress("answers", n, len(qids))
    parts = {name: {**_score(asked, set(part), dataset), "failed": sum(q in failed for q in part)}
             for name, part in (("calibration", cal), ("held_out", held))}
    return AnswerReport(collection=col.name, thresholds=thresholds, parts=parts, asked=asked, failed=failed,
                        split={"documents": len(split.documents), "groups_in_scope": split.groups_in,
                               "groups_out_of_scope": split.groups_out, "in_scope": len(split.in_scope),
                               "out_of_scope": len(split.out_of_scope), "adversarial": len(split.adversarial),
                               "asked": len(qids), "calibration": len(cal), "held_out": len(held)})


def _calibrate(col: Collection, qids: Sequence[str], kinds: Mapping[str, str], dataset: EvalSet, k: int,
               min_answered: float, on_progress: Callable[[str, int, int], None] | None) -> dict[str, Any]:
    seen: dict[str, Signals] = {}
    for n, qid in enumerate(qids, start=1):
        seen[qid] = signals(dataset.queries[qid], col, k)
        if on_progress:
            on_progress("calibrate", n, len(qids))
    out: dict[str, Any] = {"questions": len(qids)}
    for signal in ("rerank", "rrf"):
        values = {q: getattr(v, signal) for q, v in seen.items() if getattr(v, signal) is not None}
        inside = [v for q, v in values.items() if kinds[q] == "in_scope"]
        outside = [v for q, v in values.items() if kinds[q] == "out_of_scope"]
        if not inside or not outside:
            out[signal] = getattr(col.settings, f"abstain_{signal}_threshold")
            continue
        # a question the checks abstain on at every threshold is lost whatever the threshold: the share to keep is
        # of the others
        reachable = sum(v > NEVER for v in inside) / len(inside)
        choice = choose(inside, outside, min_answered * reachable)
        out[signal] = choice.threshold
        out[f"{signal}_fit"] = {"abstain_precision": round(choice.precision, 4),
                                "abstain_recall": round(choice.recall, 4), "abstain_f1": round(choice.f1, 4),
                                "answered": round(choice.answered, 4)}
    return out


def _score(asked: Sequence[Asked], part: set[str], dataset: EvalSet) -> dict[str, Any]:
    rows = [a for a in asked if a.qid in part]
    inside = [a for a in rows if a.kind == "in_scope"]
    outside = [a for a in rows if a.kind == "out_of_scope"]
    adversarial = [a for a in rows if a.kind == "adversarial"]
    answered = [a for a in inside if not a.abstained]
    p, r, f1 = _prf(sum(a.abstained for a in outside), sum(a.abstained for a in inside), len(outside))
    given = [a for a in rows if not a.abstained and a.kind != "adversarial"]

    def relevant_to(qid: str) -> set[str]:
        return {d for d, g in dataset.qrels.get(qid, {}).items() if g > 0}

    golds = {a.qid: dataset.answers.get(a.qid, ()) for a in answered}
    with_gold = [a for a in answered if golds[a.qid]]
    relevant = {a.qid: relevant_to(a.qid) for a in answered}
    judged = [a for a in answered if relevant[a.qid]]
    out: dict[str, Any] = {
        "questions": len(rows), "in_scope": len(inside), "out_of_scope": len(outside),
        "abstain_precision": p, "abstain_recall": r, "abstain_f1": f1,
        "answered": len(answered) / len(inside) if inside else 0.0,
        "adversarial_abstained": (sum(a.abstained for a in adversarial) / len(adversarial)) if adversarial else None,
        "answer_recall": _mean([contains_answer(a.answer, golds[a.qid]) for a in with_gold]),
        "token_f1": _mean([token_f1(a.answer, golds[a.qid]) for a in with_gold]),
        "citation_precision": _mean([_share(a.cited_docs, relevant[a.qid]) for a in judged]),
        "citation_recall": _mean([len(relevant[a.qid] & set(a.cited_docs)) / len(relevant[a.qid]) for a in judged]),
        "at_most_3_pieces": _mean([a.pieces <= 3 for a in answered]),
        # answers (in scope or not) that cite a document other than the question's own: the look-alike failure
        "wrong_document_answers": _mean([bool(set(a.cited_docs) - relevant_to(a.qid)) for a in given]),
        **_arithmetic([a for a in answered if dataset.kinds.get(a.qid, "").startswith("arithmetic")], dataset),
        "latency_ms": {"p50": percentile([a.latency_ms for a in rows], 50),
                       "p95": percentile([a.latency_ms for a in rows], 95)},
        "stages_ms": {stage: {"p50": percentile(v, 50), "p95": percentile(v, 95)}
                      for stage, v in sorted(_stages(rows).items())},
    }
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in out.items()}


def _arithmetic(answered: Sequence[Asked], dataset: EvalSet) -> dict[str, Any]:
    """Questions whose gold answer is a computation (TAT-QA's arithmetic), among the in-scope ones answered: the
    share answered with a computation, exact (the gold figure at the gold's own precision) among those, and the
    share answered by quotes alone (neither a computation nor a stated refusal to compute)."""
    if not answered:
        return {}
    results = {a.qid: float(a.calculation["result"]) for a in answered if a.calculation and "result" in a.calculation}
    computed = [a for a in answered if a.qid in results]
    exact = [a for a in computed if _exact(results[a.qid], dataset.answers.get(a.qid, ()))]
    return {"arithmetic_answered": len(answered), "arithmetic_computed": len(computed) / len(answered),
            "arithmetic_exact": len(exact) / len(computed) if computed else 0.0,
            "arithmetic_quotes_only": sum(not a.calculation for a in answered) / len(answered)}


def _exact(value: float, golds: Sequence[str]) -> bool:
    """The value is the gold figure at the gold's precision (17.697 for 17.7; 3891.0 for 3891)."""
    for gold in golds:
        try:
            figure = float(gold.replace(",", ""))
        except ValueError:
            continue
        places = len(gold.split(".")[1]) if "." in gold else 0
        if round(value, places) == round(figure, places):
            return True
    return False


def _stages(rows: Sequence[Asked]) -> dict[str, list[float]]:
    stages: dict[str, list[float]] = {}
    for a in rows:
        for stage, ms in a.timings.items():
            stages.setdefault(stage, []).append(ms)
    return stages


def _share(cited: Sequence[str], relevant: set[str]) -> float:
    return sum(1 for d in cited if d in relevant) / len(cited) if cited else 0.0


def _mean(values: Sequence[float | bool]) -> float:
    return sum(float(v) for v in values) / len(values) if values else 0.0


__all__ = ["AnswerReport", "Choice", "Signals", "choose", "contains_answer", "evaluate_answers", "normalise",
           "scope_split", "signals", "token_f1"]
