"""A document's identity read from its first pages: who issued it, what form it is, which period it covers.

Business documents of many issuers and years look alike page by page; what tells them apart is on the cover.
The SEC's cover pages have fixed fields ("FORM 10-K", "For the fiscal year ended December 31, 2018", the name
"(Exact name of registrant as specified in its charter)", the trading symbols of section 12(b)); earnings releases
name the issuer with its exchange and symbol ("Johnson & Johnson (NYSE: JNJ) today announced") and the quarter
("fourth-quarter and full year 2022"). Nothing here is of any one issuer: the patterns are the forms' own wording.

The identity is stored in the document's metadata (`identity`), names the document when it has no better title,
and leads every chunk's retrieval context, so that both legs and the reranker read whose and which period a
passage is (a balance sheet says neither)."""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..issuers import LEGAL_FORMS
from ..types import Block

FIRST_PAGES = 3  # the cover and what follows it
FIRST_CHARS = 12000  # of a document without pages
SYMBOL_PAGES = 40  # where a 10-K says the symbol its stock trades under (Item 5), when its cover does not

MONTHS = {m: i for i, m in enumerate(("january", "february", "march", "april", "may", "june", "july", "august",
                                      "september", "october", "november", "december"), start=1)}
_MONTH = r"(?:January|February|March|April|May|June|July|August|September|October|November|December)"
_DATE = rf"({_MONTH})\s+(\d{{1,2}})\s*,\s*((?:19|20)\d\d)"
_FORMS = {"10-K": "10-K", "10-K405": "10-K", "10-KT": "10-K", "10-Q": "10-Q", "10-QT": "10-Q", "8-K": "8-K",
          "20-F": "20-F", "40-F": "40-F", "6-K": "6-K", "S-1": "S-1", "S-4": "S-4", "11-K": "11-K"}
_FORM = re.compile(r"\bFORM\s+(10-K405|10-KT|10-K|10-QT|10-Q|8-K|20-F|40-F|6-K|S-1|S-4|11-K)\b")
_PROXY = re.compile(r"\b(?:DEFINITIVE\s+)?PROXY\s+STATEMENT\b|\bSCHEDULE\s+14A\b", re.IGNORECASE)
_RELEASE = re.compile(r"\b(?:announce[sd]?|reports?|reported|posts?|delivers?)\b[^.\n]{0,80}\b(?:results|earnings)\b",
                      re.IGNORECASE)
_ANNUAL = re.compile(r"\bannual\s+report\b", re.IGNORECASE)
# a cover laid out in two columns puts other words between "ended" and its date ("ended Commission file\nJune 30")
_YEAR_END = re.compile(rf"for\s+the\s+(?:fiscal\s+)?year\s+ended\D{{0,40}}?{_DATE}", re.IGNORECASE)
_QUARTER_END = re.compile(rf"for\s+the\s+quarterly\s+period\s+ended\D{{0,40}}?{_DATE}", re.IGNORECASE)
_REPORT_DATE = re.compile(rf"date\s+of\s+report[^:\n]*:?\s*(?:\n\s*)?{_DATE}", re.IGNORECASE)
_ENDED = re.compile(rf"\b(?:period|quarter|year|weeks?|months?)[\s\u201d\u2019\"')]*ended\s+{_DATE}", re.IGNORECASE)
_ORDINAL = {"first": 1, "second": 2, "third": 3, "fourth": 4, "1st": 1, "2nd": 2, "3rd": 3, "4th": 4}
_QUARTER_NAMED = re.compile(
    r"\b(first|second|third|fourth|1st|2nd|3rd|4th)[\s-]+quarter(?:\s+(?:and\s+full[\s-]+year\s+)?(?:of\s+)?"
    r"(?:fiscal\s+(?:year\s+)?)?((?:19|20)\d\d))?|\b((?:19|20)\d\d)\s+(first|second|third|fourth)[\s-]+quarter"
    r"|\bQ([1-4])\s*(?:FY\s*|fiscal\s+)?'?((?:19|20)?\d\d)\b|\bfiscal\s+((?:19|20)\d\d)\s+(first|second|third|fourth)"
    r"[\s-]+quarter", re.IGNORECASE)
