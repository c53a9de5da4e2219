"""Financial statements as tables of facts, and the metrics analysts compute from them.

A question such as "What is the FY2018 capital expenditure amount (in USD millions) for 3M?" or "What is the FY2019
inventory turnover ratio?" names line items the way analysts do ("capital expenditure", "COGS", "net PP&E"), a
period, and often a metric whose operands sit in two statements (the income statement's cost of sales over the
balance sheet's average inventory). Passages retrieved for it hold a sentence about capital spending, a table
of the notes, the statement itself: what answers is the statement's row for the item, in the column of the year.

This module reads a document's tables (its table chunks: each repeats the table's header) as facts (line item,
period, value, unit, page, chunk) and answers from them:
- **concepts**: a documented vocabulary of line items and the names issuers print for them (LINE_ITEMS: "Cost of
  sales", "Cost of goods sold", "Cost of revenues" are one concept), each with the statement it lives in;
- **questions**: the names analysts use for them (TERMS: "COGS", "capex", "PP&E", "top line");
- **metrics**: standard definitions (METRICS: margins, turnover ratios, days payable, quick and current ratios,
  effective tax rate, cash conversion, returns on assets and equity, growth), from textbook and CFA-curriculum
  definitions (average balances for turnover and returns, 365 days a year);
- a row is taken from the table that is the item's own statement (its title says "balance sheet", "statement of
  cash flows"...; the question's "relying on the cash flow statement" is followed), has one column for the period
  and the most line items of the vocabulary; a tie goes to the earlier table. Anything missing, or a year no
  column holds, is a refusal naming what was not found: it never guesses.

Values are as printed (parentheses are negative, "—" is nil), with the unit of the table's caption ("(In
millions, except per share data)"). Everything is deterministic.

The vocabulary is in vocabulary.py, the metrics in metrics.py, tables, facts and periods in periods.py; this
module reads a question and answers it from them."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..types import Candidate
from .arithmetic import format_number
from .metrics import METRICS, Metric
from .periods import AVERAGE, Fact, Table, find, quarters_asked, years_asked
from .vocabulary import STATEMENTS, TERMS

_GROWTH = re.compile(r"\b(?:growth|change|increase|decrease|decline)\b.{0,30}\b(?:in|of)\b|\b(?:year[-\s]over[-\s]year|"
                     r"yoy)\b|\bgrowth\s+rate\b", re.IGNORECASE)
_GROWN = re.compile(r"\b(?:growth|grow|grew|grown)\b", re.IGNORECASE)
_PERCENT_ASKED = re.compile(r"%|percent", re.IGNORECASE)
_COMPARE = re.compile(r"\b(?:compared?|versus|vs\.?|increase[sd]?|decrease[sd]?|improve[sd]?|decline[sd]?|"
                      r"change[sd]?|rise|rose|fell|falls?|drop(?:s|ped)?|grow|grew|shr[ai]nk|gain(?:s|ed)?|"
                      r"higher|lower|between|more|less|fewer|than|up|down)\b",
                      re.IGNORECASE)
_SHARE_OF = re.compile(r"(?:\bas\s+an?\s+|\s)(?:%|percent(?:age)?|share|proportion|fraction)\s+of\s+"
                       r"(?P<whole>[a-z&' ,-]+?)(?=[?.,;:]|\s+(?:in|for|from|during|between|over|at|by|vs|versus|"
                       r"compared)\b|\s+-|$)",
                       re.IGNORECASE)
_CAUSE = re.compile(r"\b(?:why|what\s+(?:drove|drives|caused|led)|reasons?|drivers?|explain)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Computed:
    name: str  # the metric or the line item
    result: float
    unit: str
    formula: str
    facts: tuple[Fact, ...]
    years: tuple[int, ...]
    earlier: tuple[tuple[int, float], ...] = ()  # a comparison asked: the metric in the earlier years, in order
    quarters: tuple[tuple[int, int], ...] = ()  # (year, its fiscal quarter) where a quarter of it was asked
    also: tuple[tuple[str, float, str, str], ...] = ()  # a judgement's other measures: (name, value, unit, formula)

    def _when(self, year: int) -> str:
        return _when(year, dict(self.quarters))

    def _shown(self, value: float, decimals: int | None) -> str:
        number = format_number(value) if decimals is None else f"{value:,.{decimals}f}"
        if self.unit == "x":
            return f"{value:.{2 if decimals is None else decimals}f}"
        if self.unit == "days":
            return f"{value:.{2 if decimals is None else decimals}f} days"
        if self.unit == "%":
            return f"{number}%"
        return f"{number} {self.unit}" if self.unit else number

    def sentence(self, decimals: int | None = None) -> str:
        """"Gross margin, 2021: 40.0% = gross profit / revenue (Gross profit / 2021: 4,000 million [page 40]
        [chunk:…]; …)", rounded to `decimals` when the question asks; a comparison gives each year's."""
        shown = self._shown(self.result, decimals)
        if self.earlier:
            year = self.years[-1]
            shown_in = [f"{self._shown(v, decimals)} in {self._when(y)}" for y, v in reversed(self.earlier)]
            trend = shown_in[0] + (f" ({', '.join(shown_in[1:])})" if shown_in[1:] else "")  # and the years before
            before = self.earlier[-1][1]
            diff = self.result - before
            by = (f"{abs(diff):,.{1 if decimals is None else decimals}f} points" if self.unit == "%"
                  else self._shown(abs(diff), decimals))
            if self.unit not in ("%", "x", "days") and before:  # an amount: by how much of itself, too
                by += f" ({abs(diff) / abs(before) * 100:.1f}%)"
            word = f"up {by} from" if diff > 0 else f"down {by} from" if diff < 0 else "unchanged from"
            how = f" = {self.formula}" if self.formula else ""
            return (f"{self.name[:1].upper()}{self.name[1:]}, {self._when(year)}: {shown}, {word} {trend}{how} "
                    f"({self._cells()})")
        period = "-".join(self._when(y) for y in (self.years[0], self.years[-1])) if len(self.years) > 1 \
            else self._when(self.years[0])
        how = f" = {self.formula}" if self.formula else ""
        more = "".join(f"; {name} {dataclasses.replace(self, unit=unit)._shown(value, decimals)} = {formula}"
                       for name, value, unit, formula in self.also)
        return f"{self.name[:1].upper()}{self.name[1:]}, {period}: {shown}{how}{more} ({self._cells()})"

    def cited(self) -> list[Candidate]:
        """The chunks of the cells it is computed from, once each."""
        return cited_chunks(self.facts)

    def _cells(self) -> str:
        return "; ".join(f"{f.label} / {f.column}: {f.cell}{' ' + f.unit if f.unit else ''}"
                         f"{f' [page {f.page}]' if f.page else ''} [chunk:{f.chunk.chunk_id}]"
                         for f in unique(self.facts))

    def as_dict(self) -> dict[str, object]:
        return {"operation": self.name, "result": self.result, "unit": self.unit, "formula": self.formula,
                "also": [{"operation": n, "result": v, "unit": u, "formula": f} for n, v, u, f in self.also],
                "chunk_id": str(self.facts[0].chunk.chunk_id) if self.facts else None,
                "operands": [{"row": f.label, "column": f.column, "cell": f.cell, "value": f.value,
                              "unit": f.unit, "page": f.page, "chunk_id": str(f.chunk.chunk_id),
                              "concept": f.concept} for f in self.facts]}


