"""Answerability beyond relevance: whether the evidence answers *this* question, not a question like it.

A cross-encoder says a passage is about the question's topic; on a collection of look-alike documents (annual
reports of many companies, one policy for many countries) another document's passage is about the same topic
with a probability of 0.98. What tells them apart is what the question pins down and the passage does not say.
After the relevance judgement (`abstain.judge`) has passed, each of the first candidates the cross-encoder judged
relevant is checked, best first:

- **constraints**: the years, quoted terms and capitalised names of the question must appear in the candidate
  (its text, its document's title or its headings);
- **answer type**: a question that asks for a number ("how many", "what was the amount"), a date ("when", "in
  which year") or a person ("who") needs a candidate holding one;
- **coverage**: the question's content words (Snowball stems, as PostgreSQL's `english` configuration takes
  them; words that only frame the question, FRAMING, do not count), each weighted by its rarity in the
  collection (BM25's idf), must be covered to at least `min_coverage` of their weight: a question about
  "liquidity" is not answered by a passage about revenue;
- **phrases**: at least `min_phrases` of the question's adjacent pairs of content words ("net receivables") must
  be held together by the candidate: near each other in one of its sentences (WINDOW), or in one row of a table
  or a row and its header (a cell is read with its row and its column). A look-alike holds the words scattered.

Coverage and phrases are asked in full only where look-alikes compete: when the relevant candidates come from
more than one source (told apart by title, or by document when untitled). Passages of one source differ from a
question in wording (a paraphrase), not in what they are about, so there only `single_source_coverage` is asked.

The first candidate that passes is the evidence, and only passing candidates may be quoted. When none passes,
the answer is an abstention that names the check that decided and what was missing ("not enough evidence: no
passage says 2016"). Everything is deterministic: the same question, collection and settings give the same
judgement. The defaults were chosen on the calibration half of TAT-QA's look-alike split and SQuAD 2.0's
topical one and measured on their held-out halves (see the README's answer figures); what was tried and dropped
(a margin over the best other document, a bound on the rarest missing word) made no difference there.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import threading
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import snowballstemmer

from ..compress import split_sentences
from ..rerank import probability
from ..types import Candidate
from .abstain import rrf
from .extractive import table_lines

# Words that frame a question rather than name what it is about: how it asks (interrogatives, "respectively"),
# what it wants done (compare, rank, add up, explain) and how much, and the words that describe the answer
# rather than constrain it ("mainly", "significant", "roughly", "the company", "based on"). They are not evidence
# a passage must hold: "which year was revenue highest" is answered by a table that never says "highest". The list
# is of English, not of any collection.
FRAMING = frozenset("""
what which who whom whose when where why how whether many much respectively both each either neither every all
any also please tell give list name state describe explain define mean means meant refer refers referred
highest lowest largest smallest biggest greatest least most more less fewer greater larger smaller bigger higher
lower top bottom rank ranked first last second third maximum minimum max min exceed exceeded exceeding
change changed changes increase increased increases decrease decreased decreases difference differ different
compare compared comparison versus vs growth grow grew rise rose fall fell decline declined
total sum average mean ratio proportion percentage percent share portion fraction number amount value figure
figures count counted combined altogether overall across between among during within from to over under
reason reasons cause caused causes led lead leads result resulted results due because driven drive drives drove driving
driver drivers factor
factors contribute contributed contributing attributable explain explained impact affect affected
year years period periods fiscal annual annually quarter quarters respective
type types kind kinds component components item items element elements category categories part parts detail
details analysis disclosure disclose disclosed calculate calculated calculation compute computed represent
represents represented consist consists include includes included including
mainly mostly primarily largely chiefly roughly approximately around about nearly almost significant significantly
major main key notable notably overall generally really actually currently basically essentially
company companies firm based basis get gets got getting go goes went gone going
""".split())
# Function words: PostgreSQL's `english` stop words that matter here, and the question's own.
STOP = frozenset("""
a an the of in on at to for from by with and or nor as is are was were be been being this that these those it its
their them they our we you your i me my he she his her him what which who how when where why did does do doing has
have having had than then there here per into out up down about vs not no if so such can could would should will
shall may might must just only own same other others
""".split())
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_FIGURE = re.compile(r"^\d[\d.,]*$")
_YEAR = re.compile(r"(?<![\d.,])(?:1\d|20)\d\d(?![\d.,]\d)")
_QUOTED = re.compile(r"[\"\u201c]([^\"\u201d]{2,80})[\"\u201d]|(?<!\w)'([^']{2,80})'(?!\w)")
_POSSESSIVE = re.compile(r"['\u2019]s?$")
_NAME = re.compile(r"(?<=[\w,;:)] )[A-Z][\w&.'-]*[A-Za-z0-9]")
WINDOW = 3  # words of a pair held together are at most this many content words apart in one sentence
_STEMMER = snowballstemmer.stemmer("english")
_LOCK = threading.Lock()  # a Snowball stemmer object keeps state between calls


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    with _LOCK:
        return str(_STEMMER.stemWord(word))


def words(text: str) -> list[str]:
    """Lower-case words of letters or digits ("65-nanometer" is two, "1,571.7" is three)."""
    return _WORD.findall(text.lower())


def _framing(tokens: Sequence[str]) -> list[bool]:
    """Which tokens frame the question: FRAMING words and stop words, and the word after "how" ("how long",
    "how often", "how old")."""
    return [t in STOP or t in FRAMING or (i > 0 and tokens[i - 1] == "how") for i, t in enumerate(tokens)]


def content_stems(text: str) -> list[str]:
    """The stems of a question's words that are neither stop words nor framing words, in order, once each."""
    tokens = words(_POSSESSIVE_S.sub(" ", text))
    return list(dict.fromkeys(stem(t) for t, skip in zip(tokens, _framing(tokens)) if not skip))