_FISCAL_NAMED = re.compile(r"\bfiscal\s+(?:year\s+)?((?:19|20)\d\d)\b|\bFY\s*'?((?:19|20)\d\d)\b", re.IGNORECASE)
_REGISTRANT = re.compile(r"\(?\s*exact\s+name\s+of\s+(?:the\s+)?registrants?\s+as\s+specified", re.IGNORECASE)
_LISTED = re.compile(r"([A-Z0-9][\w.&,'\u2019 -]{1,80}?)\s*\(\s*(?:NYSE(?:\s+American)?|NASDAQ|Nasdaq|"
                     r"NasdaqGS|TSX|LSE|AMEX)\s*:\s*([A-Z][A-Z.]{0,5})\s*\)")
_SYMBOL_ROW = re.compile(r"\b([A-Z]{1,5}(?:\.[A-Z])?)\s+(?:The\s+)?(?:New\s+York\s+Stock\s+Exchange|NYSE|Nasdaq|"
                         r"NASDAQ)\b")
_SECTION_12B = re.compile(r"section\s+12\s*\(\s*b\s*\)", re.IGNORECASE)
_SUFFIX = LEGAL_FORMS
_COMPANY_LINE = re.compile(rf"^(?:the\s+)?[A-Z0-9&][\w&.,'\u2019 -]{{0,70}}\b{_SUFFIX}\.?$", re.IGNORECASE)
_ANNOUNCER = re.compile(r"^([A-Z][\w&.'\u2019 -]{1,60}?)\s+(?:Announces|Reports|Reported|Posts|Delivers)\b")
_NOT_A_NAME = re.compile(r"securities|exchange|commission|act of|pursuant|indicate|check mark|washington|"
                         r"registrant|employer|identification|telephone|address|zip|state or other", re.IGNORECASE)


@dataclass(frozen=True)
class Identity:
    issuer: str | None = None
    tickers: tuple[str, ...] = ()
    form: str | None = None  # 10-K, 10-Q, 8-K, ..., "earnings release", "proxy statement", "annual report"
    period_end: str | None = None  # ISO date the document reports up to (or its date, for a current report)
    fiscal_year: int | None = None
    fiscal_quarter: int | None = None
    sources: tuple[str, ...] = field(default=())  # what each field was read from, for --debug

    @property
    def empty(self) -> bool:
        """Without both an issuer and a form it is not told: a paragraph naming a company is no cover page."""
        return not (self.issuer and self.form)

    def line(self) -> str:
        """One line naming the document: "3M Company · 10-K · fiscal year 2018, ended December 31, 2018"."""
        parts = [self.issuer or ""]
        if self.form:
            parts.append(f"Form {self.form}" if self.form[:1].isdigit() or self.form[:2] in ("S-",) else self.form)
        period = []
        if self.fiscal_quarter and self.fiscal_year:
            period.append(f"Q{self.fiscal_quarter} fiscal {self.fiscal_year}")
        elif self.fiscal_year:
            period.append(f"fiscal year {self.fiscal_year}")
        if self.period_end:
            end = dt.date.fromisoformat(self.period_end)
            word = "dated" if self.form == "8-K" else "ended"
            period.append(f"{word} {end:%B} {end.day}, {end.year}")
        if period:
            parts.append(", ".join(period))
        return " \u00b7 ".join(p for p in parts if p)

    def as_dict(self) -> dict[str, Any]:
        return {"issuer": self.issuer, "tickers": list(self.tickers), "form": self.form,
                "period_end": self.period_end, "fiscal_year": self.fiscal_year,
                "fiscal_quarter": self.fiscal_quarter}


def first_text(blocks: Sequence[Block]) -> str:
    """The text of the first pages (blocks without pages: the first FIRST_CHARS characters), line by line; a
    table's rows as lines of cells."""
    lines: list[str] = []
    size = 0
    for b in blocks:
        if b.page is not None and b.page > FIRST_PAGES:
            break
        text = b.text if b.type != "table" else "\n".join(" ".join(r) for r in (b.header, *b.rows))
        lines.append(text)
        size += len(text)
        if b.page is None and size > FIRST_CHARS:
            break
    return "\n".join(lines)


def _date(month: str, day: str, year: str) -> dt.date | None:
    try:
        return dt.date(int(year), MONTHS[month.lower()], int(day))
    except (KeyError, ValueError):
        return None


