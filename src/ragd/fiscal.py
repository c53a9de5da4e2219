"""Periods as questions write them, read into one notation.

Analysts and casual users name the same period many ways: "FY23 Q1", "1Q23", "Q1'23", "Q1 fiscal 2023",
"fiscal 2023 first quarter", "the first fiscal quarter of 2023", "FY '22", "fy22", "fiscal year 2022", "the 2022
fiscal year", "FY16-FY18", "1H23", "first half of fiscal 2023". `canonical` writes each as one notation ("Q1
FY2023", "FY2022", "FY2016-FY2018", "H1 FY2023") that every later reading of a question (its scope, its years and
quarters, its statements' columns) understands, and leaves every other word, and every date, as it is (documents
write dates their own ways; a date's year is read). `periods` gives the periods a question names as values.

Two-digit years are of this century ("FY98" is not read: it is 2098). The patterns are of English period
notations, not of any collection. This module is below retrieval and answering (both read periods through it)."""

from __future__ import annotations

import re
from dataclasses import dataclass

ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "1st": 1, "2nd": 2, "3rd": 3, "4th": 4}
_ORDINAL = r"(first|second|third|fourth|1st|2nd|3rd|4th)"
# a fiscal year as questions write it once canonical: "FY2018" (also "FY 2018", "FY'18", "FY18" before)
FY = re.compile(r"\bFY\s*'?((?:19|20)\d\d)\b", re.IGNORECASE)
FY_SHORT = re.compile(r"\bFY\s*'?(\d\d)\b", re.IGNORECASE)
# a fiscal quarter as questions name it: "Q2", "second quarter", "2nd fiscal quarter"
QUARTER_NAMED = re.compile(rf"\bQ([1-4])\b|\b{_ORDINAL}\s+(?:fiscal\s+)?quarter\b", re.IGNORECASE)

_YY = r"'?((?:19|20)?\d\d)"  # a year of four or two digits, perhaps with an apostrophe
_FISCAL_WORD = r"(?:FY\s*-?\s*|F\s*Y\s*|fiscal\s+(?:year\s+)?)"
_Q = rf"(?:Q([1-4])|{_ORDINAL}\s+(?:fiscal\s+)?quarter)"
# "1Q23", "2Q 2024", "4Q'23", "3QFY23"
_NQ_YEAR = re.compile(rf"\b([1-4])Q\s*(?:FY\s*)?{_YY}\b", re.IGNORECASE)
# "FY23 Q1", "FY2023-Q1", "fiscal 2023 first quarter", "fiscal year 2023, Q1", "2023 first quarter"
_YEAR_Q = re.compile(rf"\b(?:{_FISCAL_WORD}{_YY}|((?:19|20)\d\d))\s*[-,/]?\s*(?:the\s+)?{_Q}", re.IGNORECASE)
# "Q1 fiscal 2023", "Q1 of FY23", "first quarter of fiscal 2023", "first fiscal quarter of 2023", "Q1'23", "Q1 23",
# "Q1-2023", "Q1FY23"
_Q_YEAR = re.compile(rf"\b{_Q}\s*(?:-|/|,)?\s*(?:of\s+|in\s+)?(?:the\s+)?(?:{_FISCAL_WORD})?{_YY}\b(?!\s*%)",
                     re.IGNORECASE)
# "1H23", "H1 2023", "H1 FY23", "first half of fiscal 2023", "fiscal 2023 first half"
_HALF = re.compile(rf"\b(?:([12])H\s*|H([12])\s*(?:of\s+)?|(first|second|1st|2nd)\s+half\s+(?:of\s+)?(?:the\s+)?)"
                   rf"(?:{_FISCAL_WORD})?{_YY}\b"
                   rf"|\b{_FISCAL_WORD}{_YY}\s*[-,]?\s*(?:the\s+)?(first|second|1st|2nd)\s+half\b", re.IGNORECASE)
# "FY16-FY18", "FY16-18", "fiscal years 2016-2018", "FY2016 to FY2018"
_FY_RANGE = re.compile(rf"\b{_FISCAL_WORD.replace('year', 'years?')}{_YY}\s*(-|\u2013|to|through|until)\s*"
                       rf"(?:{_FISCAL_WORD})?{_YY}\b", re.IGNORECASE)
