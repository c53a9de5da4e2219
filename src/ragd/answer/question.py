"""What a question asks, apart from how it asks to be answered.

Questions to an analyst's tool come wrapped in instructions: "Answer in USD millions.", "Round your answer to two
decimal places.", "Give a response to the question by relying on the details shown in the cash flow statement.",
"Assume that you are a public equities analyst.", "(in units of percents and round to one decimal place)". They
steer the answer's form (its unit, its rounding) and its source (a statement), and are not words the evidence must
contain: a balance sheet never says "round". `read_question` splits them off, and writes the periods as filings
write them: "FY2018" is fiscal 2018, which a filing writes "2018" (or "fiscal 2018", "year ended December 31,
2018"); a quarter ("Q2", "second quarter") is the period of a quarterly document, which its identity says.

The patterns are of English instructions and of periods, not of any collection; what is kept is the question."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..fiscal import FY, FY_SHORT

# a sentence (or leading clause) that instructs rather than asks: a persona, a request about the answer's form or
# source, the definition of a metric
_INSTRUCTION = re.compile(
    r"^\s*(?:please\s+)?(?:give|round|answer|provide|use|using|utili[sz]e|base|basing|calculate|compute|express|help|"
    r"address|state|respond|rely|relying|assume|consider|think|imagine|pretend|act|you\s+are|you're|we\s+want|we\s+need|"
    r"i\s+want|i\s+need|here's|here\s+is|let's|note|"
    r"if\s+\w+(?:\s+\w+){0,4}\s+(?:is|are)\s+not\s+(?:a\s+)?(?:useful|relevant|meaningful)|(?:the\s+)?answer\s+should|your\s+answer|show|report|return|format|present|do\s+not|don't)\b",
    re.IGNORECASE)
_DEFINITION = re.compile(r"\b(?:is|are)\s+defined\s+as\b|\bdefined\s+as\s*:|\bformula\s+is\b", re.IGNORECASE)
_SOURCE_CLAUSE = re.compile(
    r"^\s*(?:(?:according|pursuant)\s+to|in\s+agreement\s+with|by\s+(?:drawing|relying|referring|looking)|"
    r"(?:when|while)\s+(?:primarily\s+)?(?:referencing|referring|relying|using|looking|basing)|based\s+(?:on|upon)|"
    r"(?:primarily\s+)?using|relying\s+on|basing\s+\w+\s+\w+\s+(?:on|by)|with\s+reference\s+to|from)\b[^,?]{0,160}?"
    r"\b(?:statements?|sheet|p\s*&\s*l|information|details|data|figures|notes?|filing|report|10-?[kq])\b[^,?]*,\s*",
    re.IGNORECASE)
_FORM_PHRASE = re.compile(
    r"\(\s*(?:in|as|answer\s+in|expressed\s+in)\s+[^()]{0,60}\)"
    r"|,?\s*\b(?:rounded|round(?:ing)?)\s+(?:it\s+|your\s+answer\s+)?to\s+(?:the\s+nearest\s+\w+|\w+\s+decimal\s+places?|"
    r"\w+\s+significant\s+(?:digits|figures))"
    r"|,?\s*\b(?:in|as)\s+(?:units\s+of\s+)?(?:usd|us\$|\$|eur|gbp)?\s*(?:millions|billions|thousands|percents?|"
    r"percentage(?:\s+points)?)\b(?=\s*[?.,]|$)", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.?!])\s+(?=[A-Z(])")
# a choice among several by a measure ("which segment had the highest net income", "which brought in the most (or
# lost the least) cash flow"): the superlative after "the" ("Best Buy" asks none), then the measure up to what
# qualifies it
MOST = ("highest", "largest", "biggest", "greatest", "most", "best", "strongest", "fastest")
LEAST = ("lowest", "smallest", "least", "worst", "weakest", "slowest")
CHOICE = re.compile(
    rf"(?:\b(?:which|what)\b[^?]{{0,160}}?\bthe|\b(?:segments?|business(?:es)?|units?|divisions?|categor(?:y|ies)|"
    rf"products?|regions?|markets?|brands?|activit(?:y|ies))\s+with(?:\s+the)?)\s+(?:single\s+)?"
    rf"(?P<sup>{'|'.join(MOST + LEAST)})\s+(?!recent\b|recently\b)(?:\([^)]*\)\s*)?"
    r"(?!(?:in|for|of|during|at|on|by|between|from|over|across|among)\b)"  # a preposition begins no measure
    r"(?P<measure>[^?,.():]+?)(?=\s+(?:in|for|of|during|among|at|as|on|by|between|from|than|over|within|across|"
    r"and|or|while|when|compared)\b|\s*[?,.(:]|$)", re.IGNORECASE)
_QUARTER = re.compile(r"\bQ[1-4]\b\s*(?:of\s+)?|\b(?:first|second|third|fourth)\s+(?:fiscal\s+)?quarter\s+(?:of\s+)?",
                      re.IGNORECASE)
_FISCAL = re.compile(r"\bfiscal\s+(?:year\s+)?(?=(?:19|20)\d\d\b)", re.IGNORECASE)


@dataclass(frozen=True)
class ReadQuestion:
    text: str  # what is asked, periods as filings write them
    instructions: tuple[str, ...]  # what steers the answer's form and source
    asked: str  # the question as given


def read_question(question: str) -> ReadQuestion:
    sentences = [s for s in _SENTENCE.split(question.strip()) if s.strip()]
    kept: list[str] = []
    instructions: list[str] = []
    for sentence in sentences:
        asks = sentence.rstrip().endswith("?")
        if not asks and (_INSTRUCTION.match(sentence) or _DEFINITION.search(sentence)):
            instructions.append(sentence.strip())
            continue
        if asks and _INSTRUCTION.match(sentence) and ":" in sentence:  # "Here's the question: what is ...?"
            head, _, sentence = sentence.partition(":")
            instructions.append(head.strip() + ":")
        clause = _SOURCE_CLAUSE.match(sentence)
        if clause:
            instructions.append(clause.group(0).strip(" ,"))
            sentence = _with_period(sentence[clause.end():], clause.group(0))
        for m in _FORM_PHRASE.finditer(sentence):
            instructions.append(m.group(0).strip(" ,"))
        sentence = _FORM_PHRASE.sub("", sentence)
        kept.append(sentence.strip())
    text = " ".join(k for k in kept if k) or question
    return ReadQuestion(periods_as_written(text), tuple(i for i in instructions if i), question)


# the period a source clause names ("Based on Nike's statement of cash flows for FY2023, which ..."): the quarter
# and year it says, which the question asks about though the clause is set apart
_CLAUSE_PERIOD = re.compile(r"(?:\b(?:Q[1-4]|(?:first|second|third|fourth)\s+(?:fiscal\s+)?quarter)\s+(?:of\s+)?)?"
                            r"\b(?:fiscal\s+(?:year\s+)?|FY\s*'?)?(?:19|20)\d\d\b|\bFY\s*'?\d\d\b", re.IGNORECASE)


def _with_period(rest: str, clause: str) -> str:
    """The question after its source clause, with the period the clause names where it names none."""
    said = [m.group(0) for m in _CLAUSE_PERIOD.finditer(clause)]
    if not said or _CLAUSE_PERIOD.search(rest):
        return rest
    body = rest.rstrip()
    end = body[-1] if body.endswith(("?", ".")) else ""
    return f"{body[:len(body) - len(end)].rstrip()} in {' and '.join(said)}{end}"


def periods_as_written(text: str) -> str:
    """"FY2018" -> "2018", "FY 22" -> "2022", "Q2 of FY2024" -> "2024", "fiscal 2022" -> "2022": the year is what
    a filing's statements and sentences say; the fiscal quarter is the quarterly document's, in its identity."""
    out = FY.sub(lambda m: m.group(1), text)
    out = FY_SHORT.sub(lambda m: f"20{m.group(1)}", out)
    out = _QUARTER.sub("", out)
    out = _FISCAL.sub("", out)
    return re.sub(r"\s{2,}", " ", out).strip()


_ROUND = re.compile(r"\bround\w*\b[^.?]{0,40}?\b(zero|one|two|three|four|no|\d)\s+decimal", re.IGNORECASE)
_COUNT = {"zero": 0, "no": 0, "one": 1, "two": 2, "three": 3, "four": 4}


def decimals_asked(instructions: tuple[str, ...] | list[str]) -> int | None:
    """The decimals an instruction asks the answer rounded to ("round to two decimal places": 2)."""
    for text in instructions:
        m = _ROUND.search(text)
        if m:
            word = m.group(1).lower()
            return _COUNT[word] if word in _COUNT else int(word)
    return None