_POSSESSIVE_S = re.compile(r"(?<=\w)['\u2019]s\b")  # "JnJ's US sales": no word "s" before "us"


def phrases(question: str) -> list[tuple[str, str]]:
    """The question's adjacent pairs of content words, as stems ("net receivables" -> ("net", "receiv")): runs of
    content words are broken by stop words, framing words, figures and punctuation."""
    runs: list[list[str]] = [[]]
    tokens = re.findall(r"[^\W_]+|[^\w\s]", _POSSESSIVE_S.sub(" ", question.lower()))
    for token, skip in zip(tokens, _framing(tokens)):
        if not token[0].isalnum() or skip or _FIGURE.match(token):
            runs.append([])
        else:
            runs[-1].append(stem(token))
    return list(dict.fromkeys((a, b) for run in runs for a, b in zip(run, run[1:]) if a != b))


def constraints(question: str, names: bool = True) -> list[str]:
    """What the question pins down literally: its years, quoted terms and (with `names`) capitalised words
    other than its first ("AMER", "Normandy"), in order, once each."""
    found = [m.group(0) for m in _YEAR.finditer(question)]
    found += [(m.group(1) or m.group(2)).strip() for m in _QUOTED.finditer(question)]
    if names:
        found += [name for m in _NAME.finditer(question) if len(name := _POSSESSIVE.sub("", m.group(0))) > 2
                  and name.lower() not in STOP and name.lower() not in FRAMING]
    return list(dict.fromkeys(f for f in found if f))


def folded(text: str) -> str:
    """Lower case without accents ("Skłodowska", "Céloron" read as "sklodowska", "celoron")."""
    return "".join(ch for ch in unicodedata.normalize("NFKD", text.lower().replace("\u0142", "l"))
                   if not unicodedata.combining(ch))


_JOINT = re.compile(r"[\s\-\u2010-\u2015/.]+")


@functools.lru_cache(maxsize=4096)
def squeezed(text: str) -> str:
    """A text with spaces, hyphens, slashes and dots between its words gone: "IFRS9" meets "IFRS 9", "e-commerce"
    meets "ecommerce", "U.S." meets "US"."""
    return _JOINT.sub("", text)