def _when(year: int, quarters: Mapping[int, int]) -> str:
    """A period as an answer names it: "2023", or "Q2 2023" where a quarter of the year was asked."""
    return f"Q{quarters[year]} {year}" if year in quarters else str(year)


def unique(facts: Sequence[Fact]) -> list[Fact]:
    """The facts once each (an operand used for two years is cited once)."""
    seen: dict[tuple[str, str, str], Fact] = {}
    for f in facts:
        seen.setdefault((str(f.chunk.chunk_id), f.label, f.column), f)
    return list(seen.values())


def cited_chunks(facts: Sequence[Fact]) -> list[Candidate]:
    """The chunks holding the facts, once each, in order."""
    return list({str(f.chunk.chunk_id): f.chunk for f in facts}.values())


@dataclass(frozen=True)
class Missing:
    name: str
    missing: tuple[str, ...] = field(default=())
    metric: bool = False  # a metric was asked (not a line item to look up)
    found: tuple[Fact, ...] = field(default=())  # the operands that were found, for the user to finish it

    @property
    def reason(self) -> str:
        lacking = f"no statement of the document gives {', '.join(self.missing)}"
        if not self.found:
            return lacking
        shown = "; ".join(f"{f.label}, {f.column}: {f.cell}{' ' + f.unit if f.unit else ''}"
                          f"{f' [page {f.page}]' if f.page else ''}" for f in unique(self.found))
        return f"{lacking}; found {shown}"


