"""The vocabulary of financial statements: the line items (concepts) and the names issuers print for them,
the statement each lives in, the names analysts use in questions, and how a printed label is read as a concept."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

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
    "ppe": ("net ppne", "ppne", "net pp&e", "pp&e", "net ppe", "ppe", "property, plant and equipment",
            "property and equipment", "fixed assets", "net fixed assets"),
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


UNIT = re.compile(r"\b(?:in\s+|\$\s*in\s+|dollars\s+in\s+|amounts\s+in\s+)?(thousands|millions|billions)\b",
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
