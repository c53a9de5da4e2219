"""Table arithmetic with cell citations: deterministic, no model.

A question that asks for a change, a percentage change, an average, a sum, a ratio, a share or a difference is
answered from a table of the context when its operands can be found there without doubt:
- the operation comes from the question's words (`operation`);
- the periods are the years the question names (a month with its year when it names one): each must match
  exactly one column header of the table (headers of several rows joined, see `extractive.table`);
- the row is the body row whose label the question names best: all of the label's words (a row under a group
  row also answers to the group's words) and the most of them; two rows that match equally with different
  figures are ambiguous;
- an operation over two rows (a ratio, a share, a difference between two items) takes the two rows the question
  names, in the order it names them, in the one column its period names (or the table's only figure column).
Anything not found, or found twice, makes the computation refuse with the reason (`Refusal`): the caller quotes
the rows it did find and says the computation could not be done. It never guesses.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..types import Candidate
from .extractive import row_text, table  # a table is read as it is quoted: the same header, rows written the same

_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")
_MONTH = re.compile(r"\b(" + "|".join(m[:3] for m in _MONTHS) + r")[a-z]*\.?\s+(?:\d{1,2},?\s+)?((?:19|20)\d\d)\b",
                    re.IGNORECASE)
_YEAR = re.compile(r"(?<![\d.,$])(?:fy\s?|fiscal\s+)?((?:19|20)\d\d)(?![\d.,]\d)", re.IGNORECASE)
_RANGE = re.compile(r"\b((?:19|20)\d\d)\s*(?:-|\u2013|to|through)\s*((?:19|20)\d\d)\b", re.IGNORECASE)
_NUMBER = re.compile(r"^\(?-?\(?-?\d[\d,]*(?:\.\d+)?\)?%?\)?$")

# The operation a question asks for, the first that matches (the order matters: "percentage change" before
# "change", "average" before "change" in "the average change" is not supported and refuses below).
_OPERATIONS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("percent_change", re.compile(
        r"\b(?:percent(?:age)?|%)\s*(?:change|increase|decrease|growth|rise|decline|drop|variation)"
        r"|\bgrowth\s+rate\b|\bby\s+what\s+(?:percent(?:age)?|%)", re.IGNORECASE)),
    ("average", re.compile(r"\b(?:average|mean)\b", re.IGNORECASE)),
    ("ratio", re.compile(r"\bratio\b", re.IGNORECASE)),
    ("share", re.compile(r"\bas\s+an?\s+(?:percentage|proportion|share|fraction)\s+of\b"
                         r"|\b(?:percentage|proportion|share)\s+of\b.+\b(?:in|to|of)\b(?:\s+the)?\s+total\b"
                         r"|\bproportion\b|\bpercentage\s+constitution\b|\bhow\s+many\s+%|\bmake\s+up\b"
                         r"|\bwhat\s+percentage\s+of\b", re.IGNORECASE)),
    ("sum", re.compile(r"\bsum\s+of\b|\bcombined\b|\baltogether\b|\bin\s+total\s*(?:[?.,;]|$)|\btotal\s+of\b",
                       re.IGNORECASE)),
    ("change", re.compile(r"\b(?:change[sd]?|increase[sd]?|decrease[sd]?|difference|differ|grow|grew|growth|"
                          r"rise|rose|decline[sd]?|drop(?:ped)?|fell|variance|movement)\b", re.IGNORECASE)),
)
# A question about why or how something changed asks for an explanation, not a figure.
_CAUSE = re.compile(r"\b(?:why|reasons?|caused?|resulted|led\s+to|due\s+to|driven|drove|drivers?|driving|"
                    r"accounts?\s+for\s+the|accounted\s+for\s+the|responsible\s+for|explain\w*|contribut\w+)\b"
                    r"|\battribut(?:able|ed)\s+to\s*[?.]?\s*$"
                    r"|\bhow\s+(?:did|does|do|has|have|was|were|is|are)\b(?!.*\bby\b)", re.IGNORECASE)
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("a an and are as at be between by change changed compared company did do does during each for "
                  "from had has have how in increase is it its much of on or over percentage period the their "
                  "this to total was were what which with year years ended end fiscal fy".split())


@dataclass(frozen=True)
class Operand:
    row: str
    column: str
    text: str  # the cell as the table writes it
    value: float


@dataclass(frozen=True)
class Calculation:
    operation: str
    result: float
    formula: str
    operands: tuple[Operand, ...]
    chunk: Candidate
    unit: str = ""  # "%" for a percentage result

    def as_dict(self) -> dict[str, Any]:
        return {"operation": self.operation, "result": self.result, "formula": self.formula, "unit": self.unit,
                "chunk_id": str(self.chunk.chunk_id),
                "operands": [{"row": o.row, "column": o.column, "cell": o.text, "value": o.value}
                             for o in self.operands]}

    def sentence(self) -> str:
        cells = "; ".join(f"{o.row} / {o.column}: {o.text}" for o in self.operands)
        return (f"{_LABELS[self.operation]}: {format_number(self.result)}{self.unit} = {self.formula} "
                f"(cells: {cells}) [chunk:{self.chunk.chunk_id}]")


@dataclass(frozen=True)
class Refusal:
    operation: str
    reason: str
    rows: tuple[tuple[str, Candidate], ...] = ()  # the rows found, to quote


_LABELS = {"change": "Change", "percent_change": "Percentage change", "average": "Average", "sum": "Sum",
           "ratio": "Ratio", "share": "Share"}


# Questions whose answer is of another kind than a computed figure, whatever words of arithmetic they hold: a name
# or a period chosen ("In which year was the weighted average number of shares largest?", "Which segment had the
# largest change?"), a count of things ("How many types of non-cash changes are there?"), a meaning ("What does
# the average rate represent?") or figures listed as printed ("the respective ... in 2018 and 2019")
_OTHER_KIND = re.compile(
    r"^\W*(?:(?:in|for|within|from|to|of|at|under|on|by|during)\s+)?(?:which|who|whom|whose)\b"
    r"|^\W*how\s+many\s+(?:(?:different|distinct|separate|main|major|key)\s+)?(?:types?|kinds?|items?|factors?|"
    r"categor(?:y|ies)|years?|segments?|components?|elements?|classes|sources|countries|regions|locations)\b"
    r"|\bwhat\s+(?:does|do|did)\b.*\b(?:mean|represent|refer\s+to|stand\s+for|comprise|include)\s*\??\s*$"
    r"|\brespective(?:ly)?\b", re.IGNORECASE)
# the name of a figure whose words are arithmetic's ("weighted average shares" are printed, not averaged)
_NAMING = re.compile(r"\bweighted[-\s]+average\b", re.IGNORECASE)


def operation(question: str) -> str | None:
    """The arithmetic a question asks for, or None (its answer is of another kind, or no arithmetic is asked)."""
    if _OTHER_KIND.search(question):
        return None
    asked = _NAMING.sub(" ", question)
    return next((name for name, pattern in _OPERATIONS if pattern.search(asked)), None)


def parse_number(cell: str) -> float | None:
    """A table cell's figure: "$ 1,571.7" is 1571.7, "(3.1)" is -3.1, "4%" is 4; None when it is not one figure."""
    text = re.sub("[$\u20ac\u00a3\u00a5\\s]", "", cell.strip().replace("\u2212", "-"))
    if not text or not _NUMBER.match(text) or not any(ch.isdigit() for ch in text):
        return None
    negative = (text.startswith("(") and text.endswith(")")) or "-" in text
    digits = re.sub(r"[^\d.]", "", text)
    try:
        value = float(digits)
    except ValueError:
        return None
    return -value if negative else value