def asks_percent(question: str) -> bool:
    """Whether a question (its instructions too) asks for a percentage."""
    return bool(_PERCENT_ASKED.search(question))


# a question whose answer is a share: "what percent of ...", "what share of ...", "..., %", "answer as a percentage"
_SHARE_TARGET = re.compile(r"\b(?:what|which)\s+(?:percent(?:age)?|share|proportion|fraction)\s+of\b|,\s*%\s*\??\s*$|"
                           r"\b(?:answer|express|give|state)\w*\s+(?:it\s+|the\s+answer\s+)?(?:as|in)\s+(?:a\s+)?"
                           r"percent(?:age)?\b", re.IGNORECASE)


def asks_share(question: str) -> bool:
    """Whether the answer a question asks for is a percentage (not a reason, nor a direction: "why did X as a
    percent of sales fall" asks a reason, "did it go up" a direction)."""
    return bool(_SHARE_TARGET.search(question)) and not _CAUSE.search(question) and not _YES_NO.match(question)


def named_concept(text: str) -> str | None:
    """The line item a text names (the longest name wins where names overlap: "net income" over "income",
    "total current assets" over "cash"; then the first named)."""
    named = _named(text)
    return named[1] if named else None


# a name that is the head of another item's name there ("cash flow", "cash used in investing") names that one
_NOT_BEFORE = {"cash": r"(?!\s+(?:flows?|conversion|dividends?|proceeds|paid|used|provided|generated|from|taxes)\b)"}


def _mentions(text: str) -> list[tuple[int, int, str]]:
    """Each name of the vocabulary's line items the text says, at its first place: (start, end, concept)."""
    lower = text.lower()
    return [(m.start(), m.end(), concept) for concept, terms in TERMS.items() for term in terms
            if (m := re.search(rf"(?<![\w&]){re.escape(term)}(?![\w&]){_NOT_BEFORE.get(term, '')}", lower))]


def _named(text: str) -> tuple[int, str, int] | None:
    """The longest name the text says (the first of them): (start, concept, end)."""
    mentions = _mentions(text)
    if not mentions:
        return None
    start, end, concept = min(mentions, key=lambda x: (x[0] - x[1], x[0], x[2]))
    return start, concept, end


# a line item named with a part of the business before it ("US sales", "international revenue", "Cloud revenue",
# "segment operating income", "adjusted net income") is that part's, or a measure the statements do not print:
# not the statement's total line
_PART = re.compile(r"\b(?:u\.s\.|us|domestic|international|foreign|overseas|regional|segment|segments'?|"
                   r"organic|adjusted|non-gaap|operational|comparable|same[\s-]store)\s*$", re.IGNORECASE)
_NAMED_PART = re.compile(r"(?<![.?!]\s)(?<!^)\b(?!FY|Q[1-4]|Total\b|Net\b|Gross\b|GAAP\b)[A-Z][\w&-]*\s*$")


# a part of the business named just after the item ("sales in the US", "sales growth: US vs international")
_PART_AFTER = re.compile(r"(?:\W+\w+){0,2}?\W+(?:in\s+(?:the\s+)?)?(?:u\.s\.|us|usa|domestic|international|foreign|"
                         r"overseas|americas|europe|emea|apac|asia|segments?)\b", re.IGNORECASE)


