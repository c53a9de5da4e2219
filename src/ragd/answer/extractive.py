"""The default generator: offline and deterministic. The answer is made of the context's own words, each piece
followed by its `[chunk:ID]`; nothing is written that the documents do not say.

Whether to answer at all is decided before (see `abstain`); this picks what to quote. The pieces are sentences,
and for a table each body row written out with its header ("City: London; Per diem (EUR): 45").
- The first context chunk gives its best piece, and its runner-up unless that scores below a quarter of it.
- Each later chunk (up to `max_chunks`) gives its best piece if that scores at least LATER_SHARE (0.8) of the
  best so far.
- At most `max_pieces` in all, each chunk's in text order.
Pieces are scored with the cross-encoder when one is given (it reads each with the chunk's title and headings in
front: a sentence alone often does not say what it is about), and by shared query words otherwise.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..compress import split_sentences
from ..embed.hashing import tokens
from ..rerank import probability
from ..types import Candidate
from .citations import MARKER
from .question import CHOICE, LEAST, MOST

if TYPE_CHECKING:
    from ..rerank import Reranker

_RULE = re.compile(r"^\|?\s*:?-{2,}")
# Text that addresses the assistant rather than informing the reader (prompt injection). It is never quoted: the
# answer must not carry a document's instructions to whatever reads it next.
INJECTION = re.compile(
    r"\b(ignore|disregard|forget|override)\b[^.]{0,40}\b(instructions?|rules?|prompts?|directions?|guidelines)\b"
    r"|\b(reveal|print|show|repeat|output|leak)\b[^.]{0,30}\b(system prompt|your (instructions|prompt|rules))\b"
    r"|\byou are now\b|\bnew instructions\b|^\s*(assistant|system|ai)\s*[,:]", re.IGNORECASE)
# A later chunk's best piece is quoted only if it scores at least this share of the best piece so far. Measured on
# 400 SQuAD 2.0 questions (calibration / held-out halves): 0.5 gave citation precision 0.795 / 0.830, 0.8 gave
# 0.818 / 0.862 and 1.0 gave 0.977 / 0.957, answer recall unchanged (0.818 / 0.936) at all three. SQuAD answers
# sit in one paragraph by construction, so 1.0 would be tuned to that; 0.8 still lets a question that needs two
# documents quote both.
LATER_SHARE = 0.8
STOP = frozenset("a an and are as at be by can do does for from get how i in is it me my of on or our should the "
                 "to was we what when where which who why will with you your".split())


@dataclass(frozen=True)
class Extract:
    text: str  # pieces with their markers, or "" when the context gave none
    pieces: tuple[tuple[str, Candidate, float], ...]


def pieces(chunk: Candidate) -> list[str]:
    """A chunk's quotable pieces: its sentences, or a table's body rows with their header. Citation markers a
    document carries in its own text are dropped (only the generator cites), and so are sentences that address
    the assistant (INJECTION)."""
    if MARKER.search(chunk.content):
        chunk = dataclasses.replace(chunk, content=MARKER.sub("", chunk.content))
    if chunk.chunk_type == "table":
        header, body = table(chunk.content)
        if header:
            return [row_text(header, row) for row in body if not INJECTION.search(" ".join(row))]
    return [s for s in split_sentences(chunk.content)
            if len(s) > 1 and not INJECTION.search(s) and not _periods_only(s)]


# the words that only say which period: a line of them ("Second Quarter Third Quarter 2022 2022", a table's header
# set as text) says nothing that answers
_PERIOD_WORDS = frozenset("""first second third fourth 1st 2nd 3rd 4th quarter quarters q1 q2 q3 q4 fiscal year years
month months week weeks ended ending end three six nine twelve and as of at the for to fy ytd half
january february march april may june july august september october november december
jan feb mar apr jun jul aug sep sept oct nov dec""".split())


def _periods_only(sentence: str) -> bool:
    """A line that only names periods, or whose words are mostly single letters (a chart's rotated axis label
    read "s n o i ll i m"): nothing in it answers."""
    found = re.findall(r"[a-z0-9]+", sentence.lower())
    letters = [w for w in found if w.isalpha()]
    return (all(w.isdigit() or w in _PERIOD_WORDS for w in found)
            or (len(letters) >= 4 and sum(len(w) == 1 for w in letters) > len(letters) / 2))


_FIGURE = re.compile("[-+\u2212\u2013(]*[$\u20ac\u00a3\u00a5]?\\s*[\\d.,]+\\s*%?\\)?")
_YEAR = re.compile(r"(?:19|20)\d\d")


def _continues_header(row: list[str]) -> bool:
    """A header row below the first: no figures (years are labels), and either no row label or years in its
    other cells ("(in thousands) | 2019 | 2018")."""
    rest = [cell for cell in row[1:] if cell]
    if not rest or any(_FIGURE.fullmatch(cell) and not _YEAR.fullmatch(cell) for cell in rest):
        return False
    return not row[0] or any(_YEAR.search(cell) for cell in rest)


def table_lines(content: str) -> list[str]:
    """A table chunk's rows as lines: blank lines and Markdown's rule line ("| --- |") left out."""
    return [line for line in content.splitlines() if line.strip() and not _RULE.match(line)]


def row_text(header: Sequence[str], row: Sequence[str]) -> str:
    """A table row written out with its header, as it is quoted: "City: London; Per diem (EUR): 45"."""
    return "; ".join(f"{h}: {v}" if h else v for h, v in zip(header, row) if v)


def table_rows(content: str) -> list[list[str]]:
    """A table chunk's rows as cells, header rows included."""
    lines = table_lines(content)
    # Markdown rows are framed ("| a | b |"); ragd's own table text is not (" | 2019 | 2018": an empty first cell)
    framed = all(line.strip().startswith("|") and line.strip().endswith("|") for line in lines)
    return [[c.strip() for c in (line.strip()[1:-1] if framed else line).split("|")] for line in lines]


