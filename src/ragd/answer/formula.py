"""Formulas a question defines, computed from the filing's statements.

"Fixed asset turnover ratio is defined as: FY2019 revenue / (average PP&E between FY2018 and FY2019)", "DPO =
365 * (average accounts payable between FY2016 and FY2017) / (FY2017 COGS + change in inventory between FY2016
and FY2017)", "cash conversion cycle, calculated as DIO + DSO - DPO": a question that says how its figure is
computed is answered by that computation, whatever the metric is called and whether the vocabulary knows it.

`defined` reads the definition ("defined as", "calculated as", "computed as", "measured as", "=") into an
expression: +, -, *, / (also "plus", "minus", "less", "times", "divided by"), parentheses, constants ("365",
"100"), and operands, each a line item at a period: "FY2019 revenue" (the year it names, else the year the
question asks), "average X between FY2018 and FY2019" (the mean of its years; "average X" alone: the year and the
one before), "change in X between FY2016 and FY2017" (the later less the earlier), "prior year X". A line item is
named as the vocabulary names it (answer.vocabulary: "COGS", "PP&E", "cash from operations"), or by the words of
a row label of the filing's statements ("Merchandise inventories", "Cost of products sold"). Every operand is read
from the statements (answer.periods.find) and cited by cell and page; an operand not found makes the answer an
abstention naming what was found and what was not, so a user can finish it."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..fiscal import YEAR
from . import statements
from .arithmetic import parse_number
from .metrics import METRICS
from .periods import Fact, Table, find, find_labelled
from .statements import Computed, Missing, _name, named_concept
from .vocabulary import TERMS

_END = r"(?=\.\s+[A-Z(]|\.?\s*$|\?|;)"
_DEFINITION = re.compile(
    r"(?P<name>[A-Za-z][^.?:=;]{0,100}?)\s*,?\s+(?:(?:is|are|was|should\s+be|can\s+be|being)\s+)?(?:defined|calculated|"
    r"computed|measured|derived|determined)\s+(?:as|by)\b\s*:?\s*(?P<expr>.+?)" + _END +
    r"|(?:calculate|compute|take)\s+(?P<name2>[^.?:=;]{1,60}?)\s+as\b\s*:?\s*(?P<expr2>.+?)" + _END +
    r"|(?P<name3>\b[A-Za-z][\w&' -]{0,60}?)\s*=\s*(?P<expr3>[^=?]+?)" + _END, re.IGNORECASE | re.DOTALL)
_LEAD = re.compile(r"^(?:.*\b(?:calculate|compute|what\s+(?:is|was|are|were)|find|give|determine)\s+)?(?:the\s+)?",
                   re.IGNORECASE)
_SUBJECT = re.compile(r"\bwhat\s+(?:is|was|are|were)\s+(?P<s>[^?]+?)\s*\?", re.IGNORECASE)
_OWNER = re.compile(r"\b[A-Z0-9][\w&.-]*(?:\s+[A-Z][\w&.-]*)*['\u2019]s?\s+"
                    r"|\b(?:for|of)\s+[A-Z][\w&.-]*(?:\s+[A-Z][\w&.-]*)*"
                    r"|\b(?:for|in|of)\s+(?:fiscal\s+)?(?:FY)?(?:19|20)\d\d\b|\bFY(?:19|20)\d\d\b|\b(?:19|20)\d\d\b")
_PRONOUN = re.compile(r"^(?:it|this|that|this\s+(?:metric|ratio|figure)|the\s+(?:metric|ratio|figure))$", re.IGNORECASE)
_WORD_OPS = ((re.compile(r"\bdivided\s+by\b", re.I), " / "), (re.compile(r"\bmultiplied\s+by\b|\btimes\b|\u00d7", re.I),
             " * "), (re.compile(r"\bplus\b", re.I), " + "), (re.compile(r"\bminus\b|\bless\b", re.I), " - "),
             (re.compile(r"(?<=[\s)])x(?=\s)"), " * "), (re.compile(r"\u2212|\u2013"), " - "))
_TOKEN = re.compile(r"\s*(?:(?P<op>[()*/+])|(?P<minus>(?<!\S)-(?=\s|\()|^-|(?<=\()-)|(?P<text>(?:[^()*/+\s-]|-(?!\s)|"
                    r"\s+(?![()*/+]|-(?:\s|\()))+))")
_Y4 = r"((?:fiscal\s+(?:year\s+)?)?(?:FY\s*)?(?:19|20)\d\d)"
_SPAN = re.compile(rf"\s*\(\s*{_Y4}\s*(?:-|\u2013|to|through|and)\s*{_Y4}\s*\)", re.IGNORECASE)
_ONE_YEAR = re.compile(rf"\s*\(\s*{_Y4}\s*\)", re.IGNORECASE)
_TAIL = re.compile(r"\s*[,;]\s*(?:\d\s*dp|round\w*\b.*|in\s+(?:usd\s+)?(?:millions|billions|thousands|"
                   r"percent\w*)\b.*)$", re.IGNORECASE)
_AVERAGE = re.compile(r"^(?:the\s+)?(?:average|mean|avg\.?)\s+(?:of\s+)?(?:the\s+)?|\s+averaged?\b.*$", re.IGNORECASE)
_CHANGE = re.compile(r"^(?:the\s+)?(?:change|increase|decrease|difference)\s+in\s+(?:the\s+)?", re.IGNORECASE)
_PRIOR = re.compile(r"\b(?:prior|previous|preceding|last)\s+(?:fiscal\s+)?year'?s?\b|\bof\s+the\s+prior\s+year\b",
                    re.IGNORECASE)
_Y = r"(?:fiscal\s+(?:year\s+)?)?(?:FY\s*)?(?:19|20)\d\d"
_PERIOD_PHRASES = (
    re.compile(rf"\b(?:between|from|over)\s+{_Y}\s*(?:and|to|through|-)\s*{_Y}\b", re.IGNORECASE),
    re.compile(rf",?\s*\b(?:at\s+|as\s+of\s+)?(?:the\s+)?(?:year[- ]end|end)\s+of\s+{_Y}(?:\s*(?:and|,)\s*{_Y})*\b",
               re.IGNORECASE),
    re.compile(rf"\b(?:(?:in|for|of|at|during)\s+)?{_Y}(?:\s*(?:and|,)\s*{_Y})*\b", re.IGNORECASE),
    re.compile(r"\b(?:year[- ]end|ending|beginning)\b", re.IGNORECASE))
_PERCENT = re.compile(r"%|\bpercent(?:age)?\b|\bmargin\b|\brate\b", re.IGNORECASE)
_DAYS = re.compile(r"\bdays?\b|\bcycle\b|\bdpo\b|\bdso\b|\bdio\b|\bccc\b", re.IGNORECASE)


@dataclass(frozen=True)
class Operand:
    text: str  # as the question writes it
    item: str  # the line item's words
    how: str  # "value", "average", "change"
    years: tuple[int, ...]  # the years it is read at (an average or a change: each)
    prior: bool = False  # "prior year X": the year before the question's


Node = tuple[Any, ...]  # ("num", value) | ("item", Operand) | (op, left, right) | ("neg", node)


@dataclass(frozen=True)
class Definition:
    name: str
    expression: str  # as written
    tree: Node


def defined(question: str) -> Definition | None:
    """The formula a question defines, parsed; None when it defines none (or one this cannot read)."""
    for m in _DEFINITION.finditer(question):
        expr = (m.group("expr") or m.group("expr2") or m.group("expr3") or "").strip(" .")
        tree = parse(expr)
        if tree is None or not _operands(tree) or tree[0] == "item":
            continue
        name = _named(m.group("name") or m.group("name2") or m.group("name3") or "")
        if not name or _PRONOUN.match(name):
            subject = _SUBJECT.search(question)
            name = _named(subject.group("s")) if subject else ""
        return Definition(name or "the defined figure", expr, tree)
    return None


def _named(clause: str) -> str:
    """The metric's name in the clause that defines it: "What is Acme's FY2021 working capital ratio" -> "working
    capital ratio"; "where DPO" -> "DPO"."""
    text = re.split(r"[.;]\s+|\bwhere\s+|\bwith\s+|\bi\.e\.\s*", clause)[-1]
    text = _LEAD.sub("", text.strip())
    text = _OWNER.sub(" ", text)
    return re.sub(r"\s+", " ", text).strip(" ,'")


