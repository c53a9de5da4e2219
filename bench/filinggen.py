"""Look-alike filings with exact truth (issue 57): annual reports of several invented issuers and years, the same
statements in each, and questions about them in FinanceBench's format, to measure on data nobody tuned on.

    python bench/filinggen.py --out DIR [--issuers 6] [--years 3] [--seed 7]
    ragd eval DIR/filings.jsonl            # (its documents in DIR/pdfs/)

Each filing is a PDF of seven pages: an SEC cover page (the fields in a varying order, sometimes in two columns
as EDGAR's converters draw them, the trading symbol table), a table of contents, management's discussion (the
year's changes and the reasons for them, in sentences), the statements of income (three years), the balance
sheets (two year ends) and the statements of cash flows (three years), and a notes page; a running header and a
page footer on every page. The figures of a year are the same in every filing that reports it (the prior-year
columns of the next filing), and an issuer's fiscal year ends on its own date (December 31, June 30, the Saturday
nearest January 31). Types, sizes and margins vary by issuer.

The questions (`filings.jsonl`, one a line): line items looked up by the names analysts use ("capital
expenditure", "COGS", "total current assets"), metrics computed from them (gross margin, capex over revenue, the
change in net sales), the reason for a change (MD&A's sentence), what drove the operating margin's change (its
movement and MD&A's reason), whether the gross margin has been consistent (its latest years), and questions the
collection cannot answer (an issuer it does not hold, a year none of the issuer's filings covers: `answerable:
false`, to be abstained on).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from reportlab.lib.pagesizes import LETTER
from reportlab.pdfgen import canvas

FIRST = ["Halvern", "Orison", "Tamsett", "Brightwater", "Kestrel", "Marrow", "Quillon", "Vantor", "Ellery",
         "Corvane", "Sable", "Drummond", "Ostara", "Pellam", "Wrenfield", "Ardent", "Lumira", "Thessaly"]
SECOND = ["Industries", "Foods", "Systems", "Retail", "Energy", "Devices", "Brands", "Logistics", "Health",
          "Materials", "Outfitters", "Networks"]
SUFFIX = [", Inc.", " Corporation", " Company", " Holdings, Inc.", " Group, Inc."]
STATES = ["Delaware", "Minnesota", "Ohio", "New Jersey", "Washington", "Texas"]
DRIVERS = ["higher unit volumes in the {seg} segment", "price increases across most categories",
           "the acquisition of a regional distributor", "new store openings", "stronger demand for {seg} products",
           "favorable foreign currency effects"]
DRAGS = ["lower demand in the {seg} segment", "unfavorable foreign currency effects", "the exit of a product line",
         "store closures", "supply chain disruptions"]
# what moved the operating margin, up or down (drawn from each issuer's and year's own random stream)
LIFTS = ["lower freight and distribution costs", "leverage of fixed costs on higher sales",
         "a favorable mix of higher-margin products", "savings from the restructuring program"]
WEIGHS = ["higher raw material costs", "increased promotional activity", "higher wage rates in distribution",
          "an impairment of store assets"]
SEGMENTS = ["Consumer", "Industrial", "Professional", "International", "Digital"]


@dataclass
class Issuer:
    name: str
    short: str  # how a question names it
    ticker: str
    fye: str  # december, june, january
    state: str
    font: str
    size: float
    years: dict[int, dict[str, float]] = field(default_factory=dict)
    reasons: dict[int, str] = field(default_factory=dict)


def operating_margin(issuer: Issuer, year: int) -> float:
    f = issuer.years[year]
    return f["operating income"] / f["net sales"] * 100


def margin_reason(issuer: Issuer, year: int) -> str:
    """What the MD&A says moved the operating margin in the year, from its own random stream (the figures are the
    same with or without it)."""
    up = operating_margin(issuer, year) >= operating_margin(issuer, year - 1)
    return random.Random(f"{issuer.name}-margin-{year}").choice(LIFTS if up else WEIGHS)


def year_end(issuer: Issuer, year: int) -> dt.date:
    if issuer.fye == "december":
        return dt.date(year, 12, 31)
    if issuer.fye == "june":
        return dt.date(year, 6, 30)
    day = dt.date(year + 1, 1, 31)  # the Saturday nearest January 31 of the next calendar year
    return min((day + dt.timedelta(days=d) for d in range(-3, 4)), key=lambda x: abs((x - day).days)
               if x.weekday() == 5 else 99)


def figures(rng: random.Random, sales: float) -> dict[str, float]:
    cogs = round(sales * rng.uniform(0.45, 0.7))
    sga = round(sales * rng.uniform(0.12, 0.22))
    gross = sales - cogs
    operating = gross - sga
    interest = round(sales * rng.uniform(0.005, 0.02))
    pretax = operating - interest
    tax = round(pretax * rng.uniform(0.18, 0.26))
    net = pretax - tax
    cash = round(sales * rng.uniform(0.05, 0.15))
    receivables = round(sales * rng.uniform(0.06, 0.12))
    inventories = round(sales * rng.uniform(0.08, 0.16))
    other_current = round(sales * rng.uniform(0.01, 0.03))
    current_assets = cash + receivables + inventories + other_current
    ppe = round(sales * rng.uniform(0.2, 0.45))
    goodwill = round(sales * rng.uniform(0.05, 0.2))
    assets = current_assets + ppe + goodwill
    payables = round(sales * rng.uniform(0.05, 0.1))
    accrued = round(sales * rng.uniform(0.03, 0.06))
    current_liabilities = payables + accrued
    debt = round(sales * rng.uniform(0.1, 0.3))
    liabilities = current_liabilities + debt
    equity = assets - liabilities
    dep = round(ppe * rng.uniform(0.08, 0.14))
    capex = round(sales * rng.uniform(0.03, 0.08))
    operating_cash = net + dep + round(sales * rng.uniform(-0.02, 0.03))
    investing = -capex - round(sales * rng.uniform(0, 0.02))
    financing = -round(sales * rng.uniform(0.01, 0.05))
    return {"net sales": sales, "cost of sales": cogs, "gross profit": gross,
            "selling, general and administrative expenses": sga, "operating income": operating,
            "interest expense": interest, "income before income taxes": pretax, "provision for income taxes": tax,
            "net income": net, "cash and cash equivalents": cash, "accounts receivable, net": receivables,
            "inventories": inventories, "other current assets": other_current, "total current assets": current_assets,
            "property and equipment, net": ppe, "goodwill": goodwill, "total assets": assets,
            "accounts payable": payables, "accrued liabilities": accrued,
            "total current liabilities": current_liabilities, "long-term debt": debt, "total liabilities": liabilities,
            "total shareholders' equity": equity, "depreciation and amortization": dep,
            "net cash provided by operating activities": operating_cash,
            "purchases of property and equipment": -capex, "net cash used in investing activities": investing,
            "net cash used in financing activities": financing}


INCOME = ["net sales", "cost of sales", "gross profit", "selling, general and administrative expenses",
          "operating income", "interest expense", "income before income taxes", "provision for income taxes",
          "net income"]
BALANCE = ["cash and cash equivalents", "accounts receivable, net", "inventories", "other current assets",
           "total current assets", "property and equipment, net", "goodwill", "total assets", "accounts payable",
           "accrued liabilities", "total current liabilities", "long-term debt", "total liabilities",
           "total shareholders' equity"]
CASH = ["net income", "depreciation and amortization", "net cash provided by operating activities",
        "purchases of property and equipment", "net cash used in investing activities",
        "net cash used in financing activities"]


def issuers(rng: random.Random, count: int, years: list[int]) -> list[Issuer]:
    firsts = rng.sample(FIRST, count)
    out = []
    for first in firsts:
        second = rng.choice(SECOND)
        name = f"{first} {second}{rng.choice(SUFFIX)}"
        short = rng.choice([first, f"{first} {second}"])
        issuer = Issuer(name, short, (first[:3] + second[:1]).upper(), rng.choice(["december", "june", "january"]),
                        rng.choice(STATES), rng.choice(["Helvetica", "Times-Roman"]), rng.choice([8.5, 9.0, 9.5]))
        sales = float(rng.randrange(2_000, 60_000))
        for year in range(years[0] - 2, years[-1] + 1):
            issuer.years[year] = figures(rng, round(sales))
            seg = rng.choice(SEGMENTS)
            up = rng.random() < 0.7
            sales *= rng.uniform(1.02, 1.15) if up else rng.uniform(0.88, 0.98)
            issuer.reasons[year + 1] = (rng.choice(DRIVERS if up else DRAGS)).format(seg=seg)
        out.append(issuer)
    return out


def money(value: float) -> str:
    text = f"{abs(value):,.0f}"
    return f"({text})" if value < 0 else text


class Doc:
    def __init__(self, path: Path, issuer: Issuer, year: int):
        self.pdf = canvas.Canvas(str(path), pagesize=LETTER)
        self.issuer, self.year, self.page = issuer, year, 0
        self.y = 0.0
        self.start()

    def start(self) -> None:
        self.page += 1
        self.y = LETTER[1] - 80
        self.pdf.setFont(self.issuer.font, 7.5)
        if self.page > 1:  # running header and footer: furniture
            self.pdf.drawString(50, LETTER[1] - 40, f"{self.issuer.name} | Fiscal {self.year} Form 10-K")
            self.pdf.drawRightString(LETTER[0] - 50, 30, str(self.page))
            self.pdf.drawString(50, 30, "Table of Contents")

    def line(self, text: str, x: float = 50, size: float | None = None, bold: bool = False) -> None:
        font = self.issuer.font + ("-Bold" if bold and self.issuer.font == "Helvetica" else "")
        if bold and self.issuer.font == "Times-Roman":
            font = "Times-Bold"
        self.pdf.setFont(font, size or self.issuer.size)
        self.pdf.drawString(x, self.y, text)
        self.y -= (size or self.issuer.size) * 1.45

    def paragraph(self, text: str, width: int = 105) -> None:
        words, line = text.split(), ""
        for w in words:
            if len(line) + len(w) + 1 > width:
                self.line(line)
                line = w
            else:
                line = f"{line} {w}".strip()
        if line:
            self.line(line)
        self.y -= 6

    def table(self, title: str, columns: list[str], rows: list[tuple[str, list[float]]], unit: str) -> None:
        self.line(title, bold=True, size=self.issuer.size + 1.5)
        self.line(unit)
        xs = [LETTER[0] - 70 - 75 * (len(columns) - 1 - i) for i in range(len(columns))]
        self.pdf.setFont(self.issuer.font, self.issuer.size)
        for x, c in zip(xs, columns):
            self.pdf.drawRightString(x, self.y, c)
        self.y -= self.issuer.size * 1.8
        for label, values in rows:
            indent = 62 if not label.lower().startswith(("total", "net ", "gross", "operating income")) else 50
            self.pdf.setFont(self.issuer.font, self.issuer.size)
            self.pdf.drawString(indent, self.y, label[:1].upper() + label[1:])
            for x, v in zip(xs, values):
                self.pdf.drawRightString(x, self.y, money(v))
            self.y -= self.issuer.size * 1.6
        self.y -= 10

    def next_page(self) -> None:
        self.pdf.showPage()
        self.start()

    def save(self) -> None:
        self.pdf.showPage()
        self.pdf.save()


def year_ends(issuer: Issuer, years: tuple[int, ...]) -> list[str]:
    """The balance sheet's column captions: each year's end ("Jan. 29, 2022")."""
    return [f"{year_end(issuer, y):%b}. {year_end(issuer, y).day}, {year_end(issuer, y).year}" for y in years]


def draw_filing(path: Path, issuer: Issuer, year: int, rng: random.Random, lookalikes: bool = False
                ) -> dict[str, int]:
    """The filing's PDF; the page (1-based) of each part, for the evidence. `lookalikes`: the statements of a part
    of the group too (`draw_part`), before or after the consolidated ones."""
    part_first = lookalikes and random.Random(f"{issuer.name}-part").random() < 0.5
    end = year_end(issuer, year)
    d = Doc(path, issuer, year)
    pages: dict[str, int] = {}
    d.line("UNITED STATES", x=230, bold=True)
    d.line("SECURITIES AND EXCHANGE COMMISSION", x=180, bold=True)
    d.line("Washington, D.C. 20549", x=230)
    d.line("FORM 10-K", x=250, size=14, bold=True)
    d.line("ANNUAL REPORT PURSUANT TO SECTION 13 OR 15(d) OF THE SECURITIES EXCHANGE ACT OF 1934")
    when = f"{end:%B} {end.day}, {end.year}"
    if rng.random() < 0.5:
        d.line(f"For the fiscal year ended {when}")
        d.line(f"Commission file number 1-{rng.randrange(1000, 9999)}")
    else:  # two columns read across: the date below its label, another field between
        d.pdf.setFont(issuer.font, issuer.size)
        d.pdf.drawString(50, d.y, "For the fiscal year ended")
        d.pdf.drawString(330, d.y, "Commission file")
        d.y -= issuer.size * 1.45
        d.pdf.drawString(50, d.y, when)
        d.pdf.drawString(330, d.y, f"number 1-{rng.randrange(1000, 9999)}")
        d.y -= issuer.size * 1.45
    d.y -= 8
    d.line(issuer.name.upper() if rng.random() < 0.5 else issuer.name, x=200, size=13, bold=True)
    d.line("(Exact name of registrant as specified in its charter)", x=190)
    d.line(f"{issuer.state}    {rng.randrange(10, 99)}-{rng.randrange(1000000, 9999999)}")
    d.line("(State or other jurisdiction of incorporation)    (I.R.S. Employer Identification No.)")
    d.line("Securities registered pursuant to Section 12(b) of the Act:")
    d.line("Title of each class    Trading Symbol(s)    Name of each exchange on which registered")
    d.line(f"Common Stock, $0.01 par value    {issuer.ticker}    New York Stock Exchange")
    d.paragraph("Indicate by check mark whether the registrant (1) has filed all reports required to be filed by "
                "Section 13 or 15(d) of the Securities Exchange Act of 1934 during the preceding 12 months. Yes [X] "
                "No [ ]")
    d.next_page()
    d.line("TABLE OF CONTENTS", bold=True)
    for n, part in enumerate(["Business", "Risk Factors", "Management's Discussion and Analysis",
                              "Financial Statements and Supplementary Data", "Notes"], start=1):
        d.line(f"Item {n}.  {part}" + " " * 20 + str(n + 2))
    d.next_page()
    pages["mdna"] = d.page
    now, before = issuer.years[year], issuer.years[year - 1]
    change = (now["net sales"] / before["net sales"] - 1) * 100
    d.line("Management's Discussion and Analysis of Financial Condition and Results of Operations", bold=True)
    d.paragraph(f"Fiscal {year} compared with fiscal {year - 1}. Net sales "
                f"{'increased' if change >= 0 else 'decreased'} {abs(change):.1f}% to ${now['net sales']:,.0f} "
                f"million in fiscal {year}, primarily due to {issuer.reasons[year]}. Gross profit as a percentage "
                f"of net sales was {now['gross profit'] / now['net sales'] * 100:.1f}% compared with "
                f"{before['gross profit'] / before['net sales'] * 100:.1f}% in the prior year.")
    margin, was = operating_margin(issuer, year), operating_margin(issuer, year - 1)
    d.paragraph(f"Operating income as a percentage of net sales was {margin:.1f}% in fiscal {year} compared with "
                f"{was:.1f}% in fiscal {year - 1}; the {'increase' if margin >= was else 'decrease'} was primarily "
                f"driven by {margin_reason(issuer, year)}.")
    d.paragraph("Selling, general and administrative expenses reflect continued investment in our stores, "
                "technology and people. We believe our liquidity, including cash from operations and our credit "
                "facility, is sufficient to meet our needs for at least the next twelve months.")
    d.paragraph(f"Capital expenditures were ${-now['purchases of property and equipment']:,.0f} million in fiscal "
                f"{year}, mainly for new stores, distribution capacity and information technology.")
    d.next_page()
    if part_first:
        draw_part(d, issuer, year)
    cols3 = [str(y) for y in (year, year - 1, year - 2)]
    unit = "(In millions, except per share data)"
    pages["income"] = d.page
    d.table(f"{issuer.name.upper()}\nConsolidated Statements of Income".split("\n")[1], cols3,
            [(k, [issuer.years[y][k] for y in (year, year - 1, year - 2)]) for k in INCOME], unit)
    d.next_page()
    pages["balance"] = d.page
    d.table("Consolidated Balance Sheets", year_ends(issuer, (year, year - 1)),
            [(k, [issuer.years[y][k] for y in (year, year - 1)]) for k in BALANCE], "(In millions)")
    d.next_page()
    pages["cash"] = d.page
    d.table("Consolidated Statements of Cash Flows", cols3,
            [(k, [issuer.years[y][k] for y in (year, year - 1, year - 2)]) for k in CASH], "(In millions)")
    d.next_page()
    if lookalikes and not part_first:
        draw_part(d, issuer, year)
    pages["segments"] = d.page
    draw_segments(d, issuer, year)
    d.line("Notes to Consolidated Financial Statements", bold=True)
    d.paragraph(f"Note 1. Summary of significant accounting policies. Our fiscal year ends on {when}. The "
                "consolidated financial statements include the accounts of the Company and its subsidiaries.")
    d.save()
    return pages


# the statements of a part of the group that a 10-K may print beside the consolidated ones: a subsidiary that files
# too, the parent company alone (Schedule I), a segment's; the same line items, a fraction of the figures
PART_TITLES = ["{sub}\nStatements of Income", "Statements of Income of {sub}",
               "Condensed Financial Information of Registrant\nCondensed Statements of Income (Parent Company Only)",
               "{seg} Segment\nStatements of Income"]


def draw_part(d: Doc, issuer: Issuer, year: int) -> None:
    """A part of the group's statements of income and balance sheets, each figure a share (4% to 30%) of the
    group's, so the part's balance sheet balances too: only a title or the figures tell it from the group's."""
    rng = random.Random(f"{issuer.name}-{year}-part")
    share = rng.uniform(0.04, 0.3)
    title = rng.choice(PART_TITLES).format(sub=f"{issuer.short} {rng.choice(['Credit', 'Finance', 'Supply'])} "
                                               "Corporation", seg=rng.choice(SEGMENTS))
    head, _, name = title.rpartition("\n")
    if head:
        d.line(head, bold=True, size=issuer.size + 1.5)
    cols3 = [str(y) for y in (year, year - 1, year - 2)]
    d.table(name, cols3, [(k, [round(issuer.years[y][k] * share) for y in (year, year - 1, year - 2)])
                          for k in INCOME], "(In millions)")
    d.table(name.replace("Statements of Income", "Balance Sheets"),
            year_ends(issuer, (year, year - 1)),
            [(k, [round(issuer.years[y][k] * share) for y in (year, year - 1)]) for k in BALANCE], "(In millions)")
    d.next_page()


