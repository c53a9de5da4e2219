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
millions, except per share data)"). Everything is deterministic."""

from __future__ import annotations

import dataclasses
import functools
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ..types import Candidate
from .arithmetic import format_number, parse_number
from .extractive import table
from .question import ORDINALS, QUARTER_NAMED, quarter_number

# -- the vocabulary ---------------------------------------------------------------------------------------------
# concept -> (its statement, the row labels issuers print for it, most specific first). Labels are compared after
# `label_key` (lower case, parentheticals, footnote marks and punctuation gone; "total " and ", net" optional).
LINE_ITEMS: dict[str, tuple[str, tuple[str, ...]]] = {
    "revenue": ("income", ("total net revenue", "total net revenues", "total revenues", "total revenue",
                           "net revenues", "net revenue", "total net sales", "net sales", "revenues", "revenue",
                           "net sales and revenues", "sales to customers", "sales", "net operating revenues",
                           "operating revenues", "total operating revenues", "reported sales", "reported revenue",
                           "reported revenues", "reported net sales")),
    "cogs": ("income", ("cost of sales", "cost of goods sold", "cost of revenues", "cost of revenue",
                        "total cost of revenues", "total cost of revenue", "cost of products sold",
                        "cost of sales excluding depreciation and amortization", "cost of services and products",
                        "cost of goods sold excluding depreciation and amortization", "total cost of sales")),
    "gross_profit": ("income", ("gross profit", "gross margin")),
    "sga": ("income", ("selling general and administrative expenses", "selling general and administrative",
                       "selling general and administrative expense", "general and administrative")),
    "operating_income": ("income", ("operating income", "operating income loss", "income from operations",
                                    "operating profit", "income loss from operations", "operating earnings")),
    "interest_expense": ("income", ("interest expense", "interest expense net")),
    "pretax_income": ("income", ("income before income taxes", "income before taxes",
                                 "earnings before provision for taxes on income", "income before provision for "
                                 "income taxes", "earnings before income taxes", "income loss before income taxes")),
    "income_tax": ("income", ("provision for income taxes", "income tax expense", "income taxes",
                              "provision for taxes on income", "income tax provision", "provision benefit for "
                              "income taxes", "income tax expense benefit")),
    "net_income": ("income", ("net income attributable to shareholders", "net earnings", "net income",
                              "net income loss", "net earnings loss")),
    "da": ("cash", ("depreciation and amortization", "depreciation amortization and other",
                    "depreciation and amortization expense", "depreciation depletion and amortization",
                    "depreciation of property and equipment")),
    "cfo": ("cash", ("net cash provided by operating activities", "net cash provided by used in operating activities",
                     "cash provided by operations", "net cash from operating activities",
                     "cash provided by operating activities", "net cash flows from operating activities")),
    "capex": ("cash", ("purchases of property plant and equipment", "purchases of property and equipment",
                       "capital expenditures", "additions to property plant and equipment",
                       "additions to property and equipment", "payments for property and equipment",
                       "purchases of property and equipment including internal use software and website development",
                       "capital spending", "expenditures for property plant and equipment",
                       "property plant and equipment additions", "investments in property plant and equipment")),
    "dividends": ("cash", ("dividends paid", "dividends paid to shareholders", "cash dividends paid",
                           "payments of dividends", "dividends")),
    "cash": ("balance", ("cash and cash equivalents", "cash and equivalents", "cash")),
    "short_investments": ("balance", ("marketable securities current", "short term investments",
                                      "marketable securities", "short term marketable securities")),
    "receivables": ("balance", ("accounts receivable net", "accounts receivable", "trade receivables net",
                                "receivables net", "accounts receivable less allowances", "trade accounts receivable",
                                "accounts notes and other receivables", "receivables")),
    "inventory": ("balance", ("total inventories", "merchandise inventories", "inventories", "inventory")),
    "current_assets": ("balance", ("total current assets",)),
    "ppe": ("balance", ("property plant and equipment net", "property and equipment net", "net property plant "
                        "and equipment", "property plant and equipment", "property and equipment")),
    "total_assets": ("balance", ("total assets",)),
    "payables": ("balance", ("accounts payable", "trade accounts payable", "accounts payable trade")),
    "current_liabilities": ("balance", ("total current liabilities",)),
    "total_liabilities": ("balance", ("total liabilities",)),
    "equity": ("balance", ("total shareholders equity", "total stockholders equity", "total equity",
                           "total shareowners equity", "shareholders equity", "stockholders equity")),
    # debt as balance sheets print it: the long-term part, the part due within a year, short-term borrowings
    "long_term_debt": ("balance", ("long term debt", "long term debt net of current portion",
                                   "long term debt excluding current portion", "long term debt less current portion",
                                   "long term debt excluding current maturities", "long term debt noncurrent",
                                   "long term borrowings", "long term debt net")),
    "current_ltd": ("balance", ("current portion of long term debt", "debt maturing within one year",
                                "current maturities of long term debt", "long term debt current portion",
                                "current portion of long term debt and finance leases", "long term debt due within "
                                "one year", "current portion of long term borrowings")),
    "short_debt": ("balance", ("short term debt", "short term borrowings", "commercial paper", "notes payable",
                               "short term borrowings and current portion of long term debt")),
}
# how questions name a concept (lower case, longest first when read)
TERMS: dict[str, tuple[str, ...]] = {
    "revenue": ("revenue", "revenues", "net revenue", "net revenues", "total revenue", "net sales", "sales",
                "top line", "top-line"),
    "cogs": ("cogs", "cost of goods sold", "cost of sales", "cost of revenue", "cost of revenues"),
    "gross_profit": ("gross profit",),
    "sga": ("sg&a", "selling, general and administrative"),
    "operating_income": ("operating income", "operating profit", "income from operations", "ebit"),
    "interest_expense": ("interest expense",),
    "pretax_income": ("pretax income", "pre-tax income", "income before taxes", "income before income taxes"),
    "income_tax": ("income tax expense", "income taxes", "tax expense", "provision for income taxes"),
    "net_income": ("net income", "net earnings", "net profit", "net income attributable to shareholders"),
    "da": ("depreciation and amortization", "d&a", "depreciation & amortization"),
    "cfo": ("cash from operations", "operating cash flow", "cash flow from operations", "cash from operating "
            "activities", "net cash provided by operating activities", "cash flows from operations"),
    "capex": ("capital expenditure", "capital expenditures", "capex", "capital spending", "purchases of property"),
    "dividends": ("dividends paid", "dividends", "dividend payments"),
    "cash": ("cash and cash equivalents", "cash & cash equivalents", "cash"),
    "receivables": ("accounts receivable", "receivables"),
    "inventory": ("inventory", "inventories", "total inventories"),
    "current_assets": ("total current assets", "current assets"),
    "ppe": ("net ppne", "ppne", "net pp&e", "pp&e", "property, plant and equipment", "property and equipment",
            "fixed assets", "net fixed assets"),
    "total_assets": ("total assets",),
    "payables": ("accounts payable", "payables"),
    "current_liabilities": ("total current liabilities", "current liabilities"),
    "total_liabilities": ("total liabilities",),
    "equity": ("shareholders' equity", "shareholders equity", "stockholders' equity", "stockholders equity",
               "total equity"),
    "long_term_debt": ("long-term debt", "long term debt"),
    "current_ltd": ("current portion of long-term debt", "current maturities of long-term debt"),
    "short_debt": ("short-term debt", "short-term borrowings", "commercial paper"),
}
# amounts a statement may print in brackets (as deductions or outflows) that are the item's size all the same
OUTFLOWS = frozenset({"cogs", "sga", "interest_expense", "income_tax", "da", "capex", "dividends"})
STATEMENTS = {
    "income": re.compile(r"statements?\s+of\s+(?:consolidated\s+)?(?:comprehensive\s+)?(?:income|operations|"
                         r"earnings)|income\s+statements?|p\s*&\s*l|profit\s+and\s+loss", re.IGNORECASE),
    "balance": re.compile(r"balance\s+sheets?|statements?\s+of\s+financial\s+(?:position|condition)",
                          re.IGNORECASE),
    "cash": re.compile(r"cash\s+flows?\s+statements?|statements?\s+of\s+cash\s*flows?|cash\s+flow\s+statement",
                       re.IGNORECASE),
}
_LETTER_APART = re.compile(r"(?<=[a-z]{3}) (?=[a-z]\b)")  # a word's last letter set apart: "Balance Shee t"