# a two-column cover read line by line puts the other column's words into the name's line ("June 30, 2023
# JPMorgan Chase & number 1-5805 Co.": the period's date and the commission file number)
_COVER_FIELDS = re.compile(rf"{_DATE}|\b(?:commission\s+)?(?:file\s+)?number\s+[\d-]+\b|\bcommission\s+file\b",
                           re.IGNORECASE)


def _clean_name(name: str) -> str:
    name = _COVER_FIELDS.sub(" ", name)
    name = re.sub(r"\s+", " ", name).strip(" ,;:-_\u2013\u2014").lstrip(".")
    return re.sub(r"\s+([.,])", r"\1", name)


def issuer_of(text: str, title: str | None) -> tuple[str | None, str]:
    """The issuer's name and what it was read from."""
    lines = [ln.strip() for ln in text.splitlines()]
    for i, ln in enumerate(lines):
        m = _REGISTRANT.search(ln)
        if m:
            before = ln[: m.start()].strip()
            candidates = [before] if before else [x for x in reversed(lines[max(0, i - 3):i]) if x][:1]
            for cand in candidates:
                name = _clean_name(cand)
                if 1 < len(name) <= 100 and not _NOT_A_NAME.search(name):
                    return name, "registrant"
    for m in _LISTED.finditer(text):
        name = re.split(r"[\u2013\u2014)]|--|\s-\s|\bof\b", m.group(1))[-1]
        name = _clean_name(re.sub(r"^(?:and|the|by)\s+", "", name.strip(), flags=re.IGNORECASE))
        if 1 < len(name) <= 80 and name[0].isupper():
            return name, "listing"
    for ln in lines[:60]:
        m = _ANNOUNCER.match(ln)
        if m and not _NOT_A_NAME.search(m.group(1)):
            return _clean_name(m.group(1)), "announcement"
    for ln in lines[:80]:
        if len(ln.split()) <= 8 and _COMPANY_LINE.match(ln) and not _NOT_A_NAME.search(ln):
            return _clean_name(ln), "cover"
    if title:
        m = _ANNOUNCER.match(title)
        if m:
            return _clean_name(m.group(1)), "title"
    return None, ""


def display_name(name: str) -> str:
    """A name as people write it: "BEST BUY CO., INC." -> "Best Buy Co., Inc." (words of capitals only are
    title-cased, short ones and those with digits kept: "3M", "AMD")."""
    if name.upper() != name:
        return name
    return " ".join(w if (len(w) <= 3 and not w.rstrip(".,").isalpha()) or any(ch.isdigit() for ch in w)
                    else w[:1] + w[1:].lower() for w in name.split())


def identify(blocks: Sequence[Block], title: str | None = None) -> Identity:
    """The identity of a document from its first pages (and its PDF title); a quarterly report whose first pages
    do not name its fiscal quarter is read whole for how the issuer names it ("second quarter of fiscal 2024")."""
    text = first_text(blocks)
    head = "\n".join(filter(None, [title or "", text]))
    sources: list[str] = []
    cover = text[:6000]
    form = None
    m = _FORM.search(cover)
    if m:
        form = _FORMS[m.group(1).upper()]
        sources.append("form:cover")
    elif _PROXY.search(cover[:3000]):
        form = "proxy statement"
        sources.append("form:cover")
    issuer, how = issuer_of(text, title)
    if issuer:
        sources.append(f"issuer:{how}")
    if form is None and how in ("listing", "announcement", "title") and _RELEASE.search(head[:3000]):
        form = "earnings release"  # a listed issuer announcing its results
        sources.append("form:announcement")
    elif form is None and issuer and _ANNUAL.search("\n".join([title or "", text[:300]])):
        form = "annual report"
        sources.append("form:title")
    tickers = _tickers(text) or _said_symbol(blocks)
    end: dt.date | None = None
    quarter: int | None = None
    for pattern, kind in ((_YEAR_END, "year"), (_QUARTER_END, "quarter"), (_REPORT_DATE, "report")):
        if (found := pattern.search(cover)) is not None and (end := _date(*found.groups())) is not None:
            sources.append(f"period:{kind}")
            break
    if end is None and form in ("earnings release", "annual report"):
        ends = [d for m2 in _ENDED.finditer(text[:4000]) if (d := _date(*m2.groups())) is not None]
        end = max(ends) if ends else None
        if end:
            sources.append("period:ended")
    fiscal_year = None
    if form in ("10-Q", "earnings release"):
        quarter, fiscal_year = _quarter_of(head, blocks, end)
        if quarter:
            sources.append("quarter:named" if fiscal_year else "quarter:calendar")
    if fiscal_year is None and end is not None:
        fiscal_year = end.year
        if quarter:
            pass
        elif end.month == 1 and end.day <= 7:  # a 52/53-week year ending in the first days of January
            fiscal_year = end.year - 1
        elif end.month <= 2:  # a year ending in January or February: the issuer may name it after the year before
            says = Counter(int(a or b) for a, b in _FISCAL_NAMED.findall(head))
            if says.get(end.year - 1, 0) > says.get(end.year, 0):
                fiscal_year = end.year - 1
    if form == "8-K":
        quarter = None
    return Identity(display_name(issuer) if issuer else None, tickers, form, end.isoformat() if end else None,
                    fiscal_year, quarter if form in ("10-Q", "earnings release") else None, tuple(sources))


