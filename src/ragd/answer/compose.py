"""An answer as the library composes it: the question read, a figure of a named filing's statements read
before retrieval, the passages retrieved (retrieve.search), the evidence judged and the question's answerability
checked, the context fitted to its budget, the answer written (extractive, or by the configured generator) with
its citations checked, or an abstention with its reason; each answer recorded with what reproduces it and logged
on `ragd.query`.

It knows the collection it answers from through `Asked` (engine.Asked is one) and imports nothing of the
engine."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import re
import time
import uuid
from collections import abc
from collections.abc import Sequence
from typing import Any, Protocol

from .. import fiscal, ids
from ..config import Settings
from ..embed.base import TokenCounter
from ..metrics import count_answer
from ..rerank import CrossEncoder, probability
from ..retrieve.legs import (
    candidate,
)
from ..retrieve.scope import ANNUAL, Scope, issuer_words, names_issuer, statement_documents
from ..retrieve.search import Reading, Searched, Stopwatch, retrieve, scope_for
from ..store import queries
from ..telemetry import annotate, log_timestamp, span
from ..types import Answer, Candidate, Plan
from . import PROMPT_VERSION, Budget, choice, formula, periods, render, select, statements
from .abstain import ABSTAIN_ANSWER, declines, judge
from .answerable import Judgement, Limits, constraints, content_stems, stem
from .answerable import judge as judge_answerable
from .arithmetic import Calculation, Refusal, compute
from .choice import Chosen
from .citations import MARKER, check, citation
from .extractive import extract
from .generators import Completion, Generator
from .question import ReadQuestion, decimals_asked, read_question
from .statements import Computed, Missing


class Answering(Reading, Protocol):
    """What an answer needs of the library beyond a search: the configured generator."""

    @property
    def generator(self) -> Generator | None: ...


class Asked(Searched, Protocol):
    """What an answer needs of the collection it answers from (engine.Collection is one)."""

    @property
    def client(self) -> Answering: ...

    @property
    def counter(self) -> TokenCounter: ...


@dataclasses.dataclass(frozen=True)
class _Written:
    text: str
    cited: tuple[Candidate, ...] = ()
    invalid: tuple[str, ...] = ()
    reason: str = ""  # why it abstained
    completion: Completion | None = None
    prompt_version: str | None = None
    calculation: dict[str, Any] | None = None
    told: bool = False  # the reason is the user's to read (what the documents lack), not an internal signal


def ask(question: str, plan: Plan, store: Asked, *, debug: bool = False, request_id: str | None = None,
        abstain_thresholds: tuple[float, float] | None = None, emit_log: bool = True) -> Answer:
    """Retrieve (reranked when the plan says so), judge the evidence, fit the context to the budget, write the
    answer with the configured generator, keep only citations of the context; abstain when any step finds no
    support. Each answer is recorded (query_executions) with what reproduces it. A generator that fails raises
    LLMUnavailable. `abstain_thresholds` (rerank, rrf) replace the configured ones (calibration). The query's log
    line is written to `ragd.query` unless `emit_log` is false (the REST adapter adds the HTTP status first); it is
    also on `Answer.log`."""
    col = store
    started = time.perf_counter()
    timings: dict[str, float] = {}
    info: dict[str, Any] = {}
    # a figure of a named issuer's statements is read before retrieval: when they give it, the passages retrieved
    # are only its context, and are not reranked (the cross-encoder is most of an answer's time)
    understood = fiscal.canonical(question)  # its periods in one notation; the question as asked is what is recorded
    scope = scope_for(understood, col)
    understood = scope.understood or understood  # a fiscal year named by the year it ends in, as the issuer names it
    read = read_question(understood)
    early = lead = None
    if scope.issuers and not scope.unheld and not (plan.filters.doc_ids or plan.filters.external_ids):
        movement = statements.asks_movement(read.text)
        early = _from_statements(read, scope, col, timings, movement)
        if movement:  # the movement whose reasons are asked leads the reasons quoted
            lead, early = (early if isinstance(early, Computed) else None), None
    if isinstance(early, (Computed, Chosen)) and plan.rerank:
        plan = dataclasses.replace(plan, rerank=False)
    ranked = retrieve(understood, plan, col, timings=timings, debug=info, scope=scope)
    if isinstance(early, (Computed, Chosen)):  # the statements' cells the figure is read from lead the evidence
        ranked = _led_by(early.cited(), ranked, plan.k)
    s = col.settings
    reranked = bool(info.get("reranker_used"))
    rerank_floor, rrf_floor = abstain_thresholds or (s.abstain_rerank_threshold, s.abstain_rrf_threshold)
    evidence = judge(ranked, reranked=reranked, rerank_threshold=rerank_floor, rrf_threshold=rrf_floor)
    unheld = _unheld(scope, col)
    stated = None if unheld else early
    answerable = None
    if unheld:
        answerable = Judgement(True, "scope", unheld)
    elif isinstance(stated, (Computed, Chosen)):
        answerable = Judgement(False, "statements", evidence=tuple(stated.cited()))
    elif isinstance(stated, Missing) and stated.metric:  # a metric whose operands the statements do not give
        answerable = Judgement(True, "statements", stated.reason)
    elif not evidence.abstain and s.answerable and not _shows_choice(read.text, understood, ranked, scope, reranked,
                                                                      rerank_floor):
        answerable = _answerable(read.text, ranked, col, reranked, rerank_floor if reranked else rrf_floor, timings,
                                 scope)
    context = select(ranked, col.counter, Budget())
    clock = Stopwatch(timings)
    generator = col.client.generator
    if unheld:
        written = _Written(ABSTAIN_ANSWER, reason=unheld)
    elif isinstance(stated, (Computed, Chosen)):  # a figure of the named document's statements, its cells cited
        said = stated.sentence(decimals_asked(read.instructions))
        which_way = statements.verdict(read.text, stated) if isinstance(stated, Computed) else None
        checked = check(f"{which_way}. {said}" if which_way else said, [*context.chunks, *stated.cited()])
        written = _Written(checked.text, checked.cited, checked.invalid, calculation=stated.as_dict())
    elif lead is not None and generator is None:  # the movement computed, and the reasons its filing gives
        written = _with_movement(lead, read.text, ranked, plan, col, reranked, decimals_asked(read.instructions),
                                 timings)
    elif evidence.abstain:
        written = _Written(ABSTAIN_ANSWER, reason=f"weak evidence: {evidence.signal} {evidence.score} < "
                                                  f"{evidence.threshold}")
    elif answerable is not None and answerable.abstain:
        written = _Written(ABSTAIN_ANSWER, reason=f"{answerable.check}: {answerable.reason}")
    else:
        provider = generator.provider if generator else "extractive"
        with span(f"rag.generator.{provider}", **{"rag.generator": generator.name if generator else "extractive",
                                                  "rag.context_chunks": len(context.chunks),
                                                  "rag.context_tokens": context.tokens}) as current:
            supported = {c.chunk_id for c in answerable.evidence} if answerable is not None else None
            written = (_extractive(understood, read.text, context.chunks, col, reranked, rerank_floor, supported,
                                   bool(scope.issuers))
                       if generator is None else _generated(question, context.chunks, generator))
            done = written.completion
            annotate(current, **{"rag.abstained": not written.cited,
                                 "rag.prompt_tokens": done.prompt_tokens if done else None,
                                 "rag.completion_tokens": done.completion_tokens if done else None})
    clock.lap("generate")
    if answerable is not None and answerable.check == "partial" and written.cited:
        written = dataclasses.replace(written, text=f"{written.text} (The documents do not cover "
                                                    f"{', '.join(answerable.missing)}.)")
    cited = written.cited
    text = written.text if cited else ABSTAIN_ANSWER
    generator_name = generator.name if generator else "extractive"
    # the context was laid out (and counted) in this template version's format, whichever generator wrote
    prompt_version = written.prompt_version or PROMPT_VERSION
    record = None
    if debug:
        record = {**info, "abstain_reason": written.reason or None,
                  "evidence": {**dataclasses.asdict(evidence), "check": "relevance" if evidence.abstain else (
                      answerable.check if answerable is not None else "relevance")},
                  "answerability": answerable.as_dict() if answerable is not None else None,
                  "generator": generator_name, "prompt_version": prompt_version,
                  "context_chunk_ids": [str(c.chunk_id) for c in context.chunks],
                  "context_tokens": context.tokens, "invalid_citations": list(written.invalid),
                  "calculation": written.calculation if cited else None,
                  "plan": {"fusion": plan.fusion, "k": plan.k, "k_vec": plan.k_vec, "k_lex": plan.k_lex,
                           "keyword_weight": plan.keyword_weight, "semantic_weight": plan.semantic_weight,
                           "rrf_k": plan.rrf_k, "rerank": plan.rerank, "exact": plan.exact},
                  "retrieved": [{"chunk_id": str(c.chunk_id), "score": c.score, "rerank_score": c.rerank_score,
                                 "title": c.title, "external_id": c.external_id,
                                 "pages": list(c.metadata.get("pages") or ()),
                                 "vector_rank": c.vector_rank, "vector_score": c.vector_score,
                                 "lexical_rank": c.lexical_rank, "lexical_score": c.lexical_score}
                                for c in ranked],
                  "timings_ms": {k: round(v, 2) for k, v in timings.items()},
                  "latency_ms": round((time.perf_counter() - started) * 1000, 2)}
        if written.completion is not None:
            record["generated"] = written.completion.text
            record["finish_reason"] = written.completion.finish_reason
    canonical = {"answer": text, "abstained": not cited, "cited": [str(c.chunk_id) for c in cited],
                 "context": [str(c.chunk_id) for c in context.chunks]}
    digest = hashlib.sha256(json.dumps(canonical, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    query_id = uuid.uuid4()
    if record is not None:
        record["result_hash"] = digest
        record["query_id"] = str(query_id)  # its reproducibility record
    citations = tuple(citation(c) for c in cited)
    reranker = col.client.reranker if reranked else None
    with col.store.tenant(col.tenant) as conn:
        conn.execute(queries.INSERT_EXECUTION, {
            "query_id": query_id, "tenant_id": col.tenant, "collection_id": col.collection_id,
            "request_id": request_id, "question_hash": ids.sha256_text(question), "question": question,
            "plan": json.dumps({**plan.as_dict(), "filters": plan.filters_dict()}, sort_keys=True),
            "models": json.dumps({"embedder": col.embed_model, "reranker": reranker.version if reranker else None,
                                  "generator": generator.version if generator else "extractive"}, sort_keys=True),
            "prompt_version": prompt_version, "generator": generator_name,
            "chunk_ids": [c.chunk_id for c in ranked],
            "retrieved": json.dumps([{"chunk_id": str(c.chunk_id), "score": c.score, "rerank_score": c.rerank_score}
                                     for c in ranked]),
            "context_ids": [c.chunk_id for c in context.chunks], "answer": text,
            "citations": json.dumps(list(citations)), "abstained": not cited,
            "timings": json.dumps({k: round(v, 2) for k, v in timings.items()}), "result_hash": digest})
    line = query_log_line(col, plan, info, timings, context.tokens, len(context.chunks), not cited, request_id,
                          question, (time.perf_counter() - started) * 1000, generator, written.completion)
    if emit_log and QUERY_LOG.isEnabledFor(logging.INFO):
        QUERY_LOG.info(json.dumps(line))
    count_answer(col.tenant, not cited, timings, line["latency_ms_total"])
    closest: tuple[dict[str, Any], ...] = ()
    if answerable is not None and answerable.abstain and not cited:
        lacks = {c.chunk_id: c.missing for c in answerable.checks}
        closest = tuple({**citation(c), "missing": list(lacks[str(c.chunk_id)])} for c in ranked
                        if str(c.chunk_id) in lacks)[:3]
    return Answer(answer=text, citations=citations, abstained=not cited, debug=record, result_hash=digest,
                  query_id=query_id, log=line, calculation=written.calculation if cited else None,
                  # what the writer found the documents lack (a movement no passage explains) is said before
                  # what the answerability checks found: it answered from the statements, whatever they held
                  reason=written.reason if written.told and not cited else answerable.reason if (
                      answerable is not None and answerable.abstain and (
                          closest or answerable.check in ("scope", "statements"))) else None,
                  closest=closest)


def _unheld(scope: Scope, col: Asked) -> str | None:
    """Why the collection cannot answer a question naming a document it does not hold: an issuer none of its
    documents carries (a possessive name no chunk holds: "Walmart's"), or a period none of the issuer's covers."""
    if scope.issuers:
        return scope.unheld
    if scope.unknown:
        with col.client.reading(col.tenant) as conn:
            row = conn.execute(queries.TERM_DFS, {"collection_id": col.collection_id,
                                                  "terms": [stem(scope.unknown[0].lower())]}).fetchone()
        if not (row and row[1]):
            return scope.unheld or f"no document of {scope.unknown[0]} in this collection"
    return None