def statement_named(title: str) -> str | None:
    """The statement a title names ("Consolidated Balance Sheets": "balance"), its words read whole where the
    type set a letter apart ("Balance Shee t")."""
    mended = _LETTER_APART.sub("", title)
    return next((name for name, p in STATEMENTS.items() if p.search(mended)), None)


_UNIT = re.compile(r"\b(?:in\s+|\$\s*in\s+|dollars\s+in\s+|amounts\s+in\s+)?(thousands|millions|billions)\b",
                   re.IGNORECASE)
_PAREN = re.compile(r"\([^)]*\)")
_MARK = re.compile(r"(?<=[a-z])\d+\b|\*+")


def label_key(label: str) -> str:
    """A row label as the vocabulary reads it: "Purchases of property, plant and equipment (PP&E)" ->
    "purchases of property plant and equipment"; "Property, plant and equipment — net" -> "property plant and
    equipment net"."""
    text = _PAREN.sub(" ", label.lower().replace("\u2019", "'"))
    text = _MARK.sub("", text).replace("'", "")
    text = re.sub(r"[^a-z&]+", " ", text).replace("&", " and ")
    return re.sub(r"\s+", " ", text).strip()


_KEYS = {concept: tuple(label_key(x) for x in labels) for concept, (_, labels) in LINE_ITEMS.items()}