def table(content: str) -> tuple[list[str], list[list[str]]]:
    """A table chunk's header (its rows joined, see `_header`) and body rows; ([], []) for fewer than two rows."""
    rows = table_rows(content)
    return _header(rows) if len(rows) > 1 else ([], [])


def _header(rows: list[list[str]]) -> tuple[list[str], list[list[str]]]:
    """A table's header, its continuation rows joined into it column by column ("December 31," over "2019" is
    "December 31, 2019"), and its body."""
    header, n = list(rows[0]), 1
    while n < len(rows) - 1 and _continues_header(rows[n]):
        n += 1
    if n > 1:  # a header of several rows: a top cell spanning columns is stored once, in its first column
        top = list(rows[0])
        for i in range(2, len(top)):
            top[i] = top[i] or top[i - 1]
        header = [" ".join(row[i] for row in (top, *rows[1:n]) if i < len(row) and row[i]) for i in range(len(top))]
    return header, rows[n:]


# A question asking for a reason, and the wording that gives one (of English, not of any collection).
_ASKS_CAUSE = re.compile(r"\b(?:why|what\s+(?:drove|drives|caused|causes|led\s+to|explains?|contributed)|reasons?|"
                         r"drivers?|factors?|due\s+to\s+what)\b", re.IGNORECASE)
_GIVES_CAUSE = re.compile(r"\b(?:due\s+(?:primarily\s+|mainly\s+|largely\s+)?to|driven\s+(?:primarily\s+|mainly\s+)?by|"
                          r"primarily\s+(?:by|from|as\s+a\s+result)|as\s+a\s+result\s+of|because|reflect(?:s|ed|ing)|"
                          r"attributable\s+to|result(?:ed|ing)?\s+from|offset\s+by|owing\s+to|led\s+by|drove|"
                          r"impacted|affected|contributed\s+to|led\s+to|caused\s+by)\b",
                          re.IGNORECASE)
CAUSE_SHARE = 0.25  # a sentence giving a reason leads when it scores at least this share of the best one
# A question asking which of several stands first by a measure ("which segment had the highest net income"), and
# the wording that ranks or compares: only a sentence that does answers it (a table's rows, side by side, too).
_SUPERLATIVE = "|".join(MOST + LEAST)
_ALONE = "|".join(w for w in MOST + LEAST if w not in ("most", "least"))  # "most" alone is also "most categories"
_COMPARES = re.compile(rf"\bthe\s+(?:{_SUPERLATIVE})\b|\b(?:{_ALONE}|top|leading|"
                       r"led\s+by|majority|exceed(?:s|ed|ing)?|outpac(?:e|ed|ing)|(?:\w+er|more|less|fewer)\s+than)\b",
                       re.IGNORECASE)
# A question asking whether its subject is of a kind ("Is 3M a capital-intensive business?", "Are its financials
# that of a high growth company?"): a sentence answers it only if it speaks of that kind (its modifiers: "capital
# intensive", "high growth"); one about the subject's other doings does not.
_ASKS_KIND = re.compile(r"^\W*(?:is|are|was|were)\b.{1,80}?\b(?:an?|that\s+of\s+an?|considered(?:\s+an?)?)\s+"
                        r"(?P<kind>[^?,]+?)(?:\s+(?:based\s+on|in|as\s+of|for|during|given|according\s+to)\b[^?]*)?"
                        r"\s*(?:\?|$)", re.IGNORECASE)


def _kind_words(question: str) -> frozenset[str]:
    """The words a sentence must hold to say whether the subject is of the kind asked: the kind's words but its
    head noun ("capital-intensive business": capital, intensive); none for a question of another form."""
    m = _ASKS_KIND.match(question)
    if not m:
        return frozenset()
    kind = [w for w in tokens(m.group("kind")) if w not in STOP]
    return frozenset(kind[:-1]) if len(kind) > 1 else frozenset()