def _from_statements(read: ReadQuestion, scope: Scope, col: Asked, timings: dict[str, float],
                     movement: bool = False) -> Computed | Chosen | Missing | None:
    """A line item or metric of the document the question names (answer.statements), read from its statements'
    tables, or the one of the items it names that stands first by a measure (answer.choice: "among operating,
    investing and financing activities, which brought in the most cash"): only where the question names an issuer
    the collection holds (which document's statements is then known); its documents tried in the order of
    `statement_documents`. A choice among items it does not name ("which segment had the highest X") is not read
    here: the total's X is no answer. A trend asked with no year ("are its gross margins historically
    consistent?") is read over the years of the issuer's latest annual filing; `movement`: the question asks what
    drove a change (`statements.asks_movement`), read against the year before."""
    years = periods.years_asked(read.text)
    definition = formula.defined(read.asked)
    if definition is not None and years:  # a figure the question says how to compute
        return _defined(definition, read, scope, col, timings, years)
    chooses = choice.asked(read.text)
    over: list[int] = []
    annual = [h.fiscal_year for h in scope.held if h.form in ANNUAL and h.fiscal_year]
    if not years and chooses is None and annual and statements.asks_trend(read.text):  # over the latest years
        years = over = list(range(max(annual) - statements.TREND_YEARS + 1, max(annual) + 1))
        scope = dataclasses.replace(scope, years=(over[-1],))  # whose statements are read first
    if not years or (chooses is None and statements.asked(read.text, cause=movement) == (None, None)) or (
            chooses is not None and not chooses.options):
        return None
    started = time.perf_counter()
    hint = statements.statement_hint(read.instructions)
    percent = statements.asks_percent(read.asked)
    outcome: Computed | Chosen | Missing | None = None
    with contextlib.closing(_statement_chunks(scope, col)) as documents:
        for chunks in documents:
            if chooses is not None:
                outcome = choice.choose(read.text, chunks, years)
            else:  # the quarters are read from the question as asked: read.text writes "Q2 of FY2023" as its year
                tables = [t for c in chunks for t in periods.Table.read(c)]
                outcome = statements.answer(read.text, tables, hint, percent=percent, original=read.asked,
                                            movement=movement, over=over)
            if isinstance(outcome, (Computed, Chosen)):
                break
    timings["statements"] = (time.perf_counter() - started) * 1000
    return outcome