_NUMBER_Q = re.compile(r"^\W*(?:how\s+(?:many|much|long|far|old|big|large|high|often)\b|what\s+(?:is|was|were|are)\s+"
                       r"the\s+(?:amount|number|percentage|total|value|sum|ratio|average|rate|cost|price|size)\b)",
                       re.IGNORECASE)
_DATE_Q = re.compile(r"^\W*(?:when\b|(?:in\s+)?(?:what|which)\s+(?:year|month|date|day|decade|century)\b)",
                     re.IGNORECASE)
_WHO_Q = re.compile(r"^\W*(?:who|whom)\b", re.IGNORECASE)
_DIGIT = re.compile(r"\d")
_NUMBER_WORD = re.compile(r"\b(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
                          r"(?:thir|four|fif|six|seven|eigh|nine)teen|(?:twen|thir|for|fif|six|seven|eigh|nine)ty|hundred|thousand|"
                          r"million|billion|trillion|dozens?|half|twice|double|triple|single|several|none)\b",
                          re.IGNORECASE)
_DATE = re.compile(r"\d|\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|today|yesterday|tomorrow|"
                   r"noon|midnight|morning|evening|night|weekly|daily|monthly|annually|yearly|spring|summer|"
                   r"autumn|fall|winter|centur(?:y|ies)|decades?)\b"
                   r"|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b", re.IGNORECASE)
_PERSON = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]+")


def answer_type(question: str) -> str | None:
    """What kind of answer the question expects, when its first words say: "number" (how many, how much, what
    was the amount), "date" (when, in which year) or "name" (who); None otherwise."""
    if _DATE_Q.match(question):
        return "date"
    if _NUMBER_Q.match(question):
        return "number"
    if _WHO_Q.match(question):
        return "name"
    return None


def has_type(kind: str | None, text: str) -> bool:
    """Whether a passage (as written) holds an answer of that kind: a figure, a date or time (digits, a month, a
    day, a season, a century), a capitalised name."""
    if kind == "number":
        return bool(_DIGIT.search(text) or _NUMBER_WORD.search(text))
    if kind == "date":
        return bool(_DATE.search(text))
    if kind == "name":
        return bool(_PERSON.search(text))
    return True


COMPETE = 0.3  # another source competes when its passage is at least this share as relevant as the best one
MIN_CHUNKS = 1000  # a smaller collection is weighed as if it had this many chunks


def idf(df: int, n: int) -> float:
    """BM25's idf (as the lexical leg weighs terms); a word the collection does not hold weighs the most. The
    chunk count is taken as at least MIN_CHUNKS: in a collection of a few chunks every word they share would weigh
    nothing and every word they lack everything."""
    n = max(n, MIN_CHUNKS)
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


@dataclass(frozen=True)
class Passage:
    """What a candidate says, as the checks read it: its text (title and headings first), its stems, and its
    word pairs held together (adjacent in prose; in one row of a table, or a row and the header)."""

    text: str  # lower case
    stems: frozenset[str]
    pairs: frozenset[tuple[str, str]]
    content: str = ""  # as written (for the answer type)

    @classmethod
    def of(cls, c: Candidate) -> Passage:
        lead = [c.title or "", *c.heading_path]
        text = folded(" ".join([*lead, c.content]))
        pairs: set[tuple[str, str]] = set()
        units = [" ".join(lead)]
        if c.chunk_type == "table":
            lines = table_lines(c.content)
            header = _stems(" ".join(lines[:1]))
            units += lines
            for line in lines[1:]:  # a cell is read with its row and its column's header
                row = _stems(line)
                pairs |= {(a, b) for a in row for b in header} | {(b, a) for a in row for b in header}
        else:
            units += split_sentences(c.content)
        for unit in units:
            seq = [stem(w) for w in words(unit) if w not in STOP]
            for gap in range(1, WINDOW + 1):  # near each other, in either order ("heat is rejected": heat reject)
                pairs |= set(zip(seq, seq[gap:])) | set(zip(seq[gap:], seq))
            if c.chunk_type == "table":  # the words of one row go together in any order
                row = set(seq)
                pairs |= {(a, b) for a in row for b in row if a != b} if len(row) <= 40 else set()
        return cls(text, frozenset(stem(w) for w in words(text)), frozenset(pairs), c.content)