# "FYE 2019", "FYE19", "fiscal year-end 2019": the end of that fiscal year
_FYE = re.compile(rf"\b(?:FYE|fiscal\s+year[-\s]end(?:ed|ing)?)\s*-?\s*{_YY}\b", re.IGNORECASE)
# "FY '22", "fy22", "FY-2022", "fiscal year 2022", "fiscal 2022", "F2022" is not read (a form number looks alike)
_FY_ANY = re.compile(rf"\b{_FISCAL_WORD}{_YY}\b(?!\s*%)", re.IGNORECASE)
# "the 2022 fiscal year", "2021 fiscal period", "2022 fiscal"
_YEAR_FISCAL = re.compile(r"\b(?:the\s+)?((?:19|20)\d\d)\s+fiscal(?:\s+(?:year|period))?\b", re.IGNORECASE)
# a month's name as documents write it, whole or cut short ("May", "Aug.", "September")
MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
# a year as questions and statements write it ("2015," is 2015; "2,015", "$2015" and "2015.5" are none)
YEAR = re.compile(r"(?<![\d.,$])((?:19|20)\d\d)(?!\d|[.,]\d)")
_QUARTER_YEAR = re.compile(r"\bQ([1-4]) FY((?:19|20)\d\d)\b")
_HALF_YEAR = re.compile(r"\bH([12]) FY((?:19|20)\d\d)\b")


def _year(text: str) -> int:
    digits = text.lstrip("'")
    return int(digits) if len(digits) == 4 else 2000 + int(digits)


def _ordinal(word: str | None, digit: str | None) -> int:
    return int(digit) if digit else ORDINALS[(word or "").lower()]


def canonical(text: str) -> str:
    """The text with every period it names written one way: "Q1 FY2023", "H1 FY2023", "FY2022",
    "FY2016-FY2018"; its other words (and its dates, which documents write in their own ways) as they were."""
    out = _FYE.sub(lambda m: f"the end of FY{_year(m.group(1))}", text)
    out = _HALF.sub(_half, out)
    out = _NQ_YEAR.sub(lambda m: f"Q{m.group(1)} FY{_year(m.group(2))}", out)
    out = _YEAR_Q.sub(lambda m: f"Q{_ordinal(m.group(4), m.group(3))} FY{_year(m.group(1) or m.group(2))}", out)
    out = _Q_YEAR.sub(_quarter, out)
    out = _FY_RANGE.sub(_range, out)
    out = _YEAR_FISCAL.sub(lambda m: f"FY{m.group(1)}", out)
    out = _FY_ANY.sub(lambda m: f"FY{_year(m.group(1))}", out)
    return out


def _range(m: re.Match[str]) -> str:
    joint = "-" if m.group(2) in ("-", "\u2013") else f" {m.group(2)} "
    return f"FY{_year(m.group(1))}{joint}FY{_year(m.group(3))}"


def _quarter(m: re.Match[str]) -> str:
    year = m.group(3)
    if len(year.lstrip("'")) == 2 and not re.search(r"['fy]|fiscal", m.group(0), re.IGNORECASE) and \
            not re.match(r"Q[1-4]\s+\d\d$", m.group(0), re.IGNORECASE):
        return m.group(0)  # "Q1-23" is read; "first quarter 23" (a count?) is not
    return f"Q{_ordinal(m.group(2), m.group(1))} FY{_year(year)}"


def _half(m: re.Match[str]) -> str:
    if m.group(5):  # "fiscal 2023 first half"
        return f"H{1 if m.group(6).lower() in ('first', '1st') else 2} FY{_year(m.group(5))}"
    half = m.group(1) or m.group(2) or ("1" if (m.group(3) or "").lower() in ("first", "1st") else "2")
    return f"H{half} FY{_year(m.group(4))}"


@dataclass(frozen=True, order=True)
class Period:
    """A period a question names: a fiscal year, one of its quarters (1-4) or halves (1-2)."""

    year: int
    quarter: int | None = None
    half: int | None = None

    def __str__(self) -> str:
        return (f"Q{self.quarter} FY{self.year}" if self.quarter else f"H{self.half} FY{self.year}" if self.half
                else f"FY{self.year}")




def periods(text: str) -> tuple[Period, ...]:
    """The periods a text names, in order of first mention, once each: its quarters and halves as such, every
    other year as a fiscal year."""
    text = canonical(text)
    found: list[tuple[int, Period]] = []
    spans: list[tuple[int, int]] = []
    for pattern, part in ((_QUARTER_YEAR, "quarter"), (_HALF_YEAR, "half")):
        for m in pattern.finditer(text):
            found.append((m.start(), Period(int(m.group(2)), **{part: int(m.group(1))})))
            spans.append(m.span())
    for m in YEAR.finditer(text):
        if not any(a <= m.start() < b for a, b in spans):
            found.append((m.start(), Period(int(m.group(1)))))
    return tuple(dict.fromkeys(p for _, p in sorted(found, key=lambda f: f[0])))


def quarter_number(m: re.Match[str]) -> int:
    """The quarter a QUARTER_NAMED match names."""
    return int(m.group(1)) if m.group(1) else ORDINALS[m.group(2).lower()]