def _statement_chunks(scope: Scope, col: Asked) -> abc.Generator[list[Candidate], None, None]:
    """The table chunks of the named issuers' documents whose statements a figure is read from, a document at a
    time in the order of `statement_documents` (the first three), on one read connection."""
    with col.client.reading(col.tenant) as conn:
        for doc_id in statement_documents(scope)[:3]:
            rows = conn.execute(queries.DOCUMENT_TABLES, {"doc_id": doc_id,
                                                          "collection_id": col.collection_id}).fetchall()
            yield [candidate(row, 0.0) for row in rows]


def _defined(definition: formula.Definition, read: ReadQuestion, scope: Scope, col: Asked,
             timings: dict[str, float], years: Sequence[int]) -> Computed | Missing:
    """The formula a question defines, computed for its latest year from the statements of the first of the named
    issuer's documents (`statement_documents`) that gives every operand; else what the first one lacks."""
    started = time.perf_counter()
    hint = statements.statement_hint(read.instructions)
    quarter = periods.quarters_asked(read.asked).get(max(years))
    first: Missing | None = None
    outcome: Computed | Missing | None = None
    with contextlib.closing(_statement_chunks(scope, col)) as documents:
        for chunks in documents:
            tables = [t for c in chunks for t in periods.Table.read(c)]
            outcome = formula.compute(definition, tables, max(years), hint, quarter,
                                      percent=statements.asks_percent(read.asked))
            if isinstance(outcome, Computed):
                break
            first = first or outcome
    timings["statements"] = (time.perf_counter() - started) * 1000
    return outcome if isinstance(outcome, Computed) else first or Missing(definition.name, ("its statements",),
                                                                          metric=True)


