"""Formulas a question defines (answer.formula): parsed in its words, each operand read from the statements and
cited, computed; an operand not found is an abstention that says what was found."""

from __future__ import annotations

import pytest

from ragd.answer.formula import compute, defined, parse
from ragd.answer.periods import Table
from ragd.answer.statements import Computed, Missing

from .test_filings import BALANCE, CASH, INCOME

TABLES = [t for c in (INCOME, BALANCE, CASH) for t in Table.read(c)]


@pytest.mark.parametrize("question,expected", [
    # the same figure defined in several ways of writing it
    ("What is the FY2021 fixed asset turnover ratio? Fixed asset turnover ratio is defined as: FY2021 revenue / "
     "(average PP&E between FY2020 and FY2021).", 10000 / 1900),
    ("Compute the fixed asset turnover for fiscal 2021, calculated as 2021 net sales divided by the average of "
     "property and equipment, net, at the end of 2020 and 2021.", 10000 / 1900),
    ("what's the fa turnover in fy21? fa turnover = net sales / average property and equipment", 10000 / 1900),
    # a line item the vocabulary does not name, read by its row's words
    ("What is the FY2021 inventory to assets ratio, defined as merchandise inventories / total current assets?",
     1500 / 4100),
    ("What is the FY2021 DPO-like figure? It is calculated as 365 * (cost of sales) / (net sales - gross profit)",
     365.0),
    ("What was the 2021 working capital ratio, defined as total current assets / total current liabilities?",
     4100 / 2050),
    ("What is the FY2021 spread? Spread = (gross profit - net income) / net sales * 100", 30.0),
    ("What is FY2021 cash coverage of capex, defined as net income divided by capital expenditure?", 1000 / 450),
    # terse: the periods in brackets after the operand, the rounding after a comma
    ("Quorra FY2021 fixed asset turnover = revenue / avg PP&E (FY2020-FY2021), 2dp", 10000 / 1900),
    ("Quorra inventory turnover FY2021 = COGS / avg inventory (FY2020-FY2021), 2dp", 6000 / 1400),
    ("What is the 2021 change-based figure, defined as change in merchandise inventories between FY2020 and FY2021 "
     "plus prior year net income?", 200 + 800),
])
def test_a_defined_formula_is_computed_with_every_operand_cited(question: str, expected: float) -> None:
    definition = defined(question)
    assert definition is not None, question
    got = compute(definition, TABLES, 2021)
    assert isinstance(got, Computed), getattr(got, "reason", got)
    assert got.result == pytest.approx(expected, rel=1e-4)
    assert got.facts and all(f.page for f in got.facts)
    assert "[page " in got.sentence()


def test_units_follow_the_definition() -> None:
    days = compute(defined("DSO-ish is defined as 365 * net income / net sales."), TABLES, 2021)  # type: ignore[arg-type]
    assert isinstance(days, Computed) and days.unit == "days" and days.result == pytest.approx(36.5)
    margin = compute(defined("What is the FY2021 gross spread margin? It is defined as gross profit / net sales."),  # type: ignore[arg-type]
                     TABLES, 2021)
    assert isinstance(margin, Computed) and margin.unit == "%" and margin.result == pytest.approx(40.0)
    ratio = compute(defined("The ratio is defined as gross profit / net sales."), TABLES, 2021)  # type: ignore[arg-type]
    assert isinstance(ratio, Computed) and ratio.unit == "x" and ratio.result == pytest.approx(0.4)


def test_an_operand_not_found_is_said_with_what_was_found() -> None:
    got = compute(defined("The FY2021 cycle is defined as: accounts receivable / net sales * 365"), TABLES, 2021)  # type: ignore[arg-type]
    assert isinstance(got, Missing) and got.metric
    assert got.reason.startswith("no statement of the document gives accounts receivable for 2021; found Net sales")
    assert "10,000" in got.reason and "[page 40]" in got.reason
    broke = compute(defined("X is defined as net income / (gross profit - gross profit)"), TABLES, 2021)  # type: ignore[arg-type]
    assert isinstance(broke, Missing) and "not zero" in broke.reason


@pytest.mark.parametrize("text", ["net income", "revenue growth", "the average of the years", "(a + b", "a / / b",
                                  "cost of sales -"])
def test_what_is_not_a_formula_is_not_read_as_one(text: str) -> None:
    assert defined(f"What is it? It is defined as {text}.") is None or parse(text) is None


def test_no_definition_no_formula() -> None:
    assert defined("What is the FY2021 inventory turnover ratio for Quorra?") is None
    assert defined("Is 3M a capital-intensive business based on FY2022 data?") is None