def qualified(question: str) -> bool:
    """The line item the question names has a part of the business or an adjusted measure before it."""
    named = _named(question)
    if named is None:
        return False
    before = question[: named[0]]
    part = _NAMED_PART.search(before)
    if part and re.search(r"(?:^|\s)[A-Z][\w&.-]*\s+$", before[: part.start()]):
        part = None  # "Vantor Retail COGS": a word of a name ("Microsoft's Cloud revenue": a part)
    return bool(_PART.search(before) or part or _PART_AFTER.match(question, named[2]))


def asked(question: str, cause: bool = False) -> tuple[Metric | None, str | None]:
    """The metric a question asks for, else the line item it looks up (concept), else (None, None). "A as a
    percent of B" is the ratio of two line items; a question about an item the vocabulary does not name, as a
    percent of one it does ("wages as a percent of net sales"), asks for neither. A question asking for a reason
    asks for neither, unless `cause` (then: the metric or item whose movement it asks the reasons of)."""
    if _CAUSE.search(question):
        if not cause:
            return None, None
        question = _CAUSE.sub(" ", question)
    hits = [(m, found) for m in METRICS if (found := m.pattern.search(question))]
    metric = next((m for m, found in hits if not _compound(question, found)), None)
    if metric is not None:
        return metric, None
    if hits:  # a metric whose name only holds a known one's
        return None, None
    went = _WENT_TO.search(question)  # "what percent of its revenue went to capital expenditures"
    if went:
        part, whole = named_concept(went.group("part")), named_concept(went.group("whole"))
        if part and whole and part != whole:
            return _share(part, whole), None
        return None, None
    pair = _pair(question)  # "capex to revenue", "COGS / sales"
    if pair is not None:
        return pair, None
    share = _SHARE_OF.search(question)
    if share:
        part, whole = named_concept(question[: share.start()]), named_concept(share.group("whole"))
        if part and whole and part != whole:
            return _share(part, whole), None
        return None, None
    if qualified(question) or _derived(question) or _whether(question) or _SUPERLATIVE.search(question) or \
            _TEXT_Q.match(question) or len(_concepts(question)) > 1:  # two items named: one is no answer
        return None, None
    return None, named_concept(question)


_WENT_TO = re.compile(r"\b(?:percent(?:age)?|share|proportion|fraction|%)\s+of\s+(?P<whole>[^?]{2,80}?)\s+"
                      r"(?:went|goes|go|(?:(?:was|is|were|are)\s+)(?:spent|used|paid|devoted|allocated|invested)|"
                      r"(?:did|does|do)\s+(?:[\w&.'-]+\s+){1,4}?(?:spend|use|pay|devote|allocate|invest|put))\s+"
                      r"(?:to|on|for|into|as|in)\s+(?P<part>[^?]{2,80}?)"
                      r"(?=\s+(?:in|for|during|over|at|by)\b|[?.,]|$)", re.IGNORECASE)
_RATIO_JOINT = re.compile(r"\s*(?:to|/|over|-to-|%(?:\s+of)?)\s*", re.IGNORECASE)


def _spans(question: str) -> list[tuple[int, int, str]]:
    """The line items a question names, as (start, end, concept), left to right, the longest name where they
    overlap."""
    out: list[tuple[int, int, str]] = []
    for start, end, concept in sorted(_mentions(question), key=lambda x: (x[0], x[0] - x[1], x[2])):
        if not out or start >= out[-1][1]:
            out.append((start, end, concept))
    return out


def _concepts(question: str) -> set[str]:
    return {concept for _, _, concept in _spans(question)}


def _pair(question: str) -> Metric | None:
    """"A to B" or "A / B" of two line items the question names side by side: the ratio of the two (as a percent
    of B)."""
    spans = _spans(question)
    for (_, end, a), (start, _, b) in zip(spans, spans[1:]):
        if a != b and _RATIO_JOINT.fullmatch(question[end:start]):
            return _share(a, b)
    return None