def _with_movement(lead: Computed, asked: str, ranked: Sequence[Candidate], plan: Plan, col: Asked,
                   reranked: bool, decimals: int | None, timings: dict[str, float]) -> _Written:
    """The movement of the measure a question asks the reasons of ("Operating margin, 2022: 19.1%, down 1.7 points
    from 20.8% in 2021 = ..."), then the sentences of the same filing that give a cause and speak of the measure
    (in whatever words: "operating income as a percentage of net sales"); when none is found, an abstention saying
    so, with the movement. The figure grounds the answer in the filing its statements are read from; the reasons
    are its passages retrieved for the question, then (the plan's other filters kept) for the items that move the
    measure ("cost of goods sold" for a gross margin: a filing may explain its margin by its costs and never say
    "gross margin")."""
    reranker = col.client.reranker
    model = reranker if reranked and isinstance(reranker, CrossEncoder) else None
    doc = lead.facts[0].chunk.doc_id
    topic = statements.topic(lead)
    own = [c for c in ranked if c.doc_id == doc and c.chunk_type != "table"][:REASON_CHUNKS]
    movers = statements.movers(lead)
    if movers:
        started = time.perf_counter()
        beside = dataclasses.replace(plan, filters=dataclasses.replace(plan.filters, doc_ids=(doc,)), rerank=False,
                                     k=REASON_CHUNKS)
        seen = {c.chunk_id for c in own}
        own += [c for c in retrieve(f"{asked} {movers}", beside, col) if c.chunk_type != "table"
                and c.chunk_id not in seen][:REASON_CHUNKS]
        timings["reasons"] = (time.perf_counter() - started) * 1000
    quoted = extract(asked, own, model, max_chunks=len(own), topic=topic, year=lead.years[-1]).text
    if not quoted:  # the reasons asked are not found: an abstention, which tells the movement it would explain
        moved = MARKER.sub("", lead.sentence(decimals))
        return _Written(ABSTAIN_ANSWER, reason=f"no passage of the filing says what drove it; {moved}", told=True)
    checked = check(f"{lead.sentence(decimals)} {quoted}", [*own, *lead.cited()])
    return _Written(checked.text, checked.cited, checked.invalid, calculation=lead.as_dict())