def parse(expr: str) -> Node | None:
    """An expression's tree (precedence: * and / before + and -, left to right), or None when it does not read."""
    text = _SPAN.sub(lambda m: f" between {m.group(1)} and {m.group(2)}", expr)  # "avg AP (FY2016-FY2017)"
    text = _ONE_YEAR.sub(lambda m: f" {m.group(1)}", text)  # "COGS (FY2017)"
    text = _TAIL.sub("", text)  # ", 2dp", ", rounded to two decimals"
    for pattern, op in _WORD_OPS:
        text = pattern.sub(op, text)
    tokens: list[tuple[str, str]] = []
    at = 0
    while at < len(text):
        m = _TOKEN.match(text, at)
        if m is None or m.end() == at:
            if text[at:].strip():
                return None
            break
        at = m.end()
        if m.group("op"):
            tokens.append(("op", m.group("op")))
        elif m.group("minus"):
            tokens.append(("op", "-"))
        elif m.group("text") and m.group("text").strip():
            tokens.append(("text", m.group("text").strip()))
    if not tokens:
        return None
    pos = 0

    def peek() -> tuple[str, str] | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> tuple[str, str]:
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def expression() -> Node | None:
        left = term()
        while left is not None and peek() in (("op", "+"), ("op", "-")):
            op = take()[1]
            right = term()
            if right is None:
                return None
            left = (op, left, right)
        return left

    def term() -> Node | None:
        left = factor()
        while left is not None and peek() in (("op", "*"), ("op", "/")):
            op = take()[1]
            right = factor()
            if right is None:
                return None
            left = (op, left, right)
        return left

    def factor() -> Node | None:
        token = peek()
        if token is None:
            return None
        if token == ("op", "("):
            take()
            inner = expression()
            if inner is None or peek() != ("op", ")"):
                return None
            take()
            return inner
        if token == ("op", "-"):
            take()
            inner = factor()
            return None if inner is None else ("neg", inner)
        if token[0] == "text":
            take()
            return _leaf(token[1])
        return None

    tree = expression()
    return tree if tree is not None and pos == len(tokens) else None


