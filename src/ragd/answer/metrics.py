"""The metrics analysts compute from statements (margins, turnover ratios, days payable, quick and current
ratios, effective tax rate, cash conversion, returns, coverage), each with its formula over line items, from
textbook and CFA-curriculum definitions (average balances for turnover and returns, 365 days a year)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass


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
    _m("inventory turnover", r"\binventory\s+(?:turnover|turns)\b|\btimes\b.{0,40}\bsold\s+its\s+inventory\b|"
       r"\bturn(?:s|ed|ing)?\s+over\s+(?:its\s+|their\s+|the\s+)?inventor(?:y|ies)\b",
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
