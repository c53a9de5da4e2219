"""Table arithmetic with cell citations (issue 30, item 2): the operands found in a table of the evidence, the
formula and the cells named; a refusal with the reason, never a guess, when they are not found without doubt.

The generated tables below have exact truth: their figures, header layouts, formats and questions vary with a
seeded generator, so the arithmetic is checked on layouts nobody wrote by hand (TAT-QA, which it was developed
on, is measured by `ragd eval --answers`)."""

from __future__ import annotations

import random
import uuid

import pytest

import ragd
from ragd.answer.arithmetic import Calculation, Refusal, compute, format_number, operation, parse_number
from ragd.types import Candidate, table_text


def _table(header: list[str], rows: list[list[str]], *more: list[str], i: int = 1) -> Candidate:
    return Candidate(chunk_id=uuid.UUID(int=i), doc_id=uuid.UUID(int=100 + i), doc_version_id=uuid.UUID(int=i),
                     chunk_index=0, content=table_text(header, [*([m for m in more]), *rows]), chunk_type="table")


SEGMENTS = _table(["", "Year ended December 31,", "", ""], [
    ["Revenue", "$ 1,200.5", "$ 1,000.0", "$ 950.0"],
    ["Cost of sales", "(700.0)", "(650.0)", "(600.0)"],
    ["Operating expenses", "", "", ""],
    ["Marketing", "120", "100", "80"],
    ["Research and development", "300", "250", "—"],
    ["Total operating expenses", "420", "350", "330"],
], ["", "2019", "2018", "2017"])


@pytest.mark.parametrize(("question", "op", "result", "cells"), [
    ("What was the change in revenue from 2018 to 2019?", "change", 200.5,
     [("Revenue", "Year ended December 31, 2019", "$ 1,200.5"), ("Revenue", "Year ended December 31, 2018",
                                                                  "$ 1,000.0")]),
    ("What was the percentage change in marketing between 2017 and 2018?", "percent_change", 25.0, None),
    ("What is the average total operating expenses for 2017 to 2019?", "average", 366.666667, None),
    ("How much did research and development increase in 2019?", "change", 50.0, None),  # against the year before
    ("What is the ratio of marketing to total operating expenses in 2018?", "ratio", 100 / 350, None),
    ("What was marketing as a percentage of total operating expenses in 2019?", "share", 120 / 420 * 100, None),
    ("What was the change in cost of sales from 2017 to 2018?", "change", -50.0, None),  # (650.0) is -650
])
def test_the_operands_are_found_and_the_cells_named(question: str, op: str, result: float,
                                                    cells: list[tuple[str, str, str]] | None) -> None:
    calc = compute(question, [SEGMENTS])
    assert isinstance(calc, Calculation), calc
    assert (calc.operation, calc.result) == (op, round(result, 6))
    if cells:
        assert [(o.row, o.column, o.text) for o in calc.operands] == cells
    sentence = calc.sentence()
    assert sentence.endswith(f"[chunk:{SEGMENTS.chunk_id}]") and format_number(result) in sentence


@pytest.mark.parametrize(("question", "reason"), [
    ("What was the change in revenue from 2015 to 2016?", "no column of the table is 2015"),
    ("What was the change in research and development from 2017 to 2018?", "holds no figure"),  # "—"
    ("What was the change in goodwill from 2018 to 2019?", "no row of the table is named"),
    ("What was the change in revenue?", "does not name the periods"),
])
def test_operands_not_found_without_doubt_are_refused_with_the_reason(question: str, reason: str) -> None:
    calc = compute(question, [SEGMENTS])
    assert isinstance(calc, Refusal) and reason in calc.reason, calc


def test_two_rows_naming_the_question_equally_are_ambiguous() -> None:
    two = _table(["", "2019", "2018"], [["Europe", "", ""], ["Revenue", "10", "8"], ["Asia", "", ""],
                                        ["Revenue", "30", "20"]])
    calc = compute("What was the change in revenue from 2018 to 2019?", [two])
    assert isinstance(calc, Refusal) and "match the question equally" in calc.reason
    assert len(calc.rows) == 2  # the rows it found, to quote
    # the group row's words tell them apart
    named = compute("What was the change in Asia revenue from 2018 to 2019?", [two])
    assert isinstance(named, Calculation) and named.result == 10.0


def test_questions_without_arithmetic_or_asking_why_are_not_computed() -> None:
    assert operation("Who is the chief executive?") is None
    assert compute("Who is the chief executive?", [SEGMENTS]) is None
    assert compute("What caused the change in revenue from 2018 to 2019?", [SEGMENTS]) is None
    assert operation("What was the total revenue in 2019?") is None  # a row label, not a sum
    assert isinstance(compute("What was the change in revenue from 2018 to 2019?", []), Refusal)


@pytest.mark.parametrize("question", [
    "In which year was the weighted average number of shares largest?",  # a period chosen
    "Which segment had the largest percentage change in revenue?",  # a name chosen
    "Who approved the increase in the dividend?",
    "How many types of non-cash changes are there?",  # a count of things
    "What does the average rate used to calculate capitalized interest represent?",  # a meaning
    "What are the respective changes in revenue in 2018 and 2019?",  # figures listed as printed
    "What accounted for the decrease in the share of net earnings?",  # a cause
    "Which locations are responsible for driving the increase in sales in 2019?",
    "What is the increase in total revenue attributed to?",
    "What was the weighted average number of shares in 2018?",  # a printed figure's name
])
def test_a_question_asking_for_another_kind_of_answer_is_not_computed(question: str) -> None:
    assert compute(question, [SEGMENTS]) is None