# labels that name a concept by how they begin ("Net earnings attributable to Acme Corp. shareholders"), read after
# the exact names; never a noncontrolling interest's or a per-share line
LEADS: dict[str, tuple[str, ...]] = {
    "net_income": ("net income attributable to", "net earnings attributable to",
                   "net income from continuing operations", "net earnings from continuing operations"),
    "da": ("depreciation and amortization of", "depreciation depletion and amortization of"),
}
_NOT_LEADS = re.compile(r"\bnon ?controlling\b|\bper\b|\bshare\b(?!holders)")


def _bare(key: str) -> str:
    return key[6:] if key.startswith("total ") else key


# a label's key (or its key without "total ") -> the first (concept, rank) in the vocabulary's order naming it: the
# key is a name or the name and ", net"; the key without "total " is a name, with or without its own "total "
_ORDERED = [(concept, rank, k) for concept, keys in _KEYS.items() for rank, k in enumerate(keys)]


def _first_naming(*forms: Callable[[str], str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for at, (_, _, k) in enumerate(_ORDERED):
        for form in forms:
            out.setdefault(form(k), at)
    return out


_BY_KEY = _first_naming(lambda k: k, lambda k: f"{k} net")
_BY_BARE = _first_naming(lambda k: k, _bare)


@functools.lru_cache(maxsize=16384)
def concept_of(label: str) -> tuple[str, int] | None:
    """The concept a row label names, and how specific the name is (0: the most)."""
    key = label_key(label)
    hits = [at for at in (_BY_KEY.get(key), _BY_BARE.get(_bare(key))) if at is not None]
    if hits:
        concept, rank, _ = _ORDERED[min(hits)]
        return concept, rank
    for concept, leads in LEADS.items():
        for rank, lead in enumerate(leads, start=len(_KEYS[concept])):
            if key.startswith(lead) and not _NOT_LEADS.search(key):
                return concept, rank
    return None


# -- metrics ------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Metric:
    name: str
    pattern: re.Pattern[str]
    needs: tuple[tuple[str, int], ...]  # (concept, year offset: 0 the year, -1 the year before)
    formula: Callable[[Mapping[tuple[str, int], float]], float]
    unit: str  # "%", "x" (a ratio), "days", "" (an amount)
    text: str  # the formula in words
    optional: tuple[tuple[str, int], ...] = ()  # operands the formula uses when a statement gives them
    # a question of judgement ("is it capital-intensive?") is answered with the measures analysts read it by: this
    # metric first, then these (by name), each where the statements give its operands; no verdict is written
    companions: tuple[str, ...] = ()
    # the line items whose movement moves it (a margin: its costs), which a sentence giving its reasons may speak of
    # instead of the metric ("cost of products sold increased as a percent to sales, driven by ...")
    moved_by: tuple[str, ...] = ()


def _avg(v: Mapping[tuple[str, int], float], concept: str) -> float:
    return (v[(concept, 0)] + v[(concept, -1)]) / 2


def _m(name: str, pattern: str, needs: Sequence[tuple[str, int]], formula: Callable[..., float], unit: str,
       text: str, optional: Sequence[tuple[str, int]] = (), companions: Sequence[str] = (),
       moved_by: Sequence[str] = ()) -> Metric:
    return Metric(name, re.compile(pattern, re.IGNORECASE), tuple(needs), formula, unit, text, tuple(optional),
                  tuple(companions), tuple(moved_by))


# the first that matches is the metric (the order matters: "ebitda margin" before "ebitda")
METRICS: tuple[Metric, ...] = (
    # judgements, read by their usual measures: capital intensity as total assets / revenue (the capital intensity
    # ratio), capital expenditure / revenue and net PP&E / total assets; growth as revenue's and net income's
    _m("capital intensity", r"\bcapital[-\s]+intensi(?:ve|ty)\b", [("total_assets", 0), ("revenue", 0)],
       lambda v: v[("total_assets", 0)] / v[("revenue", 0)], "x", "total assets / revenue",
       companions=("capex to revenue", "fixed assets to total assets")),
    _m("revenue growth", r"\bhigh[-\s]+growth\b|\bgrowth\s+(?:company|firm|business|stock)\b",
       [("revenue", 0), ("revenue", -1)],
       lambda v: (v[("revenue", 0)] - v[("revenue", -1)]) / abs(v[("revenue", -1)]) * 100, "%",
       "(revenue this year - last year) / last year", companions=("net income growth",)),
    _m("ebitda margin", r"\bebitda\b.{0,30}\bmargin\b", [("operating_income", 0), ("da", 0), ("revenue", 0)],
       lambda v: (v[("operating_income", 0)] + v[("da", 0)]) / v[("revenue", 0)] * 100, "%",
       "(operating income + depreciation and amortization) / revenue"),
    _m("ebitda", r"\bebitda\b", [("operating_income", 0), ("da", 0)],
       lambda v: v[("operating_income", 0)] + v[("da", 0)], "", "operating income + depreciation and amortization"),
    _m("d&a margin", r"\b(?:d&a|depreciation\s+and\s+amortization)\b.{0,60}\bmargin\b", [("da", 0), ("revenue", 0)],
       lambda v: v[("da", 0)] / v[("revenue", 0)] * 100, "%", "depreciation and amortization / revenue"),
    _m("gross margin", r"\bgross\s+(?:profit\s+)?margins?\b", [("gross_profit", 0), ("revenue", 0)],
       lambda v: v[("gross_profit", 0)] / v[("revenue", 0)] * 100, "%", "gross profit / revenue", moved_by=("cogs",)),
    _m("operating margin", r"\b(?:operating|ebit)\s+(?:income\s+|profit\s+)?margins?\b",
       [("operating_income", 0), ("revenue", 0)],
       lambda v: v[("operating_income", 0)] / v[("revenue", 0)] * 100, "%", "operating income / revenue",
       moved_by=("cogs", "sga")),
    _m("net profit margin", r"\bnet\s+(?:profit\s+|income\s+)?margins?\b|\bprofit\s+margins?\b",
       [("net_income", 0), ("revenue", 0)],
       lambda v: v[("net_income", 0)] / v[("revenue", 0)] * 100, "%", "net income / revenue"),
    _m("capex to revenue", r"\b(?:capex|capital\s+expenditures?|capital\s+spending)\b.{0,40}"
       r"(?:%|percent(?:age)?|ratio|share)\s+(?:of|to)\s+(?:total\s+|net\s+)?(?:revenues?|sales)",
       [("capex", 0), ("revenue", 0)], lambda v: v[("capex", 0)] / v[("revenue", 0)] * 100, "%",
       "capital expenditure / revenue"),
    _m("cogs to revenue", r"\b(?:cogs|cost\s+of\s+(?:goods\s+sold|sales|revenues?))\b.{0,40}"
       r"(?:%|percent(?:age)?|ratio|share)\s+(?:of|to)\s+(?:total\s+|net\s+)?(?:revenues?|sales)",
       [("cogs", 0), ("revenue", 0)], lambda v: v[("cogs", 0)] / v[("revenue", 0)] * 100, "%",
       "cost of goods sold / revenue"),
    _m("fixed assets to total assets", r"\b(?:fixed\s+assets|pp&e|property,?\s+plant\s+and\s+equipment)\b.{0,40}"
       r"(?:%|percent(?:age)?|ratio|share)\s+(?:of|to)\s+total\s+assets", [("ppe", 0), ("total_assets", 0)],
       lambda v: v[("ppe", 0)] / v[("total_assets", 0)] * 100, "%", "net PP&E / total assets"),
    _m("net income growth", r"\bnet\s+income\s+growth\b", [("net_income", 0), ("net_income", -1)],
       lambda v: (v[("net_income", 0)] - v[("net_income", -1)]) / abs(v[("net_income", -1)]) * 100, "%",
       "(net income this year - last year) / last year"),
    _m("fixed asset turnover", r"\bfixed\s+asset\s+turnover\b", [("revenue", 0), ("ppe", 0), ("ppe", -1)],
       lambda v: v[("revenue", 0)] / _avg(v, "ppe"), "x", "revenue / average net PP&E"),
    _m("inventory turnover", r"\binventory\s+turnover\b|\btimes\b.{0,40}\bsold\s+its\s+inventory\b",
       [("cogs", 0), ("inventory", 0), ("inventory", -1)],
       lambda v: v[("cogs", 0)] / _avg(v, "inventory"), "x", "cost of goods sold / average inventory"),
    _m("total asset turnover", r"\b(?:total\s+)?asset\s+turnover\b", [("revenue", 0), ("total_assets", 0),
                                                                       ("total_assets", -1)],
       lambda v: v[("revenue", 0)] / _avg(v, "total_assets"), "x", "revenue / average total assets"),
    _m("days payable outstanding", r"\bdays\s+payables?\s+outstanding\b|\bdpo\b",
       [("payables", 0), ("payables", -1), ("cogs", 0), ("inventory", 0), ("inventory", -1)],
       lambda v: 365 * _avg(v, "payables") / (v[("cogs", 0)] + v[("inventory", 0)] - v[("inventory", -1)]),
       "days", "365 x average accounts payable / (cost of goods sold + change in inventory)"),
    _m("days sales outstanding", r"\bdays\s+sales\s+outstanding\b|\bdso\b",
       [("receivables", 0), ("receivables", -1), ("revenue", 0)],
       lambda v: 365 * _avg(v, "receivables") / v[("revenue", 0)], "days",
       "365 x average accounts receivable / revenue"),
    _m("days inventory outstanding", r"\bdays\s+(?:of\s+)?inventory\s+outstanding\b|\bdio\b",
       [("inventory", 0), ("inventory", -1), ("cogs", 0)],
       lambda v: 365 * _avg(v, "inventory") / v[("cogs", 0)], "days", "365 x average inventory / cost of goods sold"),
    _m("quick ratio", r"\bquick\s+ratio\b|\bacid[-\s]test\b",
       [("cash", 0), ("receivables", 0), ("current_liabilities", 0)],
       lambda v: (v[("cash", 0)] + v.get(("short_investments", 0), 0.0) + v[("receivables", 0)])
       / v[("current_liabilities", 0)], "x",
       "(cash and equivalents + short-term investments + receivables) / current liabilities",
       optional=[("short_investments", 0)]),
    # debt on the balance sheet: its parts as printed, summed (not net debt, not a ratio of debt to something)
    _m("total debt", r"(?<!net\s)(?<!long-term\s)(?<!long\sterm\s)(?<!short-term\s)\b(?:total\s+)?debt\b"
       r"(?!\s*(?:-|/|to)\s*(?:equity|ebitda|capital|assets|total))(?!\s+(?:ratio|issuance|covenant|securities))",
       [("long_term_debt", 0)],
       lambda v: v[("long_term_debt", 0)] + v.get(("current_ltd", 0), 0.0) + v.get(("short_debt", 0), 0.0), "",
       "long-term debt + its current portion + short-term debt", optional=[("current_ltd", 0), ("short_debt", 0)]),
    _m("current ratio", r"\bcurrent\s+ratio\b", [("current_assets", 0), ("current_liabilities", 0)],
       lambda v: v[("current_assets", 0)] / v[("current_liabilities", 0)], "x",
       "current assets / current liabilities"),
    _m("effective tax rate", r"\beffective\s+tax\s+rate\b", [("income_tax", 0), ("pretax_income", 0)],
       lambda v: v[("income_tax", 0)] / v[("pretax_income", 0)] * 100, "%", "income tax expense / income before taxes"),
    _m("cash conversion", r"\bcash\s+conversion\b", [("cfo", 0), ("net_income", 0)],
       lambda v: v[("cfo", 0)] / v[("net_income", 0)], "x", "cash from operations / net income"),
    _m("return on assets", r"\breturn\s+on\s+(?:total\s+)?assets\b|\broa\b",
       [("net_income", 0), ("total_assets", 0), ("total_assets", -1)],
       lambda v: v[("net_income", 0)] / _avg(v, "total_assets") * 100, "%", "net income / average total assets"),
    _m("return on equity", r"\breturn\s+on\s+(?:shareholders'?\s+|stockholders'?\s+)?equity\b|\broe\b",
       [("net_income", 0), ("equity", 0), ("equity", -1)],
       lambda v: v[("net_income", 0)] / _avg(v, "equity") * 100, "%", "net income / average shareholders' equity"),
    _m("interest coverage", r"\binterest\s+coverage\b", [("operating_income", 0), ("interest_expense", 0)],
       lambda v: v[("operating_income", 0)] / v[("interest_expense", 0)], "x", "operating income / interest expense"),
)
_GROWTH = re.compile(r"\b(?:growth|change|increase|decrease|decline)\b.{0,30}\b(?:in|of)\b|\b(?:year[-\s]over[-\s]year|"
                     r"yoy)\b|\bgrowth\s+rate\b", re.IGNORECASE)
_PERCENT_ASKED = re.compile(r"%|percent", re.IGNORECASE)
_COMPARE = re.compile(r"\b(?:compared?|versus|vs\.?|increase[sd]?|decrease[sd]?|improve[sd]?|decline[sd]?|"
                      r"change[sd]?|rise|rose|fell|higher|lower|between)\b", re.IGNORECASE)
_SHARE_OF = re.compile(r"\bas\s+an?\s+(?:%|percent(?:age)?|share|proportion|fraction)\s+of\s+"
                       r"(?P<whole>[a-z&' ,-]+?)(?=[?.,;]|\s+(?:in|for|from|during|between|over|at|by)\b|$)",
                       re.IGNORECASE)
_AVERAGE = re.compile(r"\b(?:average|mean)\b", re.IGNORECASE)
_YEAR = re.compile(r"(?<![\d.,$])((?:19|20)\d\d)(?![\d,]|\.\d)")
_RANGE = re.compile(r"\b((?:19|20)\d\d)\s*(?:-|\u2013|to|through)\s*((?:19|20)\d\d)\b")
_CAUSE = re.compile(r"\b(?:why|what\s+(?:drove|drives|caused|led)|reasons?|drivers?|explain)\b", re.IGNORECASE)


# -- facts ----------------------------------------------------------------------------------------------------------

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

    @classmethod
    def read(cls, chunk: Candidate) -> list[Table]:
        """The table of a chunk (none for fewer than two columns), its figures realigned when its currency signs
        misplace them (`_compacted`)."""
        header, body = table(chunk.content)
        if not header or len(header) < 2:
            return []
        return [cls.of(chunk, *_compacted(*_promoted(header, body)))]

    @classmethod
    def of(cls, chunk: Candidate, header: Sequence[str] | None = None,
           body: Sequence[Sequence[str]] | None = None) -> Table:
        if header is None or body is None:
            header, body = table(chunk.content)
        title = " ".join([*chunk.heading_path, header[0], *(r[0] for r in body[:1] if r)])
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
        return cls(chunk, tuple(header), tuple(body), statement, unit, items, fiscal, bool(quarter), title)


def unit_of(text: str) -> str:
    """The unit a caption states ("(In millions, except per share data)": "million"); "" when none."""
    m = _UNIT.search(text)
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
    best: tuple[tuple[int, int, int, int], Fact] | None = None
    for order, t in enumerate(tables):
        col = period_column(t, year, quarter)
        if col is None:
            continue
        rows = [(named[1], r) for r in t.rows if r and (named := concept_of(r[0])) and named[0] == concept
                and col < len(r) and parse_number(r[col]) is not None]
        if not rows:
            continue
        rank, row = min(rows, key=lambda x: x[0])
        score = (int(t.statement == home) + int(hint is not None and t.statement == hint), t.items, -rank, -order)
        if best is None or score > best[0]:
            value = parse_number(row[col])
            assert value is not None
            if concept in OUTFLOWS:  # an expense or outflow printed in brackets is still that amount
                value = abs(value)
            pages = t.chunk.metadata.get("pages") or [None]
            best = (score, Fact(concept, row[0], t.header[col], row[col].replace("$", "").strip(), value, t.unit,
                                pages[0], t.chunk))
    return best[1] if best else None


# -- answering ------------------------------------------------------------------------------------------------------

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

    @property
    def reason(self) -> str:
        return f"no statement of the document gives {', '.join(self.missing)}"


def asks_percent(question: str) -> bool:
    """Whether a question (its instructions too) asks for a percentage."""
    return bool(_PERCENT_ASKED.search(question))


def named_concept(text: str) -> str | None:
    """The line item a text names (the longest name wins where names overlap: "net income" over "income",
    "total current assets" over "cash"; then the first named)."""
    named = _named(text)
    return named[1] if named else None


# a name that is the head of another item's name there ("cash flow", "cash used in investing") names that one
_NOT_BEFORE = {"cash": r"(?!\s+(?:flows?|conversion|dividends?|proceeds|paid|used|provided|generated|from|taxes)\b)"}


def _named(text: str) -> tuple[int, str] | None:
    lower = text.lower()
    spans = [(-len(term), m.start(), concept) for concept, terms in TERMS.items() for term in terms
             if (m := re.search(rf"(?<![\w&]){re.escape(term)}(?![\w&]){_NOT_BEFORE.get(term, '')}", lower))]
    return (min(spans)[1], min(spans)[2]) if spans else None


# a line item named with a part of the business before it ("US sales", "international revenue", "Cloud revenue",
# "segment operating income", "adjusted net income") is that part's, or a measure the statements do not print:
# not the statement's total line
_PART = re.compile(r"\b(?:u\.s\.|us|domestic|international|foreign|overseas|regional|segment|segments'?|"
                   r"organic|adjusted|non-gaap|operational|comparable|same[\s-]store)\s*$", re.IGNORECASE)
_NAMED_PART = re.compile(r"(?<![.?!]\s)(?<!^)\b(?!FY|Q[1-4]|Total\b|Net\b|Gross\b|GAAP\b)[A-Z][\w&-]*\s*$")


def qualified(question: str) -> bool:
    """The line item the question names has a part of the business or an adjusted measure before it."""
    named = _named(question)
    if named is None:
        return False
    before = question[: named[0]]
    return bool(_PART.search(before) or _NAMED_PART.search(before))


def asked(question: str, cause: bool = False) -> tuple[Metric | None, str | None]:
    """The metric a question asks for, else the line item it looks up (concept), else (None, None). "A as a
    percent of B" is the ratio of two line items; a question about an item the vocabulary does not name, as a
    percent of one it does ("wages as a percent of net sales"), asks for neither. A question asking for a reason
    asks for neither, unless `cause` (then: the metric or item whose movement it asks the reasons of)."""
    if _CAUSE.search(question):
        if not cause:
            return None, None
        question = _CAUSE.sub(" ", question)
    metric = next((m for m in METRICS if m.pattern.search(question)), None)
    if metric is not None:
        return metric, None
    share = _SHARE_OF.search(question)
    if share:
        part, whole = named_concept(question[: share.start()]), named_concept(share.group("whole"))
        if part and whole and part != whole:
            return _share(part, whole), None
        return None, None
    return (None, None) if qualified(question) else (None, named_concept(question))


def years_asked(question: str) -> list[int]:
    years = sorted({int(y) for y in _YEAR.findall(question)})
    m = _RANGE.search(question)
    if m and _AVERAGE.search(question):
        first, last = int(m.group(1)), int(m.group(2))
        if 0 < last - first <= 10:
            return list(range(first, last + 1))
    return years


def asks_movement(question: str) -> bool:
    """Whether the question asks what drove a change in one year ("What drove operating margin change as of
    2022?", "What drove the reduction in SG&A as a percent of net sales in 2023?"): the movement of the metric
    or item it names, from the year before, is the figure the reasons explain."""
    return bool(_CAUSE.search(question)) and len(years_asked(question)) == 1 and asked(question, cause=True) != (
        None, None)


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
    if movement and len(years) == 1:
        years = [years[0] - 1, years[0]]
    each = movement or len(over) > 1  # each year read against the one before it
    quarters = quarters_asked(original or question)
    held = tuple(sorted(quarters.items()))
    if (metric is None and concept is None) or not years:
        return None
    item = False  # the line item itself compared between two years (no metric): what lacks leaves it to passages
    if metric is None:
        assert concept is not None
        if _GROWTH.search(question) and (percent or asks_percent(question)):
            metric = _growth(concept)
        elif _AVERAGE.search(question) and len(years) > 1:
            return _average_of(concept, years, tables, hint, quarters)
        elif (len(years) == 2 and _COMPARE.search(question)) or (len(years) > 1 and each):  # and its moves
            metric, item = Metric(_name(concept), re.compile("$^"), ((concept, 0),), lambda v: v[(concept, 0)],
                                  "", ""), True
        else:
            fact = find(tables, concept, years[-1], hint, quarters.get(years[-1]))
            if fact is None:
                return Missing(concept, (f"{concept.replace('_', ' ')} for {_when(years[-1], quarters)}",))
            return Computed(_name(concept), fact.value, fact.unit, "", (fact,), (years[-1],), quarters=held)
    averaged = bool(_AVERAGE.search(question)) and len(years) > 1
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
            return Missing(metric.name, tuple(missing), metric=not item)
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