def _stems(text: str) -> set[str]:
    return {stem(w) for w in words(text) if w not in STOP}


@dataclass(frozen=True)
class Check:
    chunk_id: str
    passed: bool
    coverage: float  # the idf-weighted share of the question's content stems it holds
    phrases: float  # the share of the question's word pairs it holds together
    missing: tuple[str, ...] = ()  # constraints, rare words or word pairs it does not have


@dataclass(frozen=True)
class Judgement:
    abstain: bool
    # the check that decided: "answerable" (passed), "partial" (passed for part of the question), "relevance",
    # "constraints", "coverage", "phrases", "answer_type"
    check: str
    reason: str = ""
    evidence: tuple[Candidate, ...] = ()  # the candidates that passed, best first: what may be quoted
    checks: tuple[Check, ...] = field(default=())
    missing: tuple[str, ...] = ()  # "partial": what the question asks that no passage covers

    def as_dict(self) -> dict[str, object]:
        return {"abstain": self.abstain, "check": self.check, "reason": self.reason, "missing": list(self.missing),
                "evidence": [str(c.chunk_id) for c in self.evidence],
                "checks": [{"chunk_id": c.chunk_id, "passed": c.passed, "coverage": round(c.coverage, 4),
                            "phrases": round(c.phrases, 4), "missing": list(c.missing)} for c in self.checks]}


@dataclass(frozen=True)
class Limits:
    """The checks' settings (RAGD_ANSWERABLE_*): a share of 0 turns its check off."""

    min_coverage: float = 0.5
    min_phrases: float = 0.5
    look: int = 5  # how many of the first candidates are checked
    names: bool = True  # capitalised words are constraints
    answer_type: bool = True  # a question asking for a number, a date or a name needs a passage holding one
    only_lookalikes: bool = True  # coverage and phrases are checked only where several sources compete
    single_source_coverage: float = 0.4  # the coverage asked of a passage when its source is the only one


def relevance(c: Candidate, reranked: bool) -> float:
    """A candidate's relevance as the evidence judgement reads it: its cross-encoder probability after a rerank,
    else its reciprocal-rank score from both legs (k = 60)."""
    if reranked:
        return probability(c.rerank_score) if c.rerank_score is not None else 0.0
    return rrf(c)


@dataclass(frozen=True)
class Question:
    """What the checks read in a question, taken once: its literal constraints, its years, its content stems
    weighted by idf, its word pairs and the kind of answer it asks for."""

    constraints: tuple[str, ...]
    years: tuple[str, ...]
    weights: Mapping[str, float]
    pairs: tuple[tuple[str, str], ...]
    kind: str | None

    @classmethod
    def of(cls, question: str, dfs: Mapping[str, int], chunks: int, limits: Limits) -> Question:
        return cls(tuple(constraints(question, limits.names)), tuple(m.group(0) for m in _YEAR.finditer(question)),
                   {s: idf(dfs.get(s, 0), chunks) for s in content_stems(question) if not _FIGURE.match(s)},
                   tuple(phrases(question)), answer_type(question) if limits.answer_type else None)


def check(question: Question, passage: Passage, chunk_id: str, limits: Limits) -> Check:
    missing = [f for f in question.constraints if folded(f) not in passage.text
               and squeezed(folded(f)) not in squeezed(passage.text)]
    weights = question.weights
    total = sum(weights.values())
    coverage = sum(w for s, w in weights.items() if s in passage.stems) / total if total else 1.0
    pairs = question.pairs
    loose = [f"{a} {b}" for a, b in pairs if (a, b) not in passage.pairs]
    together = 1 - len(loose) / len(pairs) if pairs else 1.0
    failed = ([*missing] + (loose if together < limits.min_phrases else [])
              + ([] if coverage >= limits.min_coverage else [f"{coverage:.0%} of the question's words"])
              + ([] if has_type(question.kind, passage.content) else [f"a {question.kind}"]))
    return Check(chunk_id, not failed, coverage, together, tuple(failed))