def _leaf(text: str) -> Node | None:
    number = parse_number(text.replace("%", "").strip())
    if number is not None and re.fullmatch(r"\$?\s*[\d,.]+\s*%?", text.strip()):
        return ("num", number / 100 if text.strip().endswith("%") else number)
    years = tuple(sorted({int(y) for y in YEAR.findall(text)}))
    how = "value"
    item = text
    if _AVERAGE.search(item):
        how, item = "average", _AVERAGE.sub("", item)
    elif _CHANGE.search(item):
        how, item = "change", _CHANGE.sub("", item)
    prior = bool(_PRIOR.search(item))
    item = _PRIOR.sub(" ", item)
    for pattern in _PERIOD_PHRASES:
        item = pattern.sub(" ", item)
    item = re.sub(r"\(\s*\)|\s*\((?:from|in|on|per|as)\s+[^)]*\)", " ", item)  # "(from cash flow statement)"
    item = re.sub(r"^\s*(?:the\s+|of\s+|an?\s+)+", "", re.sub(r"\s+", " ", item))
    item = item.strip(" ,-'")
    if not re.search(r"[A-Za-z]", item):
        return None
    return ("item", Operand(text, item, how, years, prior))


def _operands(tree: Node) -> list[Operand]:
    if tree[0] == "item":
        return [tree[1]]
    if tree[0] == "num":
        return []
    return [o for child in tree[1:] for o in _operands(child)]