@pytest.mark.parametrize(("question", "op"), [
    ("What was the change in the weighted average number of shares from 2018 to 2019?", "change"),
    ("What was the average net income attributable to noncontrolling interest for 2017-2019?", "average"),
])
def test_the_arithmetic_of_a_figure_named_by_arithmetic_words_is_the_question_s(question: str, op: str) -> None:
    assert operation(question) == op


def test_a_figure_a_sentence_states_is_quoted_not_refused() -> None:
    # "how much less energy did it use" is answered by the sentence saying so ("eleven percent less"), not by a
    # computation refused for want of a table
    assert operation("How much less energy did the cooling plant in Oslo use, according to the audit?") is None


@pytest.mark.parametrize(("cell", "value"), [("$ 1,571.7", 1571.7), ("(3.1)", -3.1), ("-34.8", -34.8), ("4%", 4.0),
                                             ("$(11.9)", -11.9), ("\u2212 2", -2.0), ("—", None), ("n/a", None),
                                             ("2019 (proposed)", None), ("", None)])
def test_cells_are_read_as_accountants_write_them(cell: str, value: float | None) -> None:
    assert parse_number(cell) == value


def _generated(rng: random.Random, n: int) -> tuple[Candidate, list[tuple[str, float]]]:
    """A table with exact truth: 2-4 year columns in either order under one or two header rows, 3-7 labelled rows,
    figures in one of several formats; and questions with the figure each must give."""
    years = sorted(rng.sample(range(2012, 2024), rng.randint(2, 4)), reverse=rng.random() < 0.7)
    labels = rng.sample(["Net sales", "Gross margin", "Interest expense", "Depreciation", "Income tax",
                         "Capital expenditure", "Dividends paid", "Inventories", "Trade receivables",
                         "Deferred revenue", "Lease liabilities"], rng.randint(3, 7))
    style = rng.choice(["plain", "dollar", "thousands", "brackets"])
    values = {(label, y): round(rng.uniform(-900, 9000) if style == "brackets" else rng.uniform(1, 9000), 1)
              for label in labels for y in years}

    def cell(v: float) -> str:
        text = f"{abs(v):,.1f}" if style in ("thousands", "brackets") else f"{abs(v):.1f}"
        text = f"$ {text}" if style == "dollar" else text
        return (f"({text})" if style == "brackets" else f"-{text}") if v < 0 else text

    if rng.random() < 0.5:
        header, more = ["", *(str(y) for y in years)], []
    else:
        header, more = ["(in millions)", rng.choice(["Years ended June 30,", "Fiscal year"]),
                        *[""] * (len(years) - 1)], [["", *(str(y) for y in years)]]
    rows = [[label, *(cell(values[label, y]) for y in years)] for label in labels]
    table = _table(header, rows, *more, i=n)
    label, (old, new) = rng.choice(labels), sorted(rng.sample(years, 2))
    a, b = values[label, old], values[label, new]
    asks = [(f"What was the change in {label.lower()} from {old} to {new}?", b - a),
            (f"What is the average {label} for {old} and {new}?", (a + b) / 2)]
    if a:
        asks.append((f"What was the percentage change in {label} between {old} and {new}?", (b - a) / a * 100))
    other = rng.choice([x for x in labels if x != label])
    if values[other, new]:
        asks.append((f"What is the ratio of {label} to {other} in {new}?", b / values[other, new]))
    return table, asks


def test_generated_tables_are_computed_exactly() -> None:
    rng = random.Random(30)
    asked = exact = 0
    for n in range(300):
        table, asks = _generated(rng, n)
        for question, truth in asks:
            calc = compute(question, [table])
            asked += 1
            assert isinstance(calc, Calculation), (question, table.content, calc)
            exact += abs(calc.result - round(truth, 6)) < 1e-6
    assert asked > 1000 and exact == asked


def test_ask_answers_a_computation_with_its_formula_and_cells(client: ragd.Ragd, name: str) -> None:
    col = client.collection(name)
    report = "\n\n".join([
        "# Annual report 2019", "Our results for the year were as follows:",
        "| | 2019 | 2018 |\n| --- | --- | --- |\n| Net revenue | 5,120 | 4,800 |\n| Operating income | 610 | 540 |",
        "Revenue grew on the strength of the new product line."])
    col.ingest(documents=[{"id": "report-2019", "text": report, "source_type": "markdown"}])
    answer = col.ask("What was the percentage change in net revenue from 2018 to 2019?")
    assert not answer.abstained and answer.calculation is not None
    assert answer.calculation["operation"] == "percent_change" and answer.calculation["result"] == pytest.approx(
        (5120 - 4800) / 4800 * 100, abs=1e-6)
    assert [(o["row"], o["column"], o["cell"]) for o in answer.calculation["operands"]] == [
        ("Net revenue", "2019", "5,120"), ("Net revenue", "2018", "4,800")]
    assert "6.67%" in answer.answer and "(5,120 \u2212 4,800) / 4,800" in answer.answer
    table_chunk = answer.calculation["chunk_id"]
    assert [c["chunk_id"] for c in answer.citations] == [table_chunk]
    refused = col.ask("What was the ratio of net revenue to operating income in 2018 and 2019?")
    assert refused.calculation == {"operation": "ratio", "refused": "it needs one period and the question names more"}
    assert refused.answer.startswith("The ratio could not be computed: it needs one period and the question names "
                                     "more. Net revenue; 2019: 5,120; 2018: 4,800 [chunk:")