SEGMENT_ITEMS = ["net sales", "operating income", "depreciation and amortization",
                 "purchases of property and equipment", "total assets"]


def segments(issuer: Issuer, year: int) -> dict[str, dict[str, float]]:
    """The issuer's three segments' figures in a year (their sums are the totals); from
    their own random stream, so the statements' figures are the same with or without them."""
    rng = random.Random(f"{issuer.name}-segments")
    names = rng.sample(SEGMENTS, 3)
    rng = random.Random(f"{issuer.name}-{year}")
    out: dict[str, dict[str, float]] = {}
    left = {item: abs(issuer.years[year][item]) for item in SEGMENT_ITEMS}
    for n, name in enumerate(names):
        share = rng.uniform(0.15, 0.5)
        out[name] = {k: v - sum(o[k] for o in out.values()) if n == 2 else round(v * share) for k, v in left.items()}
    return out


def draw_segments(d: Doc, issuer: Issuer, year: int) -> None:
    """The segment note: the segments side by side under their names, two years each, and the total; the header's
    two rows set a line apart from the figures."""
    now, before = segments(issuer, year), segments(issuer, year - 1)
    groups = [*now, "Total"]
    d.line("Segment Information", bold=True, size=issuer.size + 1.5)
    d.line("(In millions)")
    width = 44.0
    xs = [LETTER[0] - 50 - width * (2 * len(groups) - 1 - i) for i in range(2 * len(groups))]
    d.pdf.setFont(issuer.font, issuer.size)
    for g, name in enumerate(groups):
        d.pdf.drawCentredString((xs[2 * g] + xs[2 * g + 1]) / 2 - 10, d.y, name)
    d.y -= issuer.size * 1.5
    for i, x in enumerate(xs):
        d.pdf.drawRightString(x, d.y, str(year - i % 2))
    d.y -= issuer.size * 2.4  # a gap: the header stands apart from the figures
    for item in SEGMENT_ITEMS:
        label = "capital expenditures" if item.startswith("purchases") else item
        d.pdf.drawString(50, d.y, label[:1].upper() + label[1:])
        values = [v for name in now for v in (now[name][item], before[name][item])]
        values += [abs(issuer.years[year][item]), abs(issuer.years[year - 1][item])]
        for x, v in zip(xs, values):
            d.pdf.drawRightString(x, d.y, money(v))
        d.y -= issuer.size * 1.6
    d.y -= 10


