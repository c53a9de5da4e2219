"""Which of several stands first by a measure, read from one table: "which segment had the lowest net revenue in
2021", "which derivative instrument had the highest notional value", "among operating, investing and financing
activities, which brought in the most cash".

A table gives the options in one of two ways:
- side by side: a spanning header names groups of columns ("Consumer Banking | | | Investment Bank | | |" over
  "2021 | 2020 | Change | 2021 | ..."); the row the measure names ("Total net revenue") holds each group's figure,
  in the group's column of the year asked (its first column when no year is asked);
- one a row: the rows the question names ("operating", "investing", "financing"), or, when it names none, every
  row of a table whose title or header holds the measure ("notional amounts of our derivative instruments"), in the
  year's column.
A total is never an option. The answer names the first option and gives every option's figure, its cells cited;
what no table shows this way is left to the quoted sentences (which must then rank or compare: `extractive`).
The patterns are of English (superlatives, lists), not of any collection."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..embed.hashing import tokens
from ..types import Candidate
from .arithmetic import parse_number
from .extractive import STOP, table_rows
from .periods import Table, period_column, period_span, unit_of
from .question import CHOICE, LEAST, MOST

_AMONG = re.compile(r"\bamong\s+(?!all\b|the\b|its\b|their\b|these\b|those\b)(?P<list>[^?]+?),\s*(?:which|what)\b",
                    re.IGNORECASE)
# "which cash flow was the highest: operating, investing or financing?": the measure before the superlative, the
# options listed after a colon (or "among") at the question's end
_WHICH_WAS = re.compile(rf"\b(?:which|what)\s+(?P<measure>[^?:]{{2,60}}?)\s+(?:was|were|is|are)\s+(?:the\s+)?"
                        rf"(?P<sup>{'|'.join(MOST + LEAST)})\b"
                        r"(?!\s+(?!(?:in|for|of|during|among|between|at|on)\b)[\w(])", re.IGNORECASE)
# "which of operating, investing and financing activities brought in the most cash": the options right after
# "which of", up to the word after the last "and"/"or" (with the kind of thing they are)
_WHICH_OF = re.compile(r"\b(?:which|what)\s+(?:one\s+)?of\s+(?:the\s+)?(?P<list>[^?]*?\b(?:and|or)\s+[\w&'-]+"
                       r"(?:\s+(?:activities|segments?|businesses|divisions?|units?|flows?|categories|products?))?)\b",
                       re.IGNORECASE)
_LISTED = re.compile(r"(?::|\bamong\b)\s*(?P<list>[^?:]+?)\s*\??\s*$", re.IGNORECASE)
# "operating vs investing vs financing - most cash?": options set against each other, a superlative and its measure
_VERSUS = re.compile(r"(?P<list>\w[\w&'.-]*(?:\s+\w[\w&'.-]*){0,3}(?:\s+(?:vs\.?|versus)\s+\w[\w&'.-]*"
                     r"(?:\s+\w[\w&'.-]*){0,3}?)+)(?=\s*(?:[-:?,;(]|$))", re.IGNORECASE)
_SUPERLATIVE = re.compile(rf"\b(?P<sup>{'|'.join(MOST + LEAST)})\s+(?P<measure>[^?,.():;-]+?)\s*(?=[?,.():;-]|$)",
                          re.IGNORECASE)
_LIST_SPLIT = re.compile(r"\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|or|vs\.?|versus)\s+", re.IGNORECASE)
# words that say what kind of thing an option is, not which one ("operating activities": operating)
_GENERIC = frozenset("activities activity segment segments business businesses unit units line lines category "
                     "categories one cash flow flows total".split())
_TOTAL = re.compile(r"^\s*(?:total|consolidated|firm|all\b)|\btotals?\b|\beliminations?\b", re.IGNORECASE)
_YEAR = re.compile(r"(?<!\d)((?:19|20)\d\d)(?!\d)")


@dataclass(frozen=True)
class Asked:
    most: bool  # the highest (True) or the lowest
    measure: frozenset[str]  # the measure's words ("net revenue")
    options: tuple[frozenset[str], ...]  # the options the question lists, each by its telling words; () if none
    superlative: str
    said: str  # the measure as the question says it


def _words(text: str) -> frozenset[str]:
    """Content words cut to five letters ("operations" and "operating" alike)."""
    return frozenset(w[:5] for w in tokens(text) if w not in STOP and not w.isdigit())


# a measure said by its verb ("which segment earned the most?", "which brand sold the least?"): the line item
# the verb names, and whether "the most" of the verb is the most of the item ("lost the most": the lowest income)
# (keyed by the verb's first four letters: "earned", "sells", "spends")
_VERBS = {"earn": ("net income", True), "made": ("net income", True), "make": ("net income", True),
          "lost": ("net income", False), "lose": ("net income", False), "sold": ("revenue", True),
          "sell": ("revenue", True), "spen": ("expenses", True)}
_VERB_MOST = re.compile(r"\b(?:which|what)\b[^?]{0,80}?\b(?P<verb>earn(?:ed|s)?|made|makes?|lost|loses?|sold|sells?|"
                        r"spent|spends?)\s+the\s+(?P<sup>most|least)\b"
                        r"(?!\s+(?!(?:in|for|of|during|at|on|between|among|from|over|across|and|or)\b)[a-z])",
                        re.IGNORECASE)


def asked(question: str) -> Asked | None:
    """The choice a question asks (its superlative, measure and the options it lists after "among"), or None."""
    said = _VERB_MOST.search(question)
    if said and not CHOICE.search(question):  # the measure said by its verb
        item, same = _VERBS[said.group("verb").lower()[:4]]
        most = (said.group("sup").lower() == "most") == same
        listed = _AMONG.search(question) or _WHICH_OF.search(question)
        options = _options(listed) if listed else ()
        return Asked(most, _words(item), options, "highest" if most else "lowest", item)
    m = CHOICE.search(question)
    listed = ((_AMONG.search(question) or _WHICH_OF.search(question)) if m else None) or _VERSUS.search(question) \
        or _LISTED.search(question)
    if not m:  # the measure before the superlative ("which cash flow was the highest: ...") or after it with no
        # "which" ("operating vs investing - most cash?"): a choice only among the options listed
        m = _WHICH_WAS.search(question) or _SUPERLATIVE.search(question)
        if not m or not listed:
            return None
    measure = _words(m.group("measure")) - _words("the a an amount value")  # "notional value": notional
    options = _options(listed) if listed else ()
    if not options and m.re is not CHOICE:
        return None
    sup = m.group("sup").lower()
    return Asked(sup in MOST, measure, options, sup, m.group("measure").strip())


def _options(listed: re.Match[str]) -> tuple[frozenset[str], ...]:
    """The options a list names, each by its telling words; () unless two or more, each of a few words."""
    parts = [p for p in _LIST_SPLIT.split(listed.group("list").strip()) if p.strip()]
    named = tuple(_words(p) - {w[:5] for w in _GENERIC} or _words(p) for p in parts)
    return named if len(named) >= 2 and all(named) and all(len(p.split()) <= 5 for p in parts) else ()


@dataclass(frozen=True)
class Chosen:
    asked: Asked
    measure: str  # the row or the table's title the figures are of
    column: str  # the period's column
    span: int | None  # the months its period spans, as its header says ("Three months ended": 3), if it says
    options: tuple[tuple[str, str, float], ...]  # (option, cell as printed, value), the table's order
    chunk: Candidate
    unit: str = ""  # the table's ("million")
    parts: tuple[Candidate, ...] = ()  # the other parts of a table set in several, whose options are added

    @property
    def first(self) -> tuple[str, str, float]:
        pick = max if self.asked.most else min
        return pick(self.options, key=lambda o: o[2])

    def cited(self) -> list[Candidate]:
        """The chunks of the table (each of its parts) the options are read from."""
        return [self.chunk, *self.parts]

    def sentence(self, decimals: int | None = None) -> str:
        """"Corporate had the lowest net revenue, 2021: (473) million (of 5: ...) [chunk:…]"; the cells as printed
        (`decimals` is not applied: a choice quotes them)."""
        name, cell, _ = self.first
        unit = f" {self.unit}" if self.unit else ""
        others = "; ".join(f"{o}: {c}" for o, c, _ in self.options)
        when = f", {self.column}" if self.column else ""
        cited = " ".join(f"[chunk:{c.chunk_id}]" for c in (self.chunk, *self.parts))
        return (f"{name} had the {self.asked.superlative} {self.measure}{when}: {cell}{unit} (of {len(self.options)}: "
                f"{others}) {cited}")

    def as_dict(self) -> dict[str, object]:
        name, _, value = self.first
        return {"operation": "choice", "result": value, "chosen": name, "measure": self.measure,
                "column": self.column, "unit": self.unit,
                "options": [{"option": o, "cell": c, "value": v} for o, c, v in self.options],
                "chunk_ids": [str(c.chunk_id) for c in (self.chunk, *self.parts)]}


def _figure(cell: str) -> float | None:
    return parse_number(cell.replace("$", "").strip()) if cell.strip() else None


def _header_rows(rows: list[list[str]]) -> int:
    """How many rows lead the table without a figure (years are labels)."""
    n = 0
    while n < len(rows) and not any(_figure(c) is not None and not _YEAR.fullmatch(c.strip()) for c in rows[n][1:]):
        n += 1
    return n


def _year_column(cells: Sequence[str], span: range, years: Sequence[int]) -> int | None:
    """Within a span of columns, the one headed by the year asked (the first year column when none is asked)."""
    named = [i for i in span if i < len(cells) and _year_of(cells[i]) is not None]
    if not years:
        return named[0] if named else span.start
    hits = [i for i in named if _year_of(cells[i]) == years[0]]
    return hits[0] if hits else None


def _year_of(cell: str) -> int | None:
    m = _YEAR.search(cell)
    return int(m.group(1)) if m else None


def _side_by_side(ask: Asked, chunk: Candidate, rows: list[list[str]], years: Sequence[int]) -> Chosen | None:
    heads = _header_rows(rows)
    if heads < 2:
        return None
    under = rows[heads - 1]
    named = [r for r in rows[:heads - 1] if sum(1 for c in r[1:] if c.strip() and not _YEAR.search(c)) >= 2]
    if not named:
        return None
    top = named[-1]  # the row naming the groups, over the row of years
    starts = [i for i, c in enumerate(top) if i and c.strip()]
    spans = [range(s, e) for s, e in zip(starts, [*starts[1:], len(top)])]
    measured = [r for r in rows[heads:] if r and ask.measure and ask.measure <= _words(r[0])]
    if not measured:
        return None
    row = min(measured, key=lambda r: len(_words(r[0])))  # "Total net revenue" before a longer label
    options = []
    for span in spans:
        name = top[span.start].strip()
        col = _year_column(under, span, years)
        value = _figure(row[col]) if col is not None and col < len(row) else None
        if _TOTAL.search(name) or value is None:
            continue
        options.append((name, row[col].replace("$", "").strip(), value))  # type: ignore[index]
    if len(options) < 2:
        return None
    at = _year_column(under, spans[0], years) if years else None
    column = under[at] if at is not None and at < len(under) else ""
    return Chosen(ask, row[0], column.strip(), period_span(" ".join(r[0] for r in rows[:heads])), tuple(options), chunk)


def _one_a_row(ask: Asked, chunk: Candidate, years: Sequence[int]) -> Chosen | None:
    """The rows the question names, or the rows of a table titled by the measure, in the year's column: the
    table read as the statements read it (currency signs' columns realigned, a year's column told from a
    quarter's and a fiscal year's end date read as that year)."""
    read = Table.read(chunk)
    if not read:
        return None
    t = read[0]
    body = [list(r) for r in t.rows if r and r[0].strip()]
    if years:
        col = period_column(t, years[0], None)
    else:
        figures = [i for i in range(1, len(t.header)) if any(i < len(r) and _figure(r[i]) is not None for r in body)]
        col = figures[0] if figures else None
    if col is None:
        return None
    title = _words(" ".join([*chunk.heading_path[-1:], *t.header]))
    if ask.options:  # the rows the question names, one each
        picked = []
        kind = ask.measure | {w[:5] for w in _GENERIC}  # "cash", "activities": what the options are rows of
        for option in ask.options:
            named = [r for r in body if option <= _words(r[0]) and not _TOTAL.search(r[0])
                     and col < len(r) and _figure(r[col]) is not None]
            # of several rows naming it ("Cash provided by operations", "Income from discontinued operations"),
            # the one that also says what kind of item is asked, when one alone does
            fit = [len(_words(r[0]) & kind) for r in named]
            named = [r for r, n in zip(named, fit) if n == max(fit)] if named else []
            if len(named) != 1:
                return None
            picked.append(named[0])
    elif ask.measure and ask.measure <= title and not any(ask.measure <= _words(r[0]) for r in body):
        picked = [r for r in body if not _TOTAL.search(r[0])]  # the rows are options, the measure their title's
    else:
        return None
    options = [(r[0], r[col].replace("$", "").strip(), v) for r in picked
               if col < len(r) and (v := _figure(r[col])) is not None]
    if len(options) < 2 or len(options) != len(picked):
        return None
    return Chosen(ask, ask.said, t.header[col].strip(), period_span(t.header[col]), tuple(options), chunk, unit=t.unit)


def choose(question: str, context: Sequence[Candidate], years: Sequence[int] = (),
           quarter: int | None = None) -> Chosen | None:
    """The option the question asks for, from the first table of the context that shows its options (side by
    side, or one a row); None when the question asks no choice or no table shows one. A side-by-side table set
    in several parts on one page (three segments, then two more and the total) gives the options of every part
    of it the context holds, of the same period span (not the six months' table beside the quarter's). A quarter
    asked is read from a table of a quarter's span (or of none said), never from a half's or a year's."""
    ask = asked(question)
    if ask is None:
        return None
    tables = [(c, rows) for c in context if c.chunk_type == "table"
              and len(rows := table_rows(c.content)) >= 3 and len(rows[0]) >= 2]
    for chunk, rows in tables:
        side = _side_by_side(ask, chunk, rows, years)
        if side is not None and (quarter is None or side.span in (None, 3)):
            parts = [found for c, r in tables if c is not chunk and (c.doc_id, _page(c)) == (chunk.doc_id, _page(chunk))
                     and (found := _side_by_side(ask, c, r, years)) is not None
                     and (found.column, found.span) == (side.column, side.span)]
            held = {o[0] for o in side.options}
            more = [o for part in parts for o in part.options if o[0] not in held]
            return dataclasses.replace(side, options=(*side.options, *more), parts=tuple(p.chunk for p in parts),
                                       unit=_unit(chunk, rows))
        found = _one_a_row(ask, chunk, years)
        if found is not None and (quarter is None or found.span in (None, 3)):
            return found
    return None


def _unit(chunk: Candidate, rows: list[list[str]]) -> str:
    """The unit the table's caption or heading states: in its rows without figures, or its last heading."""
    return unit_of(" ".join([*(r[0] for r in rows[:_header_rows(rows) or 1]), *chunk.heading_path[-1:]]))


def _page(chunk: Candidate) -> object:
    pages = chunk.metadata.get("pages") or [None]
    return pages[0]
