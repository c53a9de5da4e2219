"""Statements as tables of facts (line item, period, value, unit, page, chunk), and the periods a table's
columns and a question name: fiscal years, quarters and spans, the column of a period, a line item's fact."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..fiscal import ORDINALS, QUARTER_NAMED, YEAR, quarter_number
from ..types import Candidate
from .answerable import stem
from .arithmetic import parse_number
from .extractive import table
from .vocabulary import LINE_ITEMS, OUTFLOWS, UNIT, concept_of, label_key, statement_named

RANGE = re.compile(r"\b((?:19|20)\d\d)\s*(?:-|\u2013|to|through)\s*((?:19|20)\d\d)\b")
AVERAGE = re.compile(r"\b(?:average|mean|avg)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Fact:
    concept: str
    label: str  # the row as printed
    column: str  # the period's column header
    cell: str
    value: float
    unit: str  # "million", "thousand", "billion" or ""
    page: int | None
    chunk: Candidate


# titles of tables that hold a part of the group's figures, whatever statement they look like
_PARTIAL = re.compile(r"\b(?:consolidating|guarantors?|non-?guarantors?|parent\s+(?:company|only)|issuer\s+only|"
                      r"subsidiar(?:y|ies)\s+(?:only|issuers?)|segments?\b(?!\s+information\s+is)|"
                      r"supplemental\s+condensed|variable\s+interest\s+entit|pro\s+forma|unaudited\s+quarterly|"
                      r"quarterly\s+(?:financial\s+)?(?:data|results))", re.IGNORECASE)
_CONSOLIDATED = re.compile(r"\bconsolidated\b", re.IGNORECASE)


@dataclass(frozen=True)
class Table:
    chunk: Candidate
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    statement: str | None  # income, balance, cash: what its title says it is
    unit: str
    items: int  # rows the vocabulary names
    fiscal: tuple[int, int] | None = None  # (the month its fiscal years end, fiscal year - that end's year)
    quarterly: bool = False  # a quarter's document (its dated columns are also the quarter's and the year's)
    title: str = ""  # its heading path, header label and first row's label
    caption: str = ""  # its own: the header's label and the first row's

    @property
    def partial(self) -> bool:
        """Whether its title says it is a part of the group's figures (a segment's, a guarantor's, the parent
        company's alone, a consolidating schedule's), not the consolidated statement. A caption of its own saying
        "consolidated" and no part is the group's under whatever heading came before it (a heading stays in the
        path of the tables after it until another replaces it: "Professional Segment" over the next pages)."""
        if _PARTIAL.search(self.caption):
            return True
        return not _CONSOLIDATED.search(self.caption) and bool(_PARTIAL.search(self.title))

    @classmethod
    def read(cls, chunk: Candidate) -> list[Table]:
        """The table of a chunk (none for fewer than two columns), its figures realigned when its currency signs
        misplace them (`_compacted`, else `_merged`)."""
        header, body = table(chunk.content)
        if not header or len(header) < 2:
            return []
        header, body = _promoted(header, body)
        compact = _compacted(header, body)
        return [cls.of(chunk, *(_merged(header, body) if compact == (header, body) else compact))]

    @classmethod
    def of(cls, chunk: Candidate, header: Sequence[str] | None = None,
           body: Sequence[Sequence[str]] | None = None) -> Table:
        if header is None or body is None:
            header, body = table(chunk.content)
        caption = " ".join([header[0], *(r[0] for r in body[:1] if r)])
        title = " ".join([*chunk.heading_path, caption])
        statement = statement_named(title)
        unit = unit_of(" ".join([header[0], *chunk.heading_path[-1:]]))
        body = _sectioned(body)
        items = sum(1 for r in body if r and concept_of(r[0]) is not None)
        ident = chunk.metadata.get("identity") or {}
        fiscal = None
        quarter = ident.get("fiscal_quarter")
        if ident.get("period_end") and ident.get("fiscal_year"):
            end = str(ident["period_end"])
            # a quarter's end lies 3 x (4 - its quarter) months before the end of its fiscal year
            months = int(end[:4]) * 12 + int(end[5:7]) - 1 + (3 * (4 - int(quarter)) if quarter else 0)
            fiscal = (months % 12 + 1, int(ident["fiscal_year"]) - months // 12)
        return cls(chunk, tuple(header), tuple(body), statement, unit, items, fiscal, bool(quarter), title, caption)


def unit_of(text: str) -> str:
    """The unit a caption states ("(In millions, except per share data)": "million"); "" when none."""
    m = UNIT.search(text)
    return {"thousands": "thousand", "millions": "million", "billions": "billion"}[m.group(1).lower()] if m else ""


_PER_SHARE = re.compile(r"(?<!except\s)\bper\s+(?:common\s+|ordinary\s+)?share\b", re.IGNORECASE)
_PERIOD_CELL = re.compile(r"^\s*(?:(?:19|20)\d\d|[A-Z][a-z]+\.?\s+\d{1,2},?\s+(?:19|20)\d\d)\s*(?:\(\d\))*\s*$")


def _promoted(header: Sequence[str], body: Sequence[Sequence[str]]) -> tuple[list[str], list[list[str]]]:
    """A header naming no period over caption rows (a title, "(Dollars in Millions)") and a row of periods
    ("| | 2022 | 2021 |"): that row becomes the header, its label the header's and the captions' words, so the
    title and the unit are still read from it."""
    def periods(row: Sequence[str]) -> bool:
        cells = [c for c in row[1:] if c.strip()]
        return len(cells) >= 2 and all(_PERIOD_CELL.match(c) for c in cells)

    if periods(header):
        return list(header), [list(r) for r in body]
    captions = [header[0]]
    for i, row in enumerate(body[:3]):
        if periods(row):
            return ([" ".join(c for c in (*captions, row[0]) if c.strip()), *row[1:]],
                    [list(r) for r in body[i + 1:]])
        if any(c.strip() for c in row[1:]):
            break
        captions.append(row[0] if row else "")
    return list(header), [list(r) for r in body]


def _sectioned(body: Sequence[Sequence[str]]) -> list[tuple[str, ...]]:
    """The rows, each under a per-share section ("Per Share Data", "Earnings per common share:") labelled with it
    ("Per Share Data: Net earnings (loss)"): a section's rows are amounts per share, whatever their own labels say.
    A section is a row with a label and no figures; the next one ends it."""
    out: list[tuple[str, ...]] = []
    section = ""
    for row in body:
        if row and row[0].strip() and not any(c.strip() for c in row[1:]):
            section = row[0].strip().rstrip(":") if _PER_SHARE.search(row[0]) else ""
        elif row and section and row[0].strip() and not _PER_SHARE.search(row[0]):
            row = (f"{section}: {row[0]}", *row[1:])
        out.append(tuple(row))
    return out


_DATED = re.compile(r"\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d{1,2},?\s+((?:19|20)\d\d)\b",
                    re.IGNORECASE)
_MONTH_NUMBER = {m: i for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                                             "nov", "dec"), start=1)}


def fiscal_years(cell: str, fiscal: tuple[int, int] | None) -> set[int]:
    """The fiscal years a column header names. A date at the document's fiscal year end ("January 29, 2022") is
    the fiscal year the issuer names after it (`fiscal`: the month its years end and how many years the name
    differs from the end's year: a year ending January 29, 2022 may be fiscal 2021); a plain year is itself."""
    dated = list(_DATED.finditer(cell))
    if dated:
        out = set()
        for m in dated:
            year, month = int(m.group(2)), _MONTH_NUMBER[m.group(1).lower()[:3]]
            shift = fiscal[1] if fiscal and min((month - fiscal[0]) % 12, (fiscal[0] - month) % 12) <= 1 else 0
            out.add(year + shift)
        return out
    return {int(y) for y in re.findall(r"(?<!\d)((?:19|20)\d\d)(?!\d)", cell)}


_CURRENCY = frozenset({"$", "\u20ac", "\u00a3", "\u00a5", "US$"})


def _merged(header: Sequence[str], body: Sequence[Sequence[str]]) -> tuple[list[str], list[list[str]]]:
    """A column with no header beside exactly one headed column, no row holding figures in both: one column under
    that header (a period split by currency signs: "| | 2019 | 2018" over "Total current assets | 16,525 | |
    15,134" and "Total assets | $ | 23,717 | $ 22,536"), when every figure then stands under a header; else the
    table as it is (`_compacted` reads headers standing over the signs' columns)."""
    head, rows = list(header), [list(r) for r in body]

    def numeric(i: int) -> set[int]:
        return {n for n, r in enumerate(rows) if i < len(r) and parse_number(r[i]) is not None}

    i = 1
    while i < len(head):
        beside = [j for j in (i - 1, i + 1) if 0 < j < len(head) and head[j].strip()]
        here = set() if head[i].strip() or len(beside) != 1 else numeric(i)
        if not here or here & numeric(beside[0]):
            i += 1
            continue
        j = beside[0]
        for r in rows:
            if i < len(r):
                a, b = (r[i], r[j]) if j < len(r) else (r[i], "")
                kept = a if parse_number(a) is not None else b if parse_number(b) is not None else (a.strip() or b)
                if j < len(r):
                    r[j] = kept
                del r[i]
        del head[i]
    under = all(head[i].strip() for r in rows for i, c in enumerate(r)
                if 0 < i < len(head) and parse_number(c) is not None)
    return (head, rows) if len(head) < len(header) and under else (list(header), [list(r) for r in body])


def _compacted(header: Sequence[str], body: Sequence[Sequence[str]]) -> tuple[list[str], list[list[str]]]:
    """A table whose currency signs stand in columns of their own ("Cash | $ | 11,258 | $ | 12,277" beside
    "Receivables | 917 | | 1,028 |", or under a header whose periods stand over the signs): each row's figures in
    order, in as many columns as most rows have; a row with another count keeps its label only (which of its
    columns is empty cannot be told). Other tables as they are."""
    if not any(c.strip() in _CURRENCY for r in body for c in r[1:]) or (_aligned(body) and _over(header, body)):
        return list(header), [list(r) for r in body]

    def values(cells: Sequence[str], split: bool = True) -> list[str]:
        out = []  # a figures' cell of several ("19,038 17,405") is each of them (not a header's "2015 (1)")
        for c in (c.strip() for c in cells[1:]):
            words = c.split()
            several = split and len(words) > 1 and all(w in _CURRENCY or parse_number(w) is not None for w in words)
            out += [w for w in words if w not in _CURRENCY] if several else [c] if c and c not in _CURRENCY else []
        return out

    counts = Counter(len(values(r)) for r in body if values(r))
    if not counts:
        return list(header), [list(r) for r in body]
    width = max(counts, key=lambda n: (counts[n], n))
    rows = [[r[0] if r else "", *(values(r) if len(values(r)) == width else [""] * width)] for r in body]
    heads = values(header, split=False)
    return [header[0], *(heads if len(heads) == width else [""] * width)], rows


def _over(header: Sequence[str], body: Sequence[Sequence[str]]) -> bool:
    """Whether the header's labels stand over the rows' figures (not over their currency signs beside them)."""
    heads = {i for i, c in enumerate(header) if i and c.strip()}
    figures = {i for r in body for i, c in enumerate(r) if i and parse_number(c) is not None}
    return not heads or not figures or not heads.isdisjoint(figures)


def _aligned(body: Sequence[Sequence[str]]) -> bool:
    """Whether the rows' figures stand in the same columns: no two rows hold theirs in disjoint columns (a row
    whose signs took its figures' places beside one without signs)."""
    places = {frozenset(i for i, c in enumerate(r) if i and parse_number(c) is not None) for r in body}
    places.discard(frozenset())
    return not any(a.isdisjoint(b) for a in places for b in places if a != b)


_SPAN = re.compile(r"\b(three|six|nine|twelve|3|6|9|12)[\s-]+months?\b|\b(thirteen|twenty[\s-]six|thirty[\s-]nine|"
                   r"fifty[\s-]two|fifty[\s-]three|13|26|39|52|53)[\s-]+weeks?\b|\b(quarters?|Q[1-4])\b|"
                   r"\b(years?|annual)\b", re.IGNORECASE)
_SPAN_MONTHS = {"three": 3, "3": 3, "six": 6, "6": 6, "nine": 9, "9": 9, "twelve": 12, "12": 12, "thirteen": 3,
                "13": 3, "twenty-six": 6, "26": 6, "thirty-nine": 9, "39": 9, "fifty-two": 12, "52": 12,
                "fifty-three": 12, "53": 12}
_QUARTER_CELL = re.compile(r"\bQ([1-4])\W{0,3}((?:19|20)\d\d)\b|\b(first|second|third|fourth)\s+quarter\D{0,20}"
                           r"((?:19|20)\d\d)\b", re.IGNORECASE)


_SAME_QUARTER = re.compile(r"\b(?:same|corresponding|comparable)\s+(?:fiscal\s+)?(?:quarter|period|three\s+months)\b",
                           re.IGNORECASE)
_YEAR_AFTER = re.compile(r"\s*(?:of\s+|in\s+)?(?:the\s+)?(?:fiscal\s+(?:year\s+)?|FY\s*)?'?((?:19|20)\d\d)\b",
                         re.IGNORECASE)
_YEAR_BEFORE = re.compile(r"\b((?:19|20)\d\d)\s*$")


def quarters_asked(question: str) -> dict[int, int]:
    """The fiscal quarter asked of each year the question names ("between FY2023 and Q2 of FY2024": 2024's
    second quarter and the year 2023; "Q2 2023 compared to the same quarter of 2022": both second quarters); a
    quarter named with no year of its own is every named year's."""
    out: dict[int, int] = {}
    loose: list[int] = []
    for m in QUARTER_NAMED.finditer(question):
        quarter = quarter_number(m)
        year = _YEAR_AFTER.match(question, m.end()) or _YEAR_BEFORE.search(question[: m.start()])
        if year:
            out.setdefault(int(year.group(1)), quarter)
        else:
            loose.append(quarter)
    first = next(iter(out.values()), None) if not loose else loose[0]
    for m in _SAME_QUARTER.finditer(question):
        year = _YEAR_AFTER.match(question, m.end())
        if year and first is not None:
            out.setdefault(int(year.group(1)), first)
    if len(set(loose)) == 1:
        for y in years_asked(question):
            out.setdefault(y, loose[0])
    return out


def quarter_asked(question: str) -> int | None:
    """The fiscal quarter a question asks about ("Q2 of FY2023", "the second fiscal quarter of 2023")."""
    m = QUARTER_NAMED.search(question)
    return quarter_number(m) if m else None


def period_span(cell: str) -> int | None:
    """The months a column's period spans, as its header says ("Three Months Ended", "26 weeks", "Q2", "Year
    Ended"); None when it says none (a balance sheet's date, a plain year)."""
    m = _SPAN.search(cell)
    if m is None:
        return None
    word = re.sub(r"[\s-]+", "-", (m.group(1) or m.group(2) or "").lower())
    if word:
        return _SPAN_MONTHS.get(word)
    return 3 if m.group(3) else 12


def _fiscal_quarter(year: int, month: int, fiscal: tuple[int, int] | None) -> tuple[int, int]:
    """(fiscal year, quarter) of a date, for fiscal years ending in `fiscal[0]` (December when unknown)."""
    end_month, shift = fiscal or (12, 0)
    after = (month - end_month) % 12  # months since the last year end (0: it is one)
    quarter = 4 if after == 0 else (after + 2) // 3
    return (year if after == 0 or month < end_month else year + 1) + shift, quarter


def _dated_quarters(cell: str, fiscal: tuple[int, int] | None) -> list[tuple[int, int]]:
    """(fiscal year, quarter) of each date a column header names."""
    return [_fiscal_quarter(int(m.group(2)), _MONTH_NUMBER[m.group(1).lower()[:3]], fiscal)
            for m in _DATED.finditer(cell)]


def period_column(t: Table, year: int, quarter: int | None) -> int | None:
    """The column of a fiscal year (a year's column: not a quarter's or half-year's, nor, in a quarter's document,
    a date inside the year) or of a fiscal quarter (a three-month column, or a date, of that quarter; a plain year
    where the table's title names the quarter); one column, else none."""
    hits = []
    for i, h in enumerate(t.header):
        if i == 0:
            continue
        span = period_span(h)
        if quarter is None:
            inside = t.quarterly and any(q != 4 for _, q in _dated_quarters(h, t.fiscal))
            if span in (None, 12) and not inside and year in fiscal_years(h, t.fiscal):
                hits.append(i)
            continue
        if span not in (None, 3):
            continue
        dated = _dated_quarters(h, t.fiscal)
        named = _QUARTER_CELL.search(h)
        if dated:
            ok = (year, quarter) in dated
        elif named:
            ok = (int(named.group(1)) if named.group(1) else ORDINALS[named.group(3).lower()],
                  int(named.group(2) or named.group(4))) == (quarter, year)
        else:
            ok = year in fiscal_years(h, None) and quarter_asked(t.title) == quarter and t.quarterly
        if ok:
            hits.append(i)
    return hits[0] if len(hits) == 1 else None


def find(tables: Sequence[Table], concept: str, year: int, hint: str | None = None,
         quarter: int | None = None) -> Fact | None:
    """The fact of a concept for a fiscal year (or a quarter of it): from the table that is the concept's
    statement (or the one the question asks to rely on), with one column for the period and the most line items;
    the row whose label names the concept most specifically."""
    home = LINE_ITEMS[concept][0]
    whole = _whole(tables, year, quarter)

    def read(t: Table, col: int) -> tuple[tuple[int, ...], tuple[str, ...], str] | None:
        if home == "balance" and flows(t):  # its rows of balance sheet items are their changes, not balances
            return None
        found = _concept_row(t, concept, col)
        if found is None:
            return None
        rank, row = found
        return (int(t.statement == home) + int(hint is not None and t.statement == hint), int(whole(t, col)),
                t.items, -rank), row, concept

    return _best_fact(tables, year, quarter, read)


def _concept_row(t: Table, concept: str, col: int) -> tuple[int, tuple[str, ...]] | None:
    """The row of the table whose label names the concept most specifically (its rank among the vocabulary's
    labels) with a figure in the column; None when none does."""
    rows = [(named[1], r) for r in t.rows if r and (named := concept_of(r[0])) and named[0] == concept
            and col < len(r) and parse_number(r[col]) is not None]
    return min(rows, key=lambda x: x[0]) if rows else None


PART_SHARE = 0.5  # a table whose revenue (or total assets) is under this share of another's is a part of the group
_SCALES = {"thousand": 1e3, "million": 1e6, "billion": 1e9}
_SIZES = ("revenue", "total_assets")  # what tells a group's statement from a part's by its figures


def _size(t: Table, col: int) -> tuple[str, float] | None:
    """The table's revenue (else total assets) in the column, in units (its caption's unit known)."""
    if t.unit not in _SCALES:
        return None
    for concept in _SIZES:
        found = _concept_row(t, concept, col)
        if found is not None:
            value = parse_number(found[1][col])
            assert value is not None
            return concept, abs(value) * _SCALES[t.unit]
    return None


def _whole(tables: Sequence[Table], year: int, quarter: int | None) -> Callable[[Table, int], bool]:
    """Whether a table (in a column) is the group's, not a part's: its title says no part (`Table.partial`), and
    its figures are not a part's: its revenue (or total assets) for the period is at least PART_SHARE of the
    largest any table gives (a subsidiary's or a segment's statements under a title that names no part)."""
    sizes: dict[int, tuple[str, float] | None] = {}  # each table's, in its column of the period (as read)
    largest: dict[str, float] = {}
    for t in tables:
        col = period_column(t, year, quarter)
        sized = sizes[id(t)] = _size(t, col) if col is not None else None
        if sized is not None:
            largest[sized[0]] = max(largest.get(sized[0], 0.0), sized[1])

    def whole(t: Table, col: int) -> bool:
        if t.partial:
            return False
        sized = sizes[id(t)] if id(t) in sizes else _size(t, col)
        return sized is None or sized[1] >= PART_SHARE * largest[sized[0]]

    return whole


def flows(t: Table) -> bool:
    """Whether a table is a statement of cash flows: its title says so, or, untitled, it has the rows only that
    statement has (cash from operations, capital expenditure)."""
    if t.statement is not None:
        return t.statement == "cash"
    return any((named := concept_of(r[0])) and named[0] in ("cfo", "capex") for r in t.rows if r)


_LABEL_WORD = re.compile(r"[a-z]+")
_LABEL_SKIP = frozenset({"total", "net", "the", "of", "and", "a", "an", "in", "for", "on", "to", "from"})


def _stems(text: str) -> set[str]:
    return {stem(w) for w in _LABEL_WORD.findall(label_key(text)) if w not in _LABEL_SKIP}


def find_labelled(tables: Sequence[Table], words: str, year: int, hint: str | None = None,
                  quarter: int | None = None) -> Fact | None:
    """The fact of the row whose label holds every word of `words` (stemmed; "total", "net" and function words
    aside) for a fiscal year (or a quarter of it): the shortest such label, in a statement before a note, in the
    table with the most line items; None when no row's label holds them all. For a line item the vocabulary does
    not name ("Merchandise inventories", "Accrued compensation")."""
    wanted = _stems(words)
    if not wanted:
        return None
    whole = _whole(tables, year, quarter)

    def read(t: Table, col: int) -> tuple[tuple[int, ...], tuple[str, ...], str] | None:
        rows = [(len(held), r) for r in t.rows if r and col < len(r) and parse_number(r[col]) is not None
                and wanted <= (held := _stems(r[0]))]
        if not rows:
            return None
        size, row = min(rows, key=lambda x: x[0])
        return (int(t.statement is not None), int(hint is not None and t.statement == hint), int(whole(t, col)),
                t.items, -size), row, f"row:{label_key(row[0])}"

    return _best_fact(tables, year, quarter, read)


def _best_fact(tables: Sequence[Table], year: int, quarter: int | None,
               read: Callable[[Table, int], tuple[tuple[int, ...], tuple[str, ...], str] | None]) -> Fact | None:
    """The fact of the best-scored row `read` finds in a table's column of the period (a tie: the earlier
    table): `read(table, column)` gives (score, row, concept) or None."""
    best: tuple[tuple[int, ...], Fact] | None = None
    for order, t in enumerate(tables):
        col = period_column(t, year, quarter)
        if col is None:
            continue
        found = read(t, col)
        if found is None:
            continue
        score, row, concept = found
        if best is None or (*score, -order) > best[0]:
            value = parse_number(row[col])
            assert value is not None
            if concept in OUTFLOWS:  # an expense or outflow printed in brackets is still that amount
                value = abs(value)
            pages = t.chunk.metadata.get("pages") or [None]
            best = ((*score, -order), Fact(concept, row[0], t.header[col], row[col].replace("$", "").strip(), value,
                                           t.unit, pages[0], t.chunk))
    return best[1] if best else None


def years_asked(question: str) -> list[int]:
    """The years a question names; an average over a range of at most ten years names each year of it."""
    years = sorted({int(y) for y in YEAR.findall(question)})
    m = RANGE.search(question)
    if m and AVERAGE.search(question):
        first, last = int(m.group(1)), int(m.group(2))
        if 0 < last - first <= 10:
            return list(range(first, last + 1))
    return years