def format_number(value: float) -> str:
    """At most two decimals, thousands separated, no trailing zeros: 1234.5 -> "1,234.5"."""
    text = f"{round(value, 2):,.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _words(text: str) -> list[str]:
    return [w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w
            for w in _WORD.findall(text.lower())]


@dataclass(frozen=True)
class _Row:
    label: str
    words: frozenset[str]
    group: frozenset[str]
    cells: tuple[str, ...]


def _periods(question: str, ranges: bool = True) -> list[tuple[str, str | None]]:
    """(year, month or None) the question names, in order, once each; with `ranges`, "2017-2019" (or "from 2017 to
    2019") names each year between (an average over them), else only its ends (a change between them)."""
    found: list[tuple[int, tuple[str, str | None]]] = []
    for m in _MONTH.finditer(question):
        found.append((m.start(), (m.group(2), m.group(1)[:3].lower())))
    taken = {p for _, p in found}
    for m in _RANGE.finditer(question) if ranges else ():
        first, last = int(m.group(1)), int(m.group(2))
        if 0 < last - first <= 10:
            found += [(m.start() + i, (str(y), None)) for i, y in enumerate(range(first, last + 1))]
    for m in _YEAR.finditer(question):
        if not any(year == m.group(1) for year, _ in taken):
            found.append((m.start(), (m.group(1), None)))
    out: list[tuple[str, str | None]] = []
    for _, p in sorted(found):
        if p not in out and not (p[1] is None and any(q[0] == p[0] and q[1] for q in out)):
            out.append(p)
    return out


def _columns(header: Sequence[str], period: tuple[str, str | None]) -> list[int]:
    year, month = period
    hits = []
    for i, h in enumerate(header):
        text = h.lower()
        if i == 0 or not re.search(rf"(?<!\d){year}(?!\d)", text):
            continue
        if month and not re.search(rf"\b{month}", text):
            continue
        hits.append(i)
    if not hits and month:  # "December 31, 2018" asked of a table whose columns say only "2018"
        return _columns(header, (year, None))
    return hits