def compute(definition: Definition, tables: Sequence[Table], year: int, hint: str | None = None,
            quarter: int | None = None, percent: bool = False) -> Computed | Missing:
    """The defined figure for `year` (the question's), every operand read from the tables; Missing naming what
    was found and what was not when an operand is not there."""
    found: list[Fact] = []
    missing: list[str] = []
    values: list[float] = []  # each operand's, in the order the tree holds them
    used_years: set[int] = set()
    for op in _operands(definition.tree):
        at = op.years or ((year - 1,) if op.prior else (year,))
        if op.how in ("average", "change") and len(at) == 1:
            at = (at[0] - 1, at[0])
        facts: list[float] = []
        for y in (at if op.how in ("average", "change") else at[-1:]):
            read = _read(op.item, tables, y, hint, quarter)
            if read is None:
                missing.append(f"{op.item} for {y}")
                continue
            if isinstance(read, Computed):
                facts.append(read.result)
                found += read.facts
            else:
                facts.append(read[0].value)
                found += read
            used_years.add(y)
        if len(facts) == (len(at) if op.how in ("average", "change") else 1):
            values.append(sum(facts) / len(facts) if op.how == "average" else
                          facts[-1] - facts[0] if op.how == "change" else facts[0])
    if missing:
        return Missing(definition.name, tuple(missing), metric=True, found=tuple(found))
    try:
        result = _evaluate(definition.tree, iter(values))
    except ZeroDivisionError:
        return Missing(definition.name, ("a divisor that is not zero",), metric=True, found=tuple(found))
    unit = _unit(definition, found, percent)
    if unit == "%" and not _scaled(definition.tree):
        result *= 100
    return Computed(_titled(definition.name), round(result, 6), unit, re.sub(r"\s+", " ", definition.expression),
                    tuple(found), tuple(sorted(used_years | {year})))


def _read(item: str, tables: Sequence[Table], year: int, hint: str | None, quarter: int | None
          ) -> list[Fact] | Computed | None:
    """The operand's facts: a line item the vocabulary names, an amount it defines ("total debt", "EBITDA":
    computed from its own line items), or the row whose label says its words."""
    concept = named_concept(item)
    if concept is not None and _covers(concept, item):
        fact = find(tables, concept, year, hint, quarter)
        return [fact] if fact else None
    metric = next((m for m in METRICS if m.unit == "" and m.pattern.fullmatch(item.strip())), None)
    if metric is not None:
        done = statements.answer(f"What is the {item} in {year}?", tables, hint)
        return done if isinstance(done, Computed) else None
    fact = find_labelled(tables, item, year, hint, quarter)
    return [fact] if fact else None


def _covers(concept: str, item: str) -> bool:
    """Whether the vocabulary's name for `concept` found in `item` is most of it (not "inventory" in "inventory
    reserves")."""
    words = set(re.findall(r"[a-z&]+", item.lower())) - {"total", "net", "the", "of", "and"}
    named = set(re.findall(r"[a-z&]+", _name(concept).lower()))
    for term in TERMS.get(concept, ()):
        named |= set(re.findall(r"[a-z&]+", term.lower()))
    return len(words - named) <= max(1, len(words) // 3)


def _evaluate(tree: Node, values: Iterator[float]) -> float:
    """The tree's value, its operands' values taken from `values` in the order `_operands` lists them."""
    kind = tree[0]
    if kind == "num":
        return float(tree[1])
    if kind == "item":
        return next(values)
    if kind == "neg":
        return -_evaluate(tree[1], values)
    left = _evaluate(tree[1], values)
    right = _evaluate(tree[2], values)
    if kind == "+":
        return left + right
    if kind == "-":
        return left - right
    if kind == "*":
        return left * right
    return left / right


def _scaled(tree: Node) -> bool:
    """Whether the expression multiplies by 100 itself."""
    return ("num", 100.0) in _nums(tree)


def _divides(tree: Node) -> bool:
    return tree[0] == "/" or (tree[0] in ("*", "neg") and any(_divides(c) for c in tree[1:]))


def _unit(definition: Definition, facts: Sequence[Fact], percent: bool) -> str:
    if _DAYS.search(definition.name) or {("num", 365.0), ("num", 360.0)} & set(_nums(definition.tree)):
        return "days"
    if percent or _PERCENT.search(definition.name):
        return "%"
    if _divides(definition.tree):
        return "x"
    units = {f.unit for f in facts}
    return units.pop() if len(units) == 1 else ""


def _nums(tree: Node) -> list[Node]:
    if tree[0] == "num":
        return [tree]
    if tree[0] == "item":
        return []
    return [n for child in tree[1:] for n in _nums(child)]


def _titled(name: str) -> str:
    return re.sub(r"^(?:the|a|an)\s+", "", name.strip(), flags=re.IGNORECASE)