# the head of a measure's name: a known metric's name followed by one names another measure ("cash conversion
# cycle" is no cash conversion ratio, "gross margin growth" no gross margin, "return on assets ratio" is one)
_HEADS = re.compile(r"\s*(?:-\s*)?(?:cycle|days?|period|yield|growth|rate|turnover|margin|multiple|coverage|"
                    r"per\s+\w+|index|spread|volatility|trend|target|guidance|outlook|forecast)\b", re.IGNORECASE)
# words that make a line item's name a measure of it: a ratio, a rate, a turnover, a margin, a count of days,
# an amount per something ("revenue per employee", "net income per share"), a growth rate
_DERIVED = re.compile(r"\b(?:ratios?|turnover|margins?|rates?|cycle|days|per|yield|coverage|multiples?|cagr|"
                      r"compound(?:ed)?\s+annual|intensity|leverage|payout|burden|efficiency|returns?\s+on)\b",
                      re.IGNORECASE)
# a yes/no question (not about a comparison or a trend): whether something exists or happened, which the
# passages answer, not a statement's figure
_YES_NO = re.compile(r"^\s*(?:does|do|did|is|are|was|were|has|have|had|can|could|will|would|should)\b", re.IGNORECASE)


# a question whose answer is a name, a list or an explanation ("Which categories of revenue ...", "Who ...",
# "Describe ..."): the passages answer it, never one line item's figure
_TEXT_Q = re.compile(r"^\s*(?:which|who|whom|list|name|describe|explain|why|in\s+which|for\s+which)\b", re.IGNORECASE)
# a choice among several ("segment with the lowest net revenue"): its answer is a name, never one total
# (after "the", "with", a verb of having or being: "Best Buy" is a name, "with lowest net revenue" a choice)
_SUPERLATIVE = re.compile(r"\b(?i:the|with|had|has|have|was|were|is|are|its|their)\s+(?:single\s+)?(?:highest|lowest|"
                          r"largest|smallest|biggest|greatest|most(?!\s+recent)|least|best|worst|strongest|weakest|"
                          r"top(?![\s-]+line)|bottom(?![\s-]+line))\b")  # lower case: "Best Buy" is a name


def _compound(question: str, found: re.Match[str]) -> bool:
    """Whether a metric's name matched in the question is only the start of another measure's name."""
    head = _HEADS.match(question, found.end())
    return head is not None and not found.group(0).lower().rstrip().endswith(head.group(0).strip().lower())


def _derived(question: str) -> bool:
    """Whether the question asks for a measure of the line item it names rather than the item itself: a word
    of `_DERIVED` outside the item's own name ("receivables turnover", "revenue per employee")."""
    named = _named(question)
    if named is None:
        return False
    start = named[0]
    lower = question.lower()
    term = max((t for t in TERMS[named[1]] if lower.startswith(t, start)), key=len, default="")
    rest = question[:start] + " " + question[start + len(term):]
    return bool(_DERIVED.search(rest))


def _whether(question: str) -> bool:
    """A yes/no question about a line item that compares nothing and follows no trend ("Did it pay dividends in
    2021?", "Does it hold any debt?"): the passages say."""
    return bool(_YES_NO.match(question)) and not _COMPARE.search(question) and not _TREND.search(question) \
        and not _GROWTH.search(question) and not AVERAGE.search(question)


def asks_movement(question: str) -> bool:
    """Whether the question asks what drove a change in one year ("What drove operating margin change as of
    2022?", "What drove the reduction in SG&A as a percent of net sales in 2023?"): the movement of the metric
    or item it names, from the year before, is the figure the reasons explain."""
    return bool(_CAUSE.search(question)) and len(years_asked(question)) == 1 and asked(question, cause=True) != (
        None, None)


