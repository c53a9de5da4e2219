"""Questions that name a document: the issuer, the period and the form a question names, read against the
identities of the collection's documents (ingest.identity).

"What is 3M's FY2018 capex?" over a collection of many issuers' filings is about 3M's documents only: another
issuer's cash flow statement is the most similar passage there is and the wrong one. When a question names an
issuer that documents of the collection carry, retrieval is limited to that issuer's documents (a filter both
legs apply); the period it names is written as filings write it ("FY2018" -> "fiscal year 2018", "Q2 2023" ->
"Q2 fiscal 2023"), which every chunk's identity line says. When a question names an issuer no document carries,
or a period no document of the issuer covers, there is nothing to answer from, and `ask` says so.

An issuer is named by its name without the legal form ("Best Buy", "Kraft Heinz"), by the first word of it when
the question writes it capitalised ("Costco", "Verizon") or is written all in lower case and the word is no common
word ("did verizon ..."), by a trading symbol of its cover page ("JPM", "JnJ" for
JNJ), or by the initials of a name of three words or more ("AMD"). A question naming no issuer but a fiscal quarter
("Was there any drop in cash between FY 2023 and Q2 of FY2024?") is about the issuer whose documents alone are of
that quarter, when one issuer's are."""

from __future__ import annotations

import functools
import json
import re
import threading
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..embed.base import vectrix_model_dir
from ..errors import ModelNotAvailable
from ..fiscal import FY, FY_SHORT, QUARTER_NAMED, YEAR, canonical, quarter_number
from ..issuers import core_name

_QUARTER = re.compile(r"\bQ([1-4])\s*(?:of\s+)?(?:FY\s*|fiscal\s+(?:year\s+)?)?'?((?:19|20)\d\d)\b"
                      r"|\b((?:19|20)\d\d)\s*Q([1-4])\b", re.IGNORECASE)
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9&.'\u2019-]*")
_POSSESSIVE = re.compile(r"\b([A-Z][A-Za-z0-9&.-]{1,30})['\u2019]s\b")
COVERS_BACK = 2  # a filing of fiscal year Y also reports Y-1 and Y-2 (its comparatives)
COVERS_AHEAD = 1  # and speaks of Y+1 (guidance, expectations)


@dataclass(frozen=True)
class Held:
    """One document's identity as the collection holds it."""

    doc_id: uuid.UUID
    issuer: str
    tickers: tuple[str, ...] = ()
    form: str | None = None
    fiscal_year: int | None = None
    fiscal_quarter: int | None = None
    end_year: int | None = None  # the calendar year its period ends in

    @property
    def key(self) -> str:
        return core_name(self.issuer)


@dataclass(frozen=True)
class Scope:
    issuers: tuple[str, ...] = ()  # the issuers the question names (as their documents write them)
    held: tuple[Held, ...] = ()  # their documents' identities
    years: tuple[int, ...] = ()
    quarter: int | None = None
    query: str = ""  # the question with its periods as filings write them
    unheld: str | None = None  # "no document of Walmart in this collection"
    unknown: tuple[str, ...] = field(default=())  # names read as an issuer the collection does not hold
    form: str | None = None  # the kind of document the question names: "annual", "10-Q", "8-K", "earnings release"
    # the question with a fiscal year it names by the calendar year the issuer's fiscal year ends in written as the
    # issuer names it ("Ulta's FY2023" -> "FY2022", which ended January 28, 2023); None when it names none so
    understood: str | None = None

    @property
    def doc_ids(self) -> tuple[uuid.UUID, ...]:
        """The named issuers' documents, once each, in a stable order: of those, when the question names a kind of
        document ("the 10-Q", "the earnings release"), the ones of that kind, unless none is; when it names years,
        the ones whose fiscal year can speak of them (Y-1 to Y+2: guidance, the year, its comparatives) and those
        of no known year, unless none can."""
        held = tuple(h for h in self.held if of_form(h, self.form)) or self.held
        if self.years:
            near = tuple(h for h in held if h.fiscal_year is None or min(self.years) - COVERS_AHEAD <= h.fiscal_year
                         <= max(self.years) + COVERS_BACK)
            held = near or held
        return tuple(sorted({h.doc_id for h in held}, key=str))

    def as_dict(self) -> dict[str, Any]:
        return {"issuers": list(self.issuers), "documents": len(self.doc_ids), "years": list(self.years),
                "quarter": self.quarter, "query": self.query, "unheld": self.unheld, "form": self.form}