def test_the_consolidated_statement_is_read_before_a_part_of_the_group() -> None:
    from ragd.answer.statements import answer

    from .test_filings import _chunk

    parent = _chunk("Condensed Consolidating Statements of Income - Parent Company Only (In millions) | 2021 | 2020\n"
                    "Net sales | 500 | 450\nCost of sales | 300 | 270\nGross profit | 200 | 180\nOperating income | "
                    "90 | 80\nNet income | 1,000 | 800", page=90)
    segment = _chunk("Segment Statements of Income (In millions) | 2021 | 2020\nNet sales | 700 | 650\n"
                     "Cost of sales | 400 | 380\nGross profit | 300 | 270\nOperating income | 120 | 100\n"
                     "Net income | 90 | 85", page=91)
    tables = [t for c in (parent, segment, INCOME, BALANCE) for t in Table.read(c)]
    assert [t.partial for t in tables[:3]] == [True, True, False]
    revenue = answer("What were net sales in 2021?", tables)
    assert isinstance(revenue, Computed) and revenue.result == 10000 and revenue.facts[0].page == 40


@pytest.mark.parametrize("question", [
    "What is the 2021 cash conversion cycle?",  # holds a known metric's name ("cash conversion"), is another
    "What is the 2021 gross margin growth?",
    "What is the 2021 receivables turnover?",  # a measure of a line item the vocabulary does not define
    "What is 2021 revenue per employee?",
    "What is the 2021 net income per share?",
    "Did Quorra pay dividends in 2021?",  # whether something happened: the passages say
    "Quorra segment with lowest net revenue, 1Q21?",  # a choice: its answer is a name, never the total
    "Quorra 2022 sales growth: US vs international",  # a part of the business after the item
    "What was revenue in the US in 2021?",
    "Which categories of revenue grew in 2021?",  # a list: the passages say
    "Describe the capital expenditure plans for 2022.",
    "What is Quorra's Cloud revenue in 2021?",  # a part of the business named before the item
    "What were total current assets and total current liabilities in 2021?",  # two items: one is no answer
])
def test_an_answer_of_another_kind_than_asked_is_never_a_line_item(question: str) -> None:
    from ragd.answer.statements import asked

    assert asked(question) == (None, None)


@pytest.mark.parametrize("question,name", [
    ("Quorra net earnings % of sales: Q2 2023 vs Q2 2022 - up?", "net income as a percent of revenue"),
    ("did quorra take on more debt in 2023 than 2022?", "total debt"),
    ("Did Best Buy's cash and cash equivalents fall between 2023 and 2024?", "cash"),  # "Best" is no superlative
    ("What were Best Buy's total inventories in 2019?", "inventory"),
    ("What is the 2021 cash conversion ratio?", "cash conversion"),
    ("Quorra capex % of revenue, 3-yr avg 2017-2019", "capex to revenue"),
    ("Capex to revenue for Quorra Networks, 2020?", "capital expenditure as a percent of revenue"),
    ("What percent of quorra's revenue went to capital expenditures in 2021?",
     "capital expenditure as a percent of revenue"),
    ("what share of its revenue did quorra spend on capital expenditures in fy 2021?",
     "capital expenditure as a percent of revenue"),
    ("What proportion of net sales was spent on capital expenditures by Quorra in 2021?",
     "capital expenditure as a percent of revenue"),
    ("Vantor Retail COGS, 2020?", "cogs"),  # "Retail": a word of the issuer's name, not a part of the business
    ("how many times did quorra turn over its inventory in fiscal year 2021?", "inventory turnover"),
    ("QORA COGS % revenue, 3-yr avg FY16-FY18, 1dp", "cost of goods sold as a percent of revenue"),
])
def test_terse_and_casual_wordings_name_the_metric(question: str, name: str) -> None:
    from ragd.answer.statements import asked

    metric, concept = asked(question)
    assert (metric.name if metric else concept) == name


def test_growth_in_one_year_is_a_rate_and_avg_averages() -> None:
    from ragd.answer.statements import answer

    growth = answer("What was revenue growth in 2021?", TABLES)
    assert isinstance(growth, Computed) and growth.unit == "%" and growth.result == pytest.approx(1000 / 9000 * 100)
    average = answer("Quorra net profit margin, 3-yr avg 2019-2021 (%)", TABLES)
    assert isinstance(average, Computed) and average.years == (2019, 2020, 2021)


def test_a_metric_that_averages_its_balances_is_not_averaged_over_its_two_years() -> None:
    from ragd.answer.statements import answer

    got = answer("what's the inventory turnover for fiscal year 2021? use cost of sales over average inventory of "
                 "2020 and 2021", TABLES)
    assert isinstance(got, Computed) and got.years == (2021,) and got.result == pytest.approx(6000 / 1400)