def _quarter_of(head: str, blocks: Sequence[Block], end: dt.date | None) -> tuple[int | None, int | None]:
    """A quarterly document's (fiscal quarter, fiscal year): as its first pages first name it; else, for a quarter
    ending with a calendar quarter, that one (the year's own); else as the whole document names it most often,
    for a year that can be the period's."""
    named = _quarters(head)
    if named:  # a document leads with its own period (comparisons with the year before follow)
        return next(iter(named))
    if end is not None and end.month % 3 == 0 and end.day >= 28:
        return end.month // 3, None
    if end is not None:
        whole = "\n".join(b.text for b in blocks if b.type != "table")
        fits = [(n, qy) for qy, n in _quarters(whole).items() if qy[1] in (end.year, end.year + 1)]
        if fits:
            return max(fits)[1]
    return None, None


# "Our common stock is traded on the NASDAQ Global Select Market under the symbol “NFLX”" (Item 5 of a 10-K whose
# cover predates the symbols' column)
_UNDER_SYMBOL = re.compile(r"\b(?:common\s+(?:stock|shares)|shares)\b[^.]{0,160}?\bunder\s+the\s+"
                           r"(?:ticker\s+|trading\s+)?symbol\s+[\"'\u201c\u2018]?([A-Z]{1,5}(?:\.[A-Z])?)\b",
                           re.IGNORECASE)


def _said_symbol(blocks: Sequence[Block]) -> tuple[str, ...]:
    """The symbol a filing says its common stock trades under, in its first SYMBOL_PAGES pages."""
    for b in blocks:
        if b.page is not None and b.page > SYMBOL_PAGES:
            break
        if b.type != "table" and (m := _UNDER_SYMBOL.search(b.text)) and m.group(1).isupper():
            return (m.group(1),)
    return ()


def _tickers(text: str) -> tuple[str, ...]:
    found = [m.group(2) for m in _LISTED.finditer(text)]
    at = re.search(r"trading\s+symbol", text, re.IGNORECASE)
    if at:
        # the symbols' rows follow their column captions, or stand above them ("Class B Common Stock NKE New York
        # Stock Exchange" over "(Title of each class) (Trading symbol) ...")
        section = [m.end() for m in _SECTION_12B.finditer(text, max(0, at.start() - 500), at.start())]
        start = section[-1] if section else at.end()
        found += [m.group(1) for m in _SYMBOL_ROW.finditer(text[start: at.end() + 1500])]
    return tuple(dict.fromkeys(t for t in found if len(t) > 1 and t not in ("NYSE", "LLC", "INC", "THE", "CO")))[:4]


def _quarters(text: str) -> Counter[tuple[int, int]]:
    """How often each (quarter, fiscal year) is named: "second quarter of fiscal 2024", "Q2 FY24", "2022
    fourth-quarter"."""
    seen: Counter[tuple[int, int]] = Counter()
    for m in _QUARTER_NAMED.finditer(text):
        g = m.groups()
        if g[0] and g[1]:
            q, y = _ORDINAL[g[0].lower()], g[1]
        elif g[2]:
            q, y = _ORDINAL[g[3].lower()], g[2]
        elif g[4]:
            q, y = int(g[4]), g[5]
        elif g[6]:
            q, y = _ORDINAL[g[7].lower()], g[6]
        else:
            continue
        year = int(y) if len(y) == 4 else 2000 + int(y)
        seen[(q, year)] += 1
    return seen