def periods(question: str) -> str:
    """The question with its periods as filings write them, the question's own words kept: "FY2018" ->
    "FY2018 fiscal year 2018", "Q2 2023" -> "Q2 2023 second quarter fiscal 2023"."""
    out = _QUARTER.sub(lambda m: f"{m.group(0)} Q{m.group(1) or m.group(4)} quarter fiscal "
                                 f"{m.group(2) or m.group(3)}", question)
    out = FY.sub(lambda m: f"{m.group(0)} fiscal year {m.group(1)}", out)
    return FY_SHORT.sub(lambda m: f"{m.group(0)} fiscal year 20{m.group(1)}", out)


def years_of(question: str) -> tuple[int, ...]:
    found = [int(y) for y in YEAR.findall(question)] + [int(y) for y in FY.findall(question)]
    found += [2000 + int(y) for y in FY_SHORT.findall(question)]
    return tuple(sorted(set(found)))


def quarter_of(question: str) -> int | None:
    m = _QUARTER.search(question)
    if m:
        return int(m.group(1) or m.group(4))
    m = QUARTER_NAMED.search(question)
    return quarter_number(m) if m else None


def _aliases(h: Held) -> tuple[list[str], list[str], list[str]]:
    """(phrases matched case-insensitively, capitalised first words, symbols matched as written or mixed case)."""
    core = core_name(h.issuer)
    words = [w for w in re.split(r"[\s,]+", core) if w]
    phrases = [core, core.replace("&", "and"), re.sub(r"\.com$", "", core)]
    firsts = [words[0]] if len(words) > 1 and len(words[0]) >= 4 else []
    if words and words[0].endswith(".com"):
        firsts.append(words[0][:-4])
    symbols = list(h.tickers)
    initials = "".join(w[0] for w in words if w[0].isalnum())
    if len(words) >= 3 and len(initials) >= 3:
        symbols.append(initials.upper())
    return [p for p in dict.fromkeys(phrases) if p], firsts, symbols


# words a sentence may open with that are no name ("Best practices ...", "General ..."): a capitalised first word of
# an issuer's name opening the question names it otherwise ("Wrenfield net revenue, FY20?")
_OPENERS = frozenset("""what which who whom whose when where why how is are was were do does did has have had can
could will would should please give list name state describe explain compare the a an this that these those in on
for from by with as at of to and or if best worst top most least general first last total net gross new other
""".split())


_PERIOD_WORDS = re.compile(r"\b(?:FY(?:\d{4})?|[QH][1-4])\b")


@functools.lru_cache(maxsize=1)
def _vocabulary() -> frozenset[str]:
    """The whole words of the shipped cross-encoder's English WordPiece vocabulary (30,522 pieces, general English
    and the commonest names): a lower-case word outside it is no common word ("verizon", "costco"; not "general",
    "target"). Empty when the model is not installed (no lower-case word is then taken for a name)."""
    try:
        vocab = json.loads((vectrix_model_dir("reranker_en", "local reranker") / "tokenizer.json").read_text(
            encoding="utf-8"))["model"]["vocab"]
    except (ModelNotAvailable, OSError, ValueError, KeyError, TypeError):
        return frozenset()
    return frozenset(w for w in vocab if w.isalpha())


def _casual(question: str) -> bool:
    """Whether a question is written all in lower case (its periods aside): capitals then tell no names."""
    return not any(ch.isupper() for ch in _PERIOD_WORDS.sub("", question))


def _uncommon(word: str, shortest: int = 4) -> bool:
    """A lower-case word that is no common word: the first word of an issuer's name or its symbol as a casual
    writer writes them ("did verizon increase its debt?", "is jnj a high growth company?")."""
    common = _vocabulary()
    return bool(common) and len(word) >= shortest and word.isalpha() and word.islower() and word not in common


def _names(question: str, h: Held) -> bool:
    return next(_naming(question, h), None) is not None