REASON_CHUNKS = 5  # the filing's passages retrieved first in which the reasons for a movement are looked for


def _led_by(lead: Sequence[Candidate], ranked: Sequence[Candidate], k: int) -> list[Candidate]:
    """The chunks `lead` first (scored as the best retrieved, so the list stays in score order), then the retrieved
    ones they do not repeat, k in all."""
    top = max((c.score for c in ranked), default=1.0)
    first = [dataclasses.replace(c, score=top) for c in lead]
    held = {c.chunk_id for c in first}
    return [*first, *(c for c in ranked if c.chunk_id not in held)][:max(k, len(first))]


def _shows_choice(asked: str, question: str, ranked: Sequence[Candidate], scope: Scope, reranked: bool,
                  floor: float) -> bool:
    """Whether a choice asked of a named issuer ("which of its segments had the highest X") is shown by a table of
    its documents retrieved: that table answers it, whatever words of the question its passages repeat (the
    answerability checks are then not asked; `_extractive` reads the same table)."""
    if not scope.issuers or choice.asked(asked) is None:
        return False
    return choice.choose(asked, _relevant(ranked, reranked, floor), *_period_asked(asked, question)) is not None


def _relevant(chunks: Sequence[Candidate], reranked: bool, floor: float) -> list[Candidate]:
    """After a rerank, the chunks the cross-encoder judged relevant enough (at or above `floor`); else all."""
    return [c for c in chunks if c.rerank_score is not None and probability(c.rerank_score) >= floor] \
        if reranked else list(chunks)


def _period_asked(asked: str, question: str) -> tuple[list[int], int | None]:
    """The years `asked` names, and the fiscal quarter the question names of the last of them."""
    years = periods.years_asked(asked)
    return years, periods.quarters_asked(question).get(years[-1]) if years else None