# the direction a question asks about: a rise, or a fall (improvement and deterioration are left unsaid: whether a
# rise of debt or of a cost ratio is one is the reader's judgement)
_UP = re.compile(r"\b(?:increas(?:e|es|ed|ing)|ris(?:e|es|en|ing)|rose|gr(?:ow|ows|ew|own|owing)|higher|gain(?:s|ed)?|"
                 r"expand(?:s|ed)?|(?:go|goes|gone|went|going)\s+up|up)\b", re.IGNORECASE)
_DOWN = re.compile(r"\b(?:decreas(?:e|es|ed|ing)|declin(?:e|es|ed|ing)|fall(?:s|en|ing)?|fell|drop(?:s|ped|ping)?|"
                   r"reduc(?:e|es|ed|ing)|shr(?:ink|inks|ank|unk)|lower|(?:go|goes|gone|went|going)\s+down|down)\b",
                   re.IGNORECASE)
_EITHER = re.compile(r"\b(?:up|increas\w*|higher|ris\w*|gr[eo]w\w*)\s+or\s+(?:down|decreas\w*|lower|f[ae]ll\w*|"
                     r"declin\w*)\b|\b(?:down|decreas\w*|lower|f[ae]ll\w*|declin\w*)\s+or\s+(?:up|increas\w*|higher|"
                     r"ris\w*|gr[eo]w\w*)\b", re.IGNORECASE)

# a direction measured against a bar ("grow more than 5%", "faster than sales", "stay above 20%", "by 10") is more
# than a sign; a quarter's or a year's name ("Q2", "FY22") is none
_THRESHOLD = re.compile(r"\b(?:than|least|most|exceed\w*|above|below|beyond)\b|"
                        r"(?<![\w.])(?!(?:19|20)\d\d\b)\d[\d,.]*(?:bn|mn|m|k|x)?(?!\w)", re.IGNORECASE)


def asks_direction(question: str) -> bool:
    """Whether the question asks which way a measure moved: "Did it increase its debt?", "did margins go up or
    down?" (a bar to pass, "more than 5%", asks more than a direction)."""
    if _THRESHOLD.search(question):
        return False
    return bool(_EITHER.search(question)) or (
        bool(_YES_NO.match(question)) and bool(_UP.search(question)) != bool(_DOWN.search(question)))


def verdict(question: str, computed: Computed) -> str | None:
    """The word that answers a question about a direction, from the movement computed against the year before:
    "Yes" or "No" to "Has it increased its debt?" / "Did margins fall?", "Up" or "Down" to "did it go up or down?";
    None when the question asks no direction or nothing was compared."""
    if not computed.earlier or not asks_direction(question):
        return None
    diff = computed.result - computed.earlier[-1][1]
    if _EITHER.search(question):
        return "Up" if diff > 0 else "Down" if diff < 0 else "Unchanged"
    return "Yes" if (diff > 0 if _UP.search(question) else diff < 0) else "No"


def topic(computed: Computed) -> tuple[frozenset[str], ...]:
    """The names of a computed metric or line item, each as the first five letters of its words: its own (the
    part before "as a percent of"), its rows' labels (of the numerator, for a metric: "Operating income" for an
    operating margin, "Net sales" for revenue) and the items that move it (a gross margin's cost of goods sold). A
    sentence about it holds two words of one of them (or the one word of a name of one)."""
    metric = _BY_NAME.get(computed.name)
    numerator = metric.needs[0][0] if metric else None
    names = [computed.name.split(" as a percent of ")[0], *(metric.moved_by if metric else ()),
             *(f.label for f in computed.facts if not computed.formula or f.concept == numerator)]
    groups = {frozenset(w[:5] for w in re.findall(r"[a-z&]+", _name(n).lower()) if w not in ("and", "the", "of"))
              for n in names}
    return tuple(sorted((g for g in groups if g), key=sorted))


_TREND = re.compile(r"\b(?:historical(?:ly)?|consistent(?:ly)?|stable|steady|fluctuat\w*|volatil\w*|trend\w*|"
                    r"over\s+the\s+(?:years|past|last)|each\s+year|every\s+year|year\s+(?:over|to)\s+year)\b",
                    re.IGNORECASE)