def _naming(question: str, h: Held) -> Iterator[str]:
    """The names of the issuer a question says: its name in full (any case), and the words naming it."""
    lower = f" {re.sub(r'[^a-z0-9&.]+', ' ', question.lower())} "
    phrases, firsts, symbols = _aliases(h)
    yield from (p for p in phrases if f" {p} " in lower or f" {p}s " in lower)
    tokens = _TOKEN.findall(question)
    casual = _casual(question)
    for i, t in enumerate(tokens):
        bare = re.sub(r"['\u2019]s$", "", t).rstrip(".")
        owner = bare != t.rstrip(".")  # a possessive ("wrenfield's") names its owner in any case
        first = (bare[:1].isupper() or owner or (casual and _uncommon(bare))) and bare.lower() in firsts and (
            i > 0 or bare.lower() not in _OPENERS)
        symbol = bare in symbols or (len(bare) >= 3 and bare.upper() in symbols and bare != bare.capitalize() and (
            owner or not bare.islower() or (casual and _uncommon(bare, 3))))
        if first or symbol:
            yield t


def names_issuer(name: str, held: Sequence[Held]) -> bool:
    """Whether a name of a question ("JnJ", "Costco", "3M") names the issuer of one of these documents."""
    return any(_names(f"of {name}", h) for h in held)


def issuer_words(question: str, held: Sequence[Held]) -> frozenset[str]:
    """The words of a question that name one of these issuers, in any case and place ("JPM VaR ...", "did jpm's
    var ...", "for nike in ..."), and the names it writes in full ("best buy"): its documents' identity answers for
    them, whatever their passages call it ("we", "the Company")."""
    return frozenset(name for h in held for name in _naming(question, h))


def scope_of(question: str, held: Sequence[Held]) -> Scope:
    """What the question names among the held identities. Where it names none, its possessive names ("Walmart's")
    are `unknown`: an issuer the collection does not hold when no chunk has the word either (the caller asks). Its
    periods are read in any notation (fiscal.canonical)."""
    question = canonical(question)
    years = years_of(question)
    quarter = quarter_of(question)
    query = periods(question)
    named = [h for h in held if _names(question, h)] or _only_of_quarter(held, years, quarter)
    if not named:
        unknown = tuple(dict.fromkeys(
            m.group(1) for m in _POSSESSIVE.finditer(question) if not any(ch.isdigit() for ch in m.group(1))))
        unheld = None
        if unknown and held:
            unheld = f"no document of {unknown[0]}{_for(years, quarter)} in this collection"
        return Scope(years=years, quarter=quarter, query=query, unheld=unheld, unknown=unknown)
    keys = {h.key for h in named}
    mine = tuple(h for h in held if h.key in keys)
    renamed = _named_by_end(years, mine)
    understood = None
    if renamed:  # read again as the issuer names its years
        understood = FY.sub(lambda m: f"FY{renamed.get(int(m.group(1)), int(m.group(1)))}", question)
        question, years, quarter = understood, years_of(understood), quarter_of(understood)
        query = periods(understood)
    issuers = tuple(dict.fromkeys(h.issuer for h in mine))
    unheld = None
    fiscal = [h.fiscal_year for h in mine if h.fiscal_year]
    if years and fiscal and all(y < min(fiscal) - COVERS_BACK or y > max(fiscal) + COVERS_AHEAD for y in years):
        unheld = f"no document of {issuers[0]}{_for(years, quarter)} in this collection"
    return Scope(issuers, mine, years, quarter, query, unheld, form=form_named(question), understood=understood)


def _named_by_end(years: Sequence[int], mine: Sequence[Held]) -> dict[int, int]:
    """The fiscal years a question names by the calendar year they end in, where the issuer names them by the year
    they begin: a year Y none of its documents is of, when one of its documents is of fiscal year Y-1 ending in Y
    (a 52-week year to late January, "fiscal 2022" ended January 28, 2023, is many analysts' FY2023) -> Y-1."""
    labels = {h.fiscal_year for h in mine if h.fiscal_year}
    return {y: y - 1 for y in years if y not in labels
            and any(h.end_year == y and h.fiscal_year == y - 1 for h in mine)}


# the kind of document a question names
_FORM_NAMED = (("10-Q", re.compile(r"\b10-?Q\b|\bquarterly\s+(?:report|filing)\b", re.IGNORECASE)),
               ("earnings release", re.compile(r"\b(?:earnings|press|results)\s+release\b|\bearnings\s+report\b",
                                               re.IGNORECASE)),
               ("8-K", re.compile(r"\b8-?K\b", re.IGNORECASE)),
               ("annual", re.compile(r"\b10-?K\b|\b20-?F\b|\bannual\s+(?:report|filing)\b", re.IGNORECASE)))