def judge(question: str, ranked: Sequence[Candidate], dfs: Mapping[str, int], chunks: int, *,
          threshold: float, reranked: bool, limits: Limits = Limits(),
          satisfied: frozenset[str] = frozenset(), lookalikes: bool = False) -> Judgement:
    """Which of the first `limits.look` candidates that are relevant (a cross-encoder probability, when it ran,
    else a reciprocal-rank score, at or above `threshold`: see `abstain.judge`) answer the question; an
    abstention naming the check that decided and what was missing when none does. `satisfied`: constraints the
    candidates need not say (an issuer's name its documents' identity answers for); `lookalikes`: the candidates
    were drawn from documents that are look-alikes of others (one issuer's filings of other periods) even when one
    of them alone is relevant."""
    checks: list[Check] = []
    passed: list[Candidate] = []
    relevant = [c for c in ranked[: limits.look] if relevance(c, reranked) >= threshold]
    # the word checks matter where look-alikes compete: relevant passages of more than one source (documents told
    # apart by title, or by id when untitled) whose relevance is close to the best one's (at least COMPETE of it);
    # passages of one source differ from the question in wording only
    top = max((relevance(c, reranked) for c in relevant), default=0.0)
    sources = {c.title or str(c.doc_id) for c in relevant if relevance(c, reranked) >= COMPETE * top}
    strict = len(sources) > 1 or lookalikes or not limits.only_lookalikes
    loose = dataclasses.replace(limits, min_coverage=limits.single_source_coverage, min_phrases=0.0)
    asked = Question.of(question, dfs, chunks, limits)
    if satisfied:  # nor a pair of words with the name in it ("jnj realis": the filings say "we realised")
        named = {stem(w) for x in satisfied for w in words(x)}
        asked = dataclasses.replace(asked, constraints=tuple(c for c in asked.constraints if c not in satisfied),
                                    weights={s: w for s, w in asked.weights.items() if s not in named},
                                    pairs=tuple(p for p in asked.pairs if not named.intersection(p)))
    for candidate in relevant:
        result = check(asked, Passage.of(candidate), str(candidate.chunk_id), limits if strict else loose)
        checks.append(result)
        if result.passed:
            passed.append(candidate)
    if passed:
        return Judgement(False, "answerable", evidence=tuple(passed), checks=tuple(checks))
    if not checks:
        return Judgement(True, "relevance", "no passage is relevant enough")
    # partial evidence: passages that lack only some of the question's years, and hold the others, answer for
    # what they hold, and the answer says which years the documents do not cover
    years = asked.years
    partial = [(c, r) for c, r in zip(relevant, checks) if r.missing and set(r.missing) < set(years)]
    if partial:
        lacking = [y for y in years if all(y in r.missing for _, r in partial)]
        if lacking:
            return Judgement(False, "partial", f"the documents do not cover {', '.join(lacking)}",
                             evidence=tuple(c for c, _ in partial), checks=tuple(checks), missing=tuple(lacking))
    best = max(checks, key=lambda c: (c.coverage + c.phrases, -checks.index(c)))
    decided = ("constraints" if any(m in asked.constraints for m in best.missing)
               else "answer_type" if asked.kind and best.missing[-1:] == (f"a {asked.kind}",)
               else "phrases" if best.phrases < limits.min_phrases and best.coverage >= limits.min_coverage
               else "coverage")
    return Judgement(True, decided, f"not enough evidence: no passage says {', '.join(best.missing[:4])}",
                     checks=tuple(checks))


__all__ = ["FRAMING", "Check", "Judgement", "Limits", "Passage", "Question", "check", "constraints",
           "content_stems", "idf", "judge", "phrases", "relevance", "stem"]