def _issuer_names(question: str, scope: Scope | None) -> frozenset[str]:
    """The question's words that name an issuer its scope holds ("JnJ", "3M", "jpm's", "best buy"): its documents'
    identity answers for them, whatever their passages call it ("we", "the Company")."""
    if scope is None or not scope.issuers:
        return frozenset()
    return issuer_words(question, scope.held) | {c for c in constraints(question) if names_issuer(c, scope.held)}


def _answerable(asked: str, ranked: Sequence[Candidate], col: Asked, reranked: bool,
                threshold: float, timings: dict[str, float], scope: Scope | None = None) -> Judgement:
    """The answerability checks (answer/answerable.py) over the first candidates, with the collection's document
    frequencies of the question's words; their milliseconds go to `timings["answerable"]`. `asked`: what the
    question asks, its instructions set apart (they steer the answer, they are not evidence to find)."""
    started = time.perf_counter()
    dfs, chunks = answer_terms(asked, col)
    # a named issuer's filings are look-alikes of each other (the same statements, other periods), whichever of
    # them retrieval kept to: every check applies
    judged = judge_answerable(asked, ranked, dfs, chunks, threshold=threshold, reranked=reranked,
                              limits=answer_limits(col.settings), satisfied=_issuer_names(asked, scope),
                              lookalikes=scope is not None and len(scope.held) > 1)
    timings["answerable"] = (time.perf_counter() - started) * 1000
    return judged


def answer_terms(question: str, col: Asked) -> tuple[dict[str, int], int]:
    """The collection's document frequency of each content word of the question (absent: not held), and its
    chunk count (at least 1)."""
    with col.client.reading(col.tenant) as conn:
        row = conn.execute(queries.TERM_DFS, {"collection_id": col.collection_id,
                                              "terms": content_stems(question)}).fetchone()
    return (dict(row[1]), max(int(row[0]), 1)) if row else ({}, 1)


def answer_limits(s: Settings) -> Limits:
    return Limits(min_coverage=s.answerable_min_coverage, min_phrases=s.answerable_min_phrases,
                  single_source_coverage=s.answerable_single_source_coverage)


def _extractive(question: str, asked: str, context: Sequence[Candidate], col: Asked, reranked: bool,
                threshold: float, supported: set[uuid.UUID] | None = None, named: bool = False) -> _Written:
    """The context's best sentences, each with its marker, chosen for what the question `asked` (its instructions
    set apart; the arithmetic reads the whole question). After a rerank only chunks the cross-encoder itself
    judged relevant enough may be quoted, and it scores the sentences; when the answerability checks ran, only the
    chunks that passed them (`supported`). A computation asked of a document the question `named` (an issuer's
    filing) that cannot be done is an abstention saying why and showing the rows found nearest. A
    question choosing among several by a measure is answered from a table showing them all (answer.choice)."""
    reranker = col.client.reranker
    model = reranker if reranked and isinstance(reranker, CrossEncoder) else None
    quotable = _relevant(context, reranked, threshold)
    relevant = quotable
    if supported is not None:
        quotable = [c for c in quotable if c.chunk_id in supported]
    # a table of the named document showing the options answers a choice though it does not say the question's
    # words ("business segments", "lowest"): retrieval kept to that issuer's filings, and the table's own rows say
    # which options and figures it holds
    chosen = choice.choose(asked, relevant if named else quotable, *_period_asked(asked, question))
    if chosen is not None:  # which of several stands first by a measure, from a table showing them all
        checked = check(chosen.sentence(), context)
        return _Written(checked.text, checked.cited, checked.invalid, calculation=chosen.as_dict())
    calc = compute(question, quotable)
    if isinstance(calc, Calculation):
        checked = check(calc.sentence(), context)
        return _Written(checked.text, checked.cited, checked.invalid, calculation=calc.as_dict())
    if isinstance(calc, Refusal) and named:  # of a named filing: an abstention saying why and what was found
        found = "; ".join(row for row, _ in calc.rows[:3])
        return _Written(ABSTAIN_ANSWER, reason=f"the {calc.operation.replace('_', ' ')} could not be computed: "
                                               f"{calc.reason}" + (f"; closest: {found}" if found else ""), told=True)
    quoted = extract(asked, quotable, model).text
    said = MARKER.sub("", quoted)
    if named and quoted and statements.asks_share(question) and not _PERCENT_SAID.search(said):
        # a share asked of a named filing whose sentences give amounts only: no answer of the kind asked
        return _Written(ABSTAIN_ANSWER, reason="no passage of the filing gives the percentage asked; closest: "
                                               f"{_clipped(said)}", told=True)
    calculation = None
    if isinstance(calc, Refusal):  # asked for a computation that cannot be done: say so, quote what was found
        rows = " ".join(f"{row} [chunk:{chunk.chunk_id}]" for row, chunk in calc.rows) or quoted
        quoted = f"The {calc.operation.replace('_', ' ')} could not be computed: {calc.reason}. {rows}".strip()
        calculation = {"operation": calc.operation, "refused": calc.reason}
    checked = check(quoted, context)
    if not checked.cited:
        return _Written(ABSTAIN_ANSWER, invalid=checked.invalid,
                        reason="no sentence of the context supports an answer")
    return _Written(checked.text, checked.cited, checked.invalid, calculation=calculation)