def form_named(question: str) -> str | None:
    """The one kind of document a question names ("according to the 10-Q": "10-Q"), or None (none, or several)."""
    named = [form for form, pattern in _FORM_NAMED if pattern.search(question)]
    return named[0] if len(named) == 1 else None


def of_form(h: Held, form: str | None) -> bool:
    """Whether a document is of the kind named (an earnings release may be filed as an 8-K's exhibit)."""
    if form is None:
        return True
    if form == "annual":
        return h.form in ANNUAL
    if form == "8-K":
        return h.form in ("8-K", "earnings release")
    return h.form == form


def _only_of_quarter(held: Sequence[Held], years: Sequence[int], quarter: int | None) -> list[Held]:
    """For a question naming no issuer, but a fiscal quarter of a year ("between FY 2023 and Q2 of FY2024"): the
    documents of that quarter, when they are one issuer's (the only issuer the question can be about); else none."""
    if quarter is None or not years:
        return []
    of_quarter = [h for h in held if h.fiscal_quarter == quarter and h.fiscal_year == max(years)]
    return of_quarter if len({h.key for h in of_quarter}) == 1 else []


def _for(years: Sequence[int], quarter: int | None) -> str:
    if not years:
        return ""
    return f" for {'Q' + str(quarter) + ' ' if quarter else ''}{', '.join(map(str, years))}"


_HELD = """SELECT d.doc_id, d.metadata->'identity' FROM documents d
WHERE d.collection_id = %(collection_id)s AND d.metadata ? 'identity' ORDER BY d.doc_id"""


class HeldCache:
    """Each collection's held identities, read again when its generation moves (one row per document)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, uuid.UUID], tuple[int, tuple[Held, ...]]] = {}

    def get(self, conn: Any, tenant: str, collection_id: uuid.UUID) -> tuple[Held, ...]:
        row = conn.execute("SELECT generation FROM collections WHERE collection_id = %(collection_id)s",
                           {"collection_id": collection_id}).fetchone()
        generation = int(row[0]) if row else -1
        key = (tenant, collection_id)
        with self._lock:
            hit = self._entries.get(key)
        if hit is not None and hit[0] == generation:
            return hit[1]
        held = tuple(_held(doc_id, ident) for doc_id, ident in
                     conn.execute(_HELD, {"collection_id": collection_id}).fetchall()
                     if isinstance(ident, dict) and ident.get("issuer"))
        with self._lock:
            if len(self._entries) > 1024:
                self._entries.clear()
            self._entries[key] = (generation, held)
        return held


def _held(doc_id: uuid.UUID, ident: dict[str, Any]) -> Held:
    end = str(ident.get("period_end") or "")
    return Held(doc_id, str(ident["issuer"]), tuple(str(t) for t in ident.get("tickers") or ()),
                ident.get("form"), ident.get("fiscal_year"), ident.get("fiscal_quarter"),
                int(end[:4]) if end[:4].isdigit() else None)


ANNUAL = ("10-K", "20-F", "40-F", "annual report")


def statement_documents(scope: Scope) -> list[uuid.UUID]:
    """The named issuers' documents in the order their statements are read for a figure of the question's latest
    year Y: the quarter's own document when a quarter is named; then the annual report of fiscal year Y, of Y+1 and
    Y+2 (they report Y as their prior years); then the others (in the collection's order)."""
    quarter = scope.quarter
    year = max(scope.years) if scope.years else None

    def key(h: Held) -> tuple[int, int]:
        return int(not of_form(h, scope.form)), tier(h)

    def tier(h: Held) -> int:
        annual = h.form in ANNUAL
        if year is None or h.fiscal_year is None:
            tier = 9
        elif quarter and h.fiscal_quarter == quarter and h.fiscal_year == year:
            tier = 0
        elif annual and h.fiscal_year == year:
            tier = 1
        elif annual and h.fiscal_year in (year + 1, year + 2):
            tier = 1 + h.fiscal_year - year
        elif h.fiscal_year == year:
            tier = 5
        else:
            tier = 9
        return tier

    return [h.doc_id for h in sorted(scope.held, key=key)]