TREND_YEARS = 3  # a trend asked with no year: the measure over the latest filing's years (its income statement's)


def asks_trend(question: str) -> bool:
    """Whether the question asks how a measure it names has moved over the years, naming none ("Are its gross
    margins historically consistent?"): the measure over the latest annual filing's years answers it."""
    return not years_asked(question) and bool(_TREND.search(question)) and asked(question) != (None, None)


def movers(computed: Computed) -> str:
    """The names of the line items whose movement moves a computed metric ("cost of goods sold" for a gross
    margin), or ""."""
    metric = _BY_NAME.get(computed.name)
    return ", ".join(_name(concept) for concept in (metric.moved_by if metric else ()))


def answer(question: str, tables: Sequence[Table], hint: str | None = None,
           percent: bool = False, original: str | None = None, movement: bool = False,
           over: Sequence[int] = ()) -> Computed | Missing | None:
    """The metric or line item the question asks for, computed from the tables' facts; Missing naming what is
    missing; None when the question asks for neither (or for a reason, or names no year). `percent`: the
    question's instructions ask for a percentage (a change in an item is then its growth rate); `original`:
    the question as asked, where its quarters are read when `question` no longer says them; `movement`: the
    question asks what drove the change of one year (`asks_movement`): the metric in that year and the one
    before, compared; `over`: the years of a trend asked (`asks_trend`), each compared with the one before."""
    metric, concept = asked(question, cause=movement)
    years = list(over) or years_asked(question)
    direction = len(years) == 1 and not over and asks_direction(question)  # "did it increase in 2021?"
    if direction or (movement and len(years) == 1):
        years = [years[0] - 1, years[0]]
    each = movement or direction or len(over) > 1  # each year read against the one before it
    quarters = quarters_asked(original or question)
    if direction and years[-1] in quarters:  # a quarter's direction: against the same quarter a year before
        quarters.setdefault(years[0], quarters[years[-1]])
    held = tuple(sorted(quarters.items()))
    if (metric is None and concept is None) or not years:
        return None
    item = False  # the line item itself compared between two years (no metric): what lacks leaves it to passages
    if metric is None:
        assert concept is not None
        if (_GROWTH.search(question) and (percent or asks_percent(question))) or (
                _GROWN.search(question) and len(years) == 1):  # growth in one year: from the year before
            metric = _growth(concept)
        elif AVERAGE.search(question) and len(years) > 1:
            return _average_of(concept, years, tables, hint, quarters)
        elif (len(years) == 2 and _COMPARE.search(question)) or (len(years) > 1 and each):  # and its moves
            metric, item = Metric(_name(concept), re.compile("$^"), ((concept, 0),), lambda v: v[(concept, 0)],
                                  "", ""), True
        else:
            fact = find(tables, concept, years[-1], hint, quarters.get(years[-1]))
            if fact is None:
                return Missing(concept, (f"{concept.replace('_', ' ')} for {_when(years[-1], quarters)}",))
            return Computed(_name(concept), fact.value, fact.unit, "", (fact,), (years[-1],), quarters=held)
    # an average over years, unless the metric averages its own balances over the two years named ("inventory
    # turnover for 2019, using average inventory of 2018 and 2019" is 2019's)
    averaged = bool(AVERAGE.search(question)) and len(years) > 1 and not (
        len(years) == 2 and years[1] - years[0] == 1 and any(offset == -1 for _, offset in metric.needs))
    compared = not averaged and not metric.name.startswith("change in") and (
        (len(years) == 2 and bool(_COMPARE.search(question))) or (len(years) > 1 and each))
    targets = years if averaged or compared else [years[-1]]
    results: list[tuple[float, tuple[Fact, ...]]] = []
    for year in targets:
        values: dict[tuple[str, int], float] = {}
        facts: list[Fact] = []
        missing = []
        for need, offset in (*metric.needs, *metric.optional):
            fact = find(tables, need, year + offset, hint, quarters.get(year))
            if fact is None:
                if (need, offset) in metric.needs:
                    missing.append(f"{need.replace('_', ' ')} for {_when(year + offset, quarters)}")
                continue
            values[(need, offset)] = fact.value
            facts.append(fact)
        if missing:
            return Missing(metric.name, tuple(missing), metric=not item, found=tuple(facts))
        try:
            results.append((metric.formula(values), tuple(facts)))
        except ZeroDivisionError:
            return Missing(metric.name, ("a divisor that is not zero",), metric=True)
    used = tuple(f for _, fs in results for f in fs)
    units = {f.unit for f in used}
    unit = metric.unit or (units.pop() if len(units) == 1 else "")  # an amount is in its cells' unit
    if compared:
        return Computed(metric.name, round(results[-1][0], 6), unit, metric.text, used, tuple(targets),
                        tuple((y, round(r, 6)) for y, (r, _) in zip(targets[:-1], results[:-1])), held)
    value = sum(r for r, _ in results) / len(results)
    formula = metric.text if len(results) == 1 else f"average over {len(results)} years of {metric.text}"
    also, more = _companions(metric, tables, targets[-1], hint, quarters)
    return Computed(metric.name, round(value, 6), unit, formula, (*used, *more), tuple(targets), quarters=held,
                    also=also)


