"""Periods in any notation read as one (ragd.fiscal), and the questions that name them understood the same way."""

from __future__ import annotations

import uuid

import pytest

from ragd.answer.periods import quarters_asked, years_asked
from ragd.answer.question import read_question
from ragd.fiscal import Period, canonical, periods
from ragd.retrieve.scope import Held, scope_of

Q1_2023 = ("FY23 Q1", "1Q23", "Q1'23", "Q1 fiscal 2023", "fiscal 2023 first quarter",
           "the first fiscal quarter of 2023",
           "first quarter of fiscal year 2023", "Q1 of FY2023", "Q1-2023", "q1 fy23", "FY2023-Q1", "2023 Q1", "1QFY23")


@pytest.mark.parametrize("written", Q1_2023)
def test_every_notation_of_a_quarter_is_one_period(written: str) -> None:
    assert periods(f"What was revenue in {written}?") == (Period(2023, quarter=1),)
    assert quarters_asked(canonical(f"What was revenue in {written}?")) == {2023: 1}


@pytest.mark.parametrize("written", ("FY2022", "FY 2022", "FY '22", "fy22", "FY-22", "fiscal year 2022", "fiscal 2022",
                                     "the 2022 fiscal year", "2022 fiscal period", "2022"))
def test_every_notation_of_a_fiscal_year_is_one_period(written: str) -> None:
    assert periods(f"What was net income in {written}?") == (Period(2022),)
    assert read_question(canonical(f"What was net income in {written}?")).text == "What was net income in 2022?"


@pytest.mark.parametrize("written", ("1H23", "H1 2023", "H1 FY23", "first half of fiscal 2023",
                                     "fiscal 2023 first half"))
def test_halves(written: str) -> None:
    assert periods(f"Sales in {written}") == (Period(2023, half=1),)


@pytest.mark.parametrize("written,years", [
    ("FY16-FY18", [2016, 2017, 2018]), ("FY16-18", [2016, 2017, 2018]), ("fiscal years 2016-2018", [2016, 2017, 2018]),
    ("fiscal 2016, 2017 and 2018", [2016, 2017, 2018]), ("FY2016 to FY2018", [2016, 2017, 2018])])
def test_ranges_of_years_averaged(written: str, years: list[int]) -> None:
    text = read_question(canonical(f"What is the average gross margin over {written}?")).text
    assert years_asked(text) == years


@pytest.mark.parametrize("written", ("FYE 2019", "FYE19", "FYE '19", "fiscal year-end 2019", "fiscal year end 2019"))
def test_a_fiscal_year_end_is_the_end_of_that_year(written: str) -> None:
    assert canonical(f"NKE total current assets {written}, $mm") == "NKE total current assets the end of FY2019, $mm"
    assert periods(f"total assets at {written}") == (Period(2019),)


def test_dates_and_words_kept() -> None:
    assert canonical("as of 12/31/2022") == "as of 12/31/2022"  # a date as the documents may write it
    assert periods("as of March 4, 2023") == periods("as of 3/4/2023") == (Period(2023),)
    # what is not a period is left alone: a form, a share, a count, a percentage
    for text in ("Form 10-Q for Q3", "grew 23% in the quarter", "Item 7A", "it has 2 quarters of 23 weeks",
                 "Q1 23% higher"):
        assert canonical(text) == text


def test_a_question_scoped_the_same_in_every_notation() -> None:
    held = (Held(doc_id=uuid.UUID(int=1), issuer="Best Buy Co., Inc.", tickers=("BBY",), form="10-Q",
                 fiscal_year=2024, fiscal_quarter=2),
            Held(doc_id=uuid.UUID(int=2), issuer="Best Buy Co., Inc.", tickers=("BBY",), form="10-K",
                 fiscal_year=2023))
    seen = {(s.years, s.quarter, s.issuers) for s in (
        scope_of(q, held) for q in ("Best Buy cash in Q2 of FY2024?", "best buy cash in 2Q24?",
                                    "Best Buy cash, FY24 Q2?", "Best Buy cash in the second fiscal quarter of 2024?"))}
    assert seen == {((2024,), 2, ("Best Buy Co., Inc.",))}


def test_a_kind_of_document_named_chooses_among_the_issuers_documents() -> None:
    from ragd.retrieve.scope import statement_documents

    held = (Held(doc_id=uuid.UUID(int=1), issuer="Quorra Inc.", form="10-K", fiscal_year=2023),
            Held(doc_id=uuid.UUID(int=2), issuer="Quorra Inc.", form="10-Q", fiscal_year=2023, fiscal_quarter=4),
            Held(doc_id=uuid.UUID(int=3), issuer="Quorra Inc.", form="earnings release", fiscal_year=2023,
                 fiscal_quarter=4))
    annual = scope_of("What was Quorra's FY2023 revenue?", held)
    assert annual.form is None and statement_documents(annual)[0] == uuid.UUID(int=1) and len(annual.doc_ids) == 3
    release = scope_of("According to the earnings release, what was Quorra's FY2023 revenue?", held)
    assert release.form == "earnings release" and release.doc_ids == (uuid.UUID(int=3),)
    assert statement_documents(release)[0] == uuid.UUID(int=3)
    quarterly = scope_of("What did Quorra's 10-Q say about FY2023 revenue?", held)
    assert quarterly.doc_ids == (uuid.UUID(int=2),)
    assert scope_of("What did Quorra's 20-F say?", held).doc_ids == (uuid.UUID(int=1),)