def _rows(body: Sequence[Sequence[str]]) -> list[_Row]:
    rows: list[_Row] = []
    group: frozenset[str] = frozenset()
    for cells in body:
        label = cells[0] if cells else ""
        figures = [c for c in cells[1:] if c.strip()]
        if label and not figures:  # a group row ("Current liabilities") names the rows below it
            group = frozenset(_words(label)) - _STOP
            continue
        rows.append(_Row(label, frozenset(_words(label)) - _STOP, group, tuple(cells)))
    return rows


def _match(rows: Sequence[_Row], question_words: set[str]) -> list[tuple[float, _Row]]:
    """Rows whose label's words are all in the question (a group's words may stand in for none), best first by
    the number of label words matched."""
    scored = []
    for row in rows:
        if not row.words or not row.words <= question_words:
            continue
        scored.append((len(row.words) + 0.5 * len(row.group & question_words), row))
    return sorted(scored, key=lambda x: -x[0])


def compute(question: str, context: Sequence[Candidate], *, max_tables: int = 3) -> Calculation | Refusal | None:
    """The calculation the question asks for over the first tables of the context, a refusal saying why it could
    not be done, or None when the question asks for no arithmetic."""
    op = operation(question)
    if op is None or _CAUSE.search(question):
        return None
    tables = [c for c in context if c.chunk_type == "table"][:max_tables]
    if not tables:
        return Refusal(op, "no table in the evidence holds its figures")
    qwords = set(_words(question)) - _STOP
    reasons: list[str] = []
    found: list[tuple[str, Candidate]] = []
    for chunk in tables:
        header, body = table(chunk.content)
        if not header:
            continue
        outcome = _in_table(op, question, qwords, header, _rows(body), chunk)
        if isinstance(outcome, Calculation):
            return outcome
        reasons.append(outcome.reason)
        found += outcome.rows
    return Refusal(op, reasons[0] if reasons else "no table in the evidence holds its figures", tuple(found[:3]))


def _in_table(op: str, question: str, qwords: set[str], header: Sequence[str], rows: list[_Row],
              chunk: Candidate) -> Calculation | Refusal:
    matched = _match(rows, qwords)
    if not matched:
        return Refusal(op, "no row of the table is named by the question")
    quote = tuple((row_text(header, r.cells), chunk) for _, r in matched[:2])
    # the operation's word may be the row's own ("the change in weighted average shares" asks for a change)
    label = matched[0][1].label.lower().strip(" .:")
    if label and label in question.lower():
        op = operation(re.sub(re.escape(label), " ", question, flags=re.IGNORECASE)) or op
    # a word of the question that names rows of this table must be in the row's label (or its group, or the
    # header): "net receivables" is not the row "Total, net" of a table of lease and loan receivables
    named = (qwords & set().union(*(r.words | r.group for r in rows))) - set(_words(" ".join(header)))
    periods = _periods(question, ranges=op in ("average", "sum"))
    columns: list[int] = []
    for period in periods:
        hits = _columns(header, period)
        if len(hits) != 1:
            return Refusal(op, f"{'no' if not hits else 'more than one'} column of the table is "
                               f"{' '.join(x for x in (period[1], period[0]) if x)}", quote)
        columns.append(hits[0])
    two_rows = op in ("ratio", "share") or (op in ("change", "sum") and len(periods) <= 1 and len(matched) > 1
                                            and matched[0][0] == matched[1][0])
    if two_rows:
        pair = matched[:2]
        if len(pair) == 2 and not named <= set().union(*(r.words | r.group for _, r in pair)):
            return Refusal(op, "the rows found do not carry every word of the question that names rows", quote)
        return _across_rows(op, question, header, matched, columns, chunk, quote)
    matched = [(score, r) for score, r in matched if named <= r.words | r.group]
    if not matched:
        return Refusal(op, "no row of the table carries every word of the question that names rows", quote)
    best = [r for s, r in matched if s == matched[0][0]]
    if len({r.cells for r in best}) > 1:
        return Refusal(op, f"rows {', '.join(repr(r.label) for r in best[:3])} match the question equally", quote)
    row = best[0]
    if op in ("change", "percent_change") and len(columns) == 1:
        earlier = _previous(header, periods[0], columns[0])
        if earlier is None:
            return Refusal(op, "the question names one period and the table has no earlier one", quote)
        columns = [earlier, columns[0]]
    if len(columns) < 2:
        return Refusal(op, "the question does not name the periods to compute over", quote)
    operands = [_operand(row, header, c) for c in columns]
    if any(o is None for o in operands):
        return Refusal(op, "a cell it needs holds no figure", quote)
    ops = [o for o in operands if o is not None]
    if op in ("change", "percent_change"):
        if len(ops) != 2:
            return Refusal(op, "a change is between two periods and the question names more", quote)
        old, new = sorted(ops, key=lambda o: _period_key(o.column))
        return _difference(op, new, old, chunk)
    return _aggregate(op, ops, chunk)