# how analysts name a line item (the questions' words) -> the statement's line
LOOKUPS = [("capital expenditure", "purchases of property and equipment", "cash",
            "Give a response to the question by relying on the details shown in the cash flow statement."),
           ("total current assets", "total current assets", "balance", "Answer in USD millions."),
           ("net income", "net income", "income", "Answer in USD millions."),
           ("COGS", "cost of sales", "income", "Please state answer in USD millions."),
           ("total inventories", "inventories", "balance", "Base your judgments on the balance sheet."),
           ("net revenue", "net sales", "income", "Answer in USD millions.")]


def questions(rng: random.Random, all_issuers: list[Issuer], years: list[int], held: dict[tuple[str, int], str],
              pages: dict[str, dict[str, int]], unheld: list[str]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []

    def add(issuer: Issuer, year: int, kind: str, question: str, answer: str, part: str, **slots: object) -> None:
        doc = held[(issuer.name, year)]
        out.append({"financebench_id": f"gen_{len(out):04d}", "doc_name": doc, "question_type": kind,
                    "question": question, "answer": answer, "answerable": True,
                    "evidence": [{"evidence_page_num": pages[doc][part] - 1, "evidence_text": ""}],
                    "_slots": {"issuer": issuer.short, "year": year, **slots}})

    for issuer in all_issuers:
        for year in years:
            name, item, part, ask = rng.choice(LOOKUPS)
            value = issuer.years[year][item]
            add(issuer, year, "lookup", f"What is the FY{year} {name} for {issuer.short}? {ask}",
                f"${abs(value):,.2f}".replace(",", ""), part, name=name)
            f = issuer.years[year]
            margin = f["gross profit"] / f["net sales"] * 100
            add(issuer, year, "metric", f"What is {issuer.short}'s FY{year} gross margin (as a %)? Round your answer "
                f"to one decimal place.", f"{margin:.1f}%", "income", metric="gross margin")
            capex = -f["purchases of property and equipment"] / f["net sales"] * 100
            add(issuer, year, "metric", f"What is the FY{year} capital expenditure as a % of revenue for "
                f"{issuer.short}? Answer in units of percents and round to one decimal place.", f"{capex:.1f}%", "cash",
                metric="capex")
            add(issuer, year, "reason", f"What drove the change in {issuer.short}'s net sales in FY{year}?",
                issuer.reasons[year].replace("{seg}", ""), "mdna")
            margin, was = operating_margin(issuer, year), operating_margin(issuer, year - 1)
            add(issuer, year, "drivers", f"What drove operating margin change as of FY{year} for {issuer.short}? If "
                "operating margin is not a useful metric for a company like this, then please state that and explain "
                f"why.", f"Operating margin {'increased' if margin >= was else 'decreased'} by "
                f"{abs(margin - was):.1f}% primarily due to {margin_reason(issuer, year)}.",
                "mdna")
            item, most = [("operating income", True), ("net sales", False)][year % 2]
            parts = segments(issuer, year)
            first = (max if most else min)(parts, key=lambda name: parts[name][item])
            add(issuer, year, "choice", f"Which of {issuer.short}'s segments had the {'highest' if most else 'lowest'} "
                f"{item} in FY{year}?", first, "segments", item=item, sup="highest" if most else "lowest")
            if year == years[-1]:  # how the gross margin moved over the latest filing's years
                gross = f["gross profit"] / f["net sales"] * 100
                was = issuer.years[year - 1]["gross profit"] / issuer.years[year - 1]["net sales"] * 100
                add(issuer, year, "trend", f"Are {issuer.short}'s gross margins historically consistent (not "
                    "fluctuating more than roughly 2% each year)? If gross margins are not a relevant metric for a "
                    "company like this, then please state that and explain why.",
                    f"Gross margin was {gross:.1f}% in FY{year}, {'up' if gross >= was else 'down'} "
                    f"{abs(gross - was):.1f}% from FY{year - 1}.", "income")
                flows = {k.split(" activities")[0].split()[-1]: f[k] for k in CASH if k.endswith("activities")}
                add(issuer, year, "choice", f"Among operating, investing, and financing activities, which brought in "
                    f"the most (or lost the least) cash flow for {issuer.short} in FY{year}?",
                    max(flows, key=lambda k: flows[k]), "cash")
    for name in unheld:
        out.append({"financebench_id": f"gen_{len(out):04d}", "doc_name": None, "question_type": "unheld",
                    "question": f"What is {name}'s FY{years[-1]} capital expenditure? Answer in USD millions.",
                    "answer": "", "answerable": False, "evidence": []})
    issuer = all_issuers[0]
    out.append({"financebench_id": f"gen_{len(out):04d}", "doc_name": None, "question_type": "unheld",
                "question": f"What is {issuer.short}'s FY{years[-1] + 6} net revenue? Answer in USD millions.",
                "answer": "", "answerable": False, "evidence": []})
    return out


def _period(rng: random.Random, year: int) -> str:
    return rng.choice([f"FY{year}", f"fiscal {year}", f"fiscal year {year}", f"FY{year % 100:02d}",
                       f"FY '{year % 100:02d}", f"the {year} fiscal year", f"{year}", f"fy {year}"])


# other wordings of each kind of question: terse shorthand, wrapped in instructions, casual lower case (the issuer
# named by the first word of its name only, as people say it), a definition
_WORDINGS: dict[str, list[str]] = {
    "lookup": ["{I} {name}, {P}?", "{I} {P} {name} ($mm)", "Please report {I}'s {name} for {P}. Answer in millions.",
               "You are an analyst. Using {I}'s filing, what was its {name} in {P}?",
               "what was {i}'s {lname} in {P}?", "how much was {I}'s {name} in {P}?", "{name} of {I} for {P}?",
               "Give me the {name} {I} reported for {P}, in USD millions.",
               "how much {lname} did {f} report for {P}?", "{f} {lname} {P}?"],
    "gross margin": ["{I} gross margin {P}, %", "what was {i}'s gross margin in {P}?",
                     "Compute {I}'s gross margin for {P}, defined as gross profit / net sales.",
                     "{I}'s gross profit as a percentage of net sales in {P}?",
                     "As an analyst, please calculate the gross margin of {I} for {P} (in percent, one decimal)."],
    "capex": ["{I} capex % of revenue {P}", "what percent of {i}'s revenue went to capital expenditures in {P}?",
              "what share of its revenue did {f} spend on capital expenditures in {P}?",
              "Compute {I}'s capital expenditure as a percentage of revenue for {P}.",
              "{I} {P}: capex as a % of net sales?", "capex to revenue for {i}, {P}?"],
    "choice": ["{I} segment with the {sup} {item}, {P}?", "which {i} segment had the {sup} {item} in {P}?",
               "In {P}, which of {I}'s segments posted the {sup} {item}?",
               "Please name the segment of {I} with the {sup} {item} for {P}."],
}


def reworded(questions: list[dict[str, object]], seed: int) -> list[dict[str, object]]:
    """Each question of a kind the grammar knows in one of its other wordings, with another period notation, drawn
    from a stream of its own (the documents and the answers are unchanged)."""
    rng = random.Random(f"wordings-{seed}")
    out = []
    for q in questions:
        slots = dict(q.get("_slots") or {})  # type: ignore[call-overload]
        kind = str(slots.get("metric") or q["question_type"])
        if kind in _WORDINGS and slots and (kind != "choice" or "item" in slots) and (kind != "lookup" or "name" in
                                                                                      slots):
            issuer = str(slots["issuer"])
            text = rng.choice(_WORDINGS[kind]).format(
                I=issuer, i=issuer.lower(), f=issuer.split()[0].lower(), P=_period(rng, int(slots["year"])),
                name=slots.get("name", ""),
                lname=str(slots.get("name", "")).lower(), item=slots.get("item", ""), sup=slots.get("sup", ""))
            casual = text == text.lower() or text.startswith(issuer.lower())  # written all in lower case
            q = {**q, "question": text if casual else text[:1].upper() + text[1:]}
        out.append(q)
    return out


def generate(out: Path, count: int = 6, nyears: int = 3, seed: int = 7, unheld: int = 2,
             wordings: str = "plain", lookalikes: bool = False) -> Path:
    """Write out/pdfs/*.pdf and out/filings.jsonl; the questions file's path. `wordings="varied"`: the questions in
    other wordings (`reworded`), the documents the same; `lookalikes`: each filing also prints a part of the group's
    statements (`draw_part`), the questions and their answers the same."""
    rng = random.Random(seed)
    years = list(range(2021 - nyears + 1, 2022))
    made = issuers(rng, count + unheld, years)
    held_issuers, outsiders = made[:count], made[count:]
    (out / "pdfs").mkdir(parents=True, exist_ok=True)
    held: dict[tuple[str, int], str] = {}
    pages: dict[str, dict[str, int]] = {}
    info = []
    for issuer in held_issuers:
        for year in years:
            doc = f"{issuer.ticker}_{year}_10K"
            held[(issuer.name, year)] = doc
            pages[doc] = draw_filing(out / "pdfs" / f"{doc}.pdf", issuer, year, rng, lookalikes)
            info.append({"doc_name": doc, "company": issuer.name, "doc_type": "10k", "doc_period": year})
    qs = questions(rng, held_issuers, years, held, pages, [o.short for o in outsiders])
    if wordings == "varied":
        qs = reworded(qs, seed)
    qs = [{k: v for k, v in q.items() if k != "_slots"} for q in qs]
    path = out / "filings.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in qs), encoding="utf-8")
    (out / "document_information.jsonl").write_text("".join(json.dumps(i) + "\n" for i in info), encoding="utf-8")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--issuers", type=int, default=6)
    parser.add_argument("--years", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--unheld", type=int, default=2, help="issuers asked about and not in the collection")
    parser.add_argument("--wordings", choices=("plain", "varied"), default="plain",
                        help="varied: each question in another wording drawn from a grammar (terse, wrapped, casual, "
                             "defined), with another period notation")
    parser.add_argument("--lookalikes", action="store_true",
                        help="each filing also prints a subsidiary's, the parent's or a segment's statements")
    args = parser.parse_args()
    path = generate(args.out, args.issuers, args.years, args.seed, args.unheld, args.wordings, args.lookalikes)
    print(f"wrote {path} and {args.out / 'pdfs'}; measure with: ragd eval {path}")


if __name__ == "__main__":
    main()