_PERCENT_SAID = re.compile(r"%|\bpercent|\bper\s+cent\b", re.IGNORECASE)


def _clipped(text: str, limit: int = 300) -> str:
    """A text on one line, cut at a word before `limit` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit].rsplit(" ", 1)[0] + " ..."


def _generated(question: str, context: Sequence[Candidate], generator: Generator) -> _Written:
    """The model's answer to prompt v1 over the context, its citations checked: one that is not a context chunk
    is removed, and an answer left with none, or that says the context does not answer, is an abstention."""
    prompt = render(question, context)
    completion = generator.complete(prompt)
    checked = check(completion.text, context)
    reason = ""
    if declines(completion.text):
        reason = "the generator said the context does not answer the question"
    elif not checked.cited:
        reason = "the generated answer cites no chunk of the context"
    if reason:
        return _Written(ABSTAIN_ANSWER, (), checked.invalid, reason, completion, prompt.version)
    return _Written(checked.text, checked.cited, checked.invalid, "", completion, prompt.version)


QUERY_LOG = logging.getLogger("ragd.query")


def query_log_line(col: Asked, plan: Plan, info: dict[str, Any], timings: dict[str, float],
                   context_tokens: int, context_chunks: int, abstained: bool, request_id: str | None, question: str,
                   total_ms: float, generator: Generator | None = None,
                   completion: Completion | None = None) -> dict[str, Any]:
    """The JSON line of an answered query (logger `ragd.query`), with the fields of seed 001 ("Logging and
    Observability"); the question only as its hash. `http_status` is the REST adapter's to fill."""
    return {
        "ts": log_timestamp(),
        "tenant_id": col.tenant, "collection": col.name, "request_id": request_id,
        "question_hash": ids.sha256_text(question), "k_vec": plan.k_vec, "k_fts": plan.k_lex,
        "k_rerank": info.get("k_rerank", 0), "num_vec_candidates": info.get("num_vec_candidates", 0),
        "num_fts_candidates": info.get("num_fts_candidates", 0),
        "num_merged_candidates": info.get("num_merged_candidates", 0),
        "reranker_used": bool(info.get("reranker_used")), "reranker_skipped": bool(info.get("reranker_skipped")),
        "reranker_latency_ms": info.get("reranker_latency_ms"), "num_context_chunks": context_chunks,
        "context_tokens_est": context_tokens, "abstained": abstained, "latency_ms_total": round(total_ms, 2),
        **{f"latency_ms_{name}": round(timings.get(stage, 0.0), 2) for name, stage in (
            ("embed", "embed"), ("vec", "vector"), ("fts", "lexical"), ("merge", "fuse"), ("rerank", "rerank"),
            ("llm", "generate"))},
        "llm_provider": generator.provider if generator else "extractive",
        "llm_model": generator.model if generator else None,
        "llm_prompt_tokens": completion.prompt_tokens or 0 if completion else 0,
        "llm_completion_tokens": completion.completion_tokens or 0 if completion else 0,
        "http_status": None,
    }