_Quote = tuple[tuple[str, Candidate], ...]


def _across_rows(op: str, question: str, header: Sequence[str], matched: list[tuple[float, _Row]],
                 columns: list[int], chunk: Candidate, quote: _Quote) -> Calculation | Refusal:
    if len(matched) < 2:
        return Refusal(op, "it needs two rows and the question names one", quote)
    first, second = _in_order(question, [r for _, r in matched[:2]])
    if op == "share" and ("total" in first.label.lower()) != ("total" in second.label.lower()):
        first, second = (second, first) if "total" in first.label.lower() else (first, second)  # part of the total
    if len(columns) > 1:
        return Refusal(op, "it needs one period and the question names more", quote)
    if not columns:
        figures = [i for i in range(1, len(header)) if parse_number(first.cells[i] if i < len(first.cells) else "")
                   is not None]
        if len(figures) != 1:
            return Refusal(op, "the question does not say which column (period) to use", quote)
        columns = figures
    a, b = _operand(first, header, columns[0]), _operand(second, header, columns[0])
    if a is None or b is None:
        return Refusal(op, "a cell it needs holds no figure", quote)
    if op == "change":
        return _calc("change", a.value - b.value, f"{a.text} \u2212 {b.text}", (a, b), chunk)
    if op == "sum":
        return _aggregate(op, [a, b], chunk)
    if b.value == 0:
        return Refusal(op, "the divisor is zero", quote)
    if op == "share":
        return _calc(op, a.value / b.value * 100, f"{a.text} / {b.text} \u00d7 100", (a, b), chunk, "%")
    return _calc(op, a.value / b.value, f"{a.text} / {b.text}", (a, b), chunk)


def _difference(op: str, new: Operand, old: Operand, chunk: Candidate) -> Calculation | Refusal:
    if op == "change":
        return _calc(op, new.value - old.value, f"{new.text} \u2212 {old.text}", (new, old), chunk)
    if old.value == 0:
        return Refusal(op, "the earlier figure is zero", ())
    return _calc(op, (new.value - old.value) / old.value * 100,
                 f"({new.text} \u2212 {old.text}) / {old.text} \u00d7 100", (new, old), chunk, "%")


def _aggregate(op: str, ops: Sequence[Operand], chunk: Candidate) -> Calculation | Refusal:
    total = sum(o.value for o in ops)
    joined = " + ".join(o.text for o in ops)
    if op == "average":
        return _calc(op, total / len(ops), f"({joined}) / {len(ops)}", tuple(ops), chunk)
    if op == "sum":
        return _calc(op, total, joined, tuple(ops), chunk)
    return Refusal(op, "it needs two rows and the question names one", ())


def _calc(op: str, value: float, formula: str, ops: Sequence[Operand], chunk: Candidate,
          unit: str = "") -> Calculation:
    return Calculation(op, round(value, 6), formula, tuple(ops), chunk, unit)


def _operand(row: _Row, header: Sequence[str], column: int) -> Operand | None:
    cell = row.cells[column] if column < len(row.cells) else ""
    value = parse_number(cell)
    return None if value is None else Operand(row.label, header[column], cell.strip(), value)


def _previous(header: Sequence[str], period: tuple[str, str | None], column: int) -> int | None:
    before = _columns(header, (str(int(period[0]) - 1), period[1]))
    return before[0] if len(before) == 1 and before[0] != column else None


def _period_key(column: str) -> tuple[int, int]:
    years = re.findall(r"(?:19|20)\d\d", column)
    month = next((i for i, m in enumerate(_MONTHS) if m[:3] in column.lower()), -1)
    return (int(years[-1]) if years else 0, month)


def _in_order(question: str, rows: list[_Row]) -> tuple[_Row, _Row]:
    """The two rows in the order the question names them (by where each label's first word appears)."""
    text = question.lower()

    def where(row: _Row, other: _Row) -> int:
        own = (row.words - other.words) or row.words  # the words that tell the two rows apart
        spots = [m.start() for w in own for m in re.finditer(rf"\b{re.escape(w)}", text)]
        return min(spots) if spots else len(text)

    first, second = sorted(rows, key=lambda r: where(r, rows[1] if r is rows[0] else rows[0]))
    return first, second


__all__ = ["Calculation", "Operand", "Refusal", "compute", "format_number", "operation", "parse_number"]