_BY_NAME = {m.name: m for m in METRICS}


def _companions(metric: Metric, tables: Sequence[Table], year: int, hint: str | None, quarters: Mapping[int, int]
                ) -> tuple[tuple[tuple[str, float, str, str], ...], tuple[Fact, ...]]:
    """A judgement's other measures for the year, each whose operands the statements give (the others left out),
    and their facts."""
    out, facts = [], []
    for other in (_BY_NAME[name] for name in metric.companions):
        found = {need: find(tables, need[0], year + need[1], hint, quarters.get(year)) for need in other.needs}
        if any(f is None for f in found.values()):
            continue
        try:
            value = other.formula({k: f.value for k, f in found.items() if f is not None})
        except ZeroDivisionError:
            continue
        out.append((other.name, round(value, 6), other.unit, other.text))
        facts += [f for f in found.values() if f is not None]
    return tuple(out), tuple(facts)


def _share(part: str, whole: str) -> Metric:
    return Metric(f"{_name(part)} as a percent of {_name(whole)}", re.compile("$^"), ((part, 0), (whole, 0)),
                  lambda v: v[(part, 0)] / v[(whole, 0)] * 100, "%", f"{_name(part)} / {_name(whole)}")


def _growth(concept: str) -> Metric:
    return Metric(f"change in {_name(concept)}", re.compile("$^"), ((concept, 0), (concept, -1)),
                  lambda v: (v[(concept, 0)] - v[(concept, -1)]) / abs(v[(concept, -1)]) * 100, "%",
                  f"({_name(concept)} this year - last year) / last year")


def _average_of(concept: str, years: Sequence[int], tables: Sequence[Table], hint: str | None,
                quarters: Mapping[int, int] | None = None) -> Computed | Missing:
    facts = []
    for year in years:
        fact = find(tables, concept, year, hint, (quarters or {}).get(year))
        if fact is None:
            return Missing(concept, (f"{concept.replace('_', ' ')} for {year}",))
        facts.append(fact)
    return Computed(f"average {_name(concept)}", sum(f.value for f in facts) / len(facts), facts[0].unit,
                    f"average of {len(facts)} years", tuple(facts), tuple(years))


_NAMES = {"cogs": "cost of goods sold", "sga": "selling, general and administrative expenses",
          "da": "depreciation and amortization", "cfo": "cash from operations", "capex": "capital expenditure",
          "ppe": "net property, plant and equipment", "pretax_income": "income before taxes"}


def _name(concept: str) -> str:
    return _NAMES.get(concept, concept.replace("_", " "))


def statement_hint(instructions: Sequence[str]) -> str | None:
    """The statement the question's instructions ask to rely on, when they name one only."""
    named = {name for name, p in STATEMENTS.items() for text in instructions if p.search(text)}
    return next(iter(named)) if len(named) == 1 else None