def _answers_form(piece: str, table_row: bool, choice: bool, kind: frozenset[str]) -> bool:
    """Whether a piece can answer the question's form: a choice by a measure is answered by a sentence that ranks
    or compares (or by table rows), a question of kind by a sentence holding the kind's words."""
    if choice and not (table_row or _COMPARES.search(piece)):
        return False
    held = {w[:5] for w in tokens(piece)}
    return all(w[:5] in held for w in kind)  # a word's first five letters: "intensive" and "intensity" alike


def speaks_of(piece: str, topic: Sequence[frozenset[str]]) -> bool:
    """Whether a piece speaks of a measure named by `topic` (answer.statements.topic): it holds two words of one of
    its names, or the one word of a name of one (words by their first five letters)."""
    held = {w[:5] for w in tokens(piece)}
    return any(len(group & held) >= min(2, len(group)) for group in topic)


_YEAR_NAMED = re.compile(r"\b(?:19|20)\d\d\b")


def _of_year(piece: str, year: int | None) -> bool:
    """Whether a piece can speak of the year: it names it, or no year ("In 2021, ..." is another year's)."""
    named = set(_YEAR_NAMED.findall(piece))
    return year is None or not named or str(year) in named


_BULLET = re.compile(r"\s*[\u2022\u25e6\u25aa\u2023\u2043*\u2013-]\s")
INTRODUCED = 3  # the pieces a quoted sentence ending in a colon introduces, quoted with it


def _introduced(units: list[str], i: int) -> tuple[str, list[int]]:
    """Piece i, with what it introduces when it ends in a colon ("the following impacted operating margins:"):
    the pieces after it, up to INTRODUCED, until one that introduces pieces of its own; and their indexes."""
    following: list[int] = []
    if units[i].rstrip().endswith(":"):
        for j in range(i + 1, min(i + 1 + INTRODUCED, len(units))):
            if units[j].rstrip().endswith(":") or (following and _BULLET.match(units[following[0]])
                                                   and not _BULLET.match(units[j])):
                break  # a list of items ends where its items' marks do
            following.append(j)
    return " ".join([units[i], *(units[j] for j in following)]), following


def extract(question: str, context: Sequence[Candidate], model: Reranker | None = None, *, max_chunks: int = 3,
            max_pieces: int = 3, topic: Sequence[frozenset[str]] = (), year: int | None = None) -> Extract:
    """The context's best pieces for the question (its first `max_chunks` chunks, at most `max_pieces` pieces),
    each with its chunk's marker. With a `topic` (the names of a measure whose movement in `year` was computed),
    only pieces that give a cause, speak of the measure and name no other year only are quoted: its reasons."""
    chosen: list[tuple[str, Candidate, float]] = []
    best = 0.0
    terms = set(tokens(question)) - STOP
    why = bool(_ASKS_CAUSE.search(question))
    choice, kind = bool(CHOICE.search(question)), _kind_words(question)
    for n, chunk in enumerate(context[:max_chunks]):
        units = pieces(chunk)
        if not units:
            continue
        if model is not None:
            lead = " > ".join(x for x in (chunk.title, *chunk.heading_path) if x)
            scores = [probability(x) for x in model.score(question, [f"{lead}: {u}" if lead else u for u in units])]
        else:
            scores = [len(terms & set(tokens(u))) / max(1, len(terms)) for u in units]
        if why:  # a question asking why: a sentence that says why, and is about the
            # question (a quarter of the best piece's score at least), comes first
            top = max(scores)
            scores = [top * 1.01 + x * 1e-3 if _GIVES_CAUSE.search(u) and x >= top * CAUSE_SHARE else x
                      for x, u in zip(scores, units)]  # by their own score among them (not by place)
        if topic:
            scores = [x if _GIVES_CAUSE.search(u) and _of_year(u, year) and speaks_of(u, topic)
                      else 0.0 for x, u in zip(scores, units)]
        if choice or kind:  # a piece that cannot answer the question's form is never quoted
            rows = chunk.chunk_type == "table"
            scores = [x if _answers_form(u, rows, choice, kind) else 0.0 for x, u in zip(scores, units)]
        order = sorted(range(len(units)), key=lambda i: (-scores[i], i))
        if n == 0:  # the best piece, and the runner-up unless it scores far below (a quarter)
            take = order[:1] + [i for i in order[1:2] if scores[i] >= scores[order[0]] / 4]
        else:
            take = [i for i in order[:1] if scores[i] >= best * LATER_SHARE]
        take = [i for i in take if scores[i] > 0]  # a piece sharing nothing with the question is never quoted
        best = max(best, scores[order[0]])
        introduced = {i: _introduced(units, i) for i in take}
        within = {j for _, following in introduced.values() for j in following}  # quoted with what introduces them
        chosen += [(introduced[i][0], chunk, scores[i]) for i in sorted(take) if i not in within]
        if len(chosen) >= max_pieces:
            break
    chosen = chosen[:max_pieces]
    if choice and len(chosen) < 2 and all(c.chunk_type == "table" for _, c, _ in chosen):
        chosen = []  # one table row compares nothing
    return Extract(" ".join(f"{u} [chunk:{c.chunk_id}]" for u, c, _ in chosen), tuple(chosen))
