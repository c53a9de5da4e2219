"""Structure-aware chunking: heading -> paragraph -> sentence boundaries, token budgets counted with a
real tokenizer, tables split only between rows with the header repeated in every part."""

from __future__ import annotations

import collections
import csv
import dataclasses
import functools
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..types import Block, Chunk, ChunkPolicy, ChunkType, has_text

_SENTENCE_END = re.compile(r"(?<=[.!?;:])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9\u00c0-\u024f])")
MAX_TABLE_ROWS = 50


class Counter(Protocol):
    def count(self, text: str) -> int: ...

    def count_many(self, texts: Sequence[str]) -> list[int]: ...

    def offsets(self, text: str) -> list[tuple[int, int]]: ...


@dataclass
class _Unit:
    text: str
    tokens: int
    kind: str
    pages: tuple[int, ...] = ()
    boxes: tuple[dict[str, Any], ...] = ()  # {"page", "bbox"} where the block came from, when known
    block: int = 0  # units cut from one block join with a space, blocks with a blank line


@dataclass
class _Builder:
    policy: ChunkPolicy
    counter: Counter
    doc_id: str
    chunks: list[Chunk] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    path: tuple[str, ...] = ()
    buffer: list[_Unit] = field(default_factory=list)
    uncounted: list[int] = field(default_factory=list)  # chunks whose tokens are counted at the end, in one batch

    @property
    def buffered(self) -> int:
        return sum(u.tokens for u in self.buffer)

    def emit(self, text: str, kind: ChunkType, tokens: int | None, meta: dict[str, Any]) -> None:
        """Append a chunk; `tokens` None counts its text later, with every other such chunk in one batch."""
        meta = {**meta, "summary": summarize(text, kind, meta), "keywords": keywords(text)}
        if tokens is None:
            self.uncounted.append(len(self.chunks))
        self.chunks.append(
            Chunk(
                doc_id=self.doc_id,
                chunk_index=len(self.chunks),
                content=text,
                heading_path=self.path,
                chunk_type=kind,
                token_count=tokens or 0,
                metadata=meta,
            )
        )

    def counted(self) -> list[Chunk]:
        """The chunks with every token count filled in (a batch encode is several times faster than one by one)."""
        texts = [self.chunks[i].content for i in self.uncounted]
        for i, n in zip(self.uncounted, self.counter.count_many(texts)):
            self.chunks[i] = dataclasses.replace(self.chunks[i], token_count=n)
        self.uncounted = []
        return self.chunks

    def flush(self) -> None:
        if not self.buffer:
            return
        kinds = {u.kind for u in self.buffer}
        kind: ChunkType = "paragraph"
        if len(kinds) == 1 and next(iter(kinds)) in ("list", "code"):
            kind = "list" if "list" in kinds else "code"
        text = self.buffer[0].text
        for prev, unit in zip(self.buffer, self.buffer[1:]):
            text += (" " if unit.block == prev.block and unit.kind == "paragraph" else "\n\n") + unit.text
        pages = sorted({p for u in self.buffer for p in u.pages})
        meta: dict[str, Any] = {"pages": pages} if pages else {}
        boxes = [b for i, u in enumerate(self.buffer) for b in u.boxes
                 if not any(u.boxes == v.boxes for v in self.buffer[:i])]  # a block cut in parts: its boxes once
        if boxes:
            meta["boxes"] = boxes
        # one unit is its own text: its count is known; joined units are counted at the end, in one batch
        self.emit(text, kind, self.buffer[0].tokens if len(self.buffer) == 1 else None, meta)
        self.buffer = []

    def add(self, unit: _Unit) -> None:
        p = self.policy
        total = self.buffered + unit.tokens
        if self.buffer and (total > p.max_tokens or (total > p.target_tokens and self.buffered >= p.min_tokens)):
            self.flush()
        self.buffer.append(unit)


_KEYWORD = re.compile(r"[^\W_][\w\-.]*[^\W_]|[^\W\d_]", re.UNICODE)
_STOPWORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before being below between both
but by can could did do does doing down during each few for from further had has have having he her here hers her
him his how i if in into is it its itself just may me might more most must my no nor not now of off on once only or
other our ours out over own same shall she should so some such than that the their theirs them then there these they
this those through to too under until up upon us very was we were what when where which while who whom why will with
within without would you your yours table row rows column columns
""".split())
SUMMARY_CHARS = 240
KEYWORDS = 8


def summarize(text: str, kind: str, meta: dict[str, Any]) -> str:
    """A deterministic one-line summary: a table's caption, columns and row span; otherwise the first sentence
    (cut at a word edge to SUMMARY_CHARS)."""
    if kind == "table":
        columns = ", ".join(c for c in meta.get("columns", []) if c)
        first, last = meta.get("rows", [0, 0])
        label = meta.get("caption") or meta.get("sheet") or "Table"
        span = f"{label}: rows {first + 1}-{last}"
        return f"{span} of columns {columns}" if columns else span
    body = " ".join(text.split())
    first_sentence = _first_sentence(body) or body
    if len(first_sentence) <= SUMMARY_CHARS:
        return first_sentence
    cut = first_sentence[:SUMMARY_CHARS].rsplit(" ", 1)[0]
    return cut.rstrip(",;:") + "\u2026"


def keywords(text: str, n: int = KEYWORDS) -> list[str]:
    """The chunk's most frequent content words (stop words and bare numbers out), ties by first appearance."""
    # lower-casing an ASCII text first finds the same words; elsewhere it may change what counts as a word character
    found = _KEYWORD.findall(text.lower()) if text.isascii() else map(str.lower, _KEYWORD.findall(text))
    counts = collections.Counter(found)  # counted in C, in first-appearance order
    out: list[str] = []
    for word, _ in counts.most_common():  # a stable sort, in C: ties stay in first-appearance order
        if _content_word(word):
            out.append(word)
            if len(out) == n:
                break
    return out


@functools.lru_cache(maxsize=65536)
def _content_word(word: str) -> bool:
    return not (word in _STOPWORDS or len(word) < 3 or word.replace(".", "").replace(",", "").isdigit())


def _first_sentence(text: str) -> str:
    """_sentences(text)[0] ("" when there is none), without splitting the rest of the text."""
    start = 0
    for end in _SENTENCE_END.finditer(text):
        if piece := text[start : end.start()].strip():
            return piece
        start = end.end()
    return text[start:].strip()


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def _hard_split(text: str, budget: int, counter: Counter) -> list[str]:
    """Cut text that has no sentence boundary into pieces of at most `budget` tokens, at token edges."""
    offsets = counter.offsets(text)
    pieces = []
    for start in range(0, len(offsets), budget):
        window = offsets[start : start + budget]
        end = offsets[start + budget][0] if start + budget < len(offsets) else len(text)
        pieces.append(text[window[0][0] : end].strip())
    return [p for p in pieces if p]


def _units(block: Block, number: int, tokens: int, policy: ChunkPolicy, counter: Counter) -> list[_Unit]:
    """The block as units of at most max_tokens; `tokens` is the block's own count."""
    pages = (block.page,) if block.page is not None else ()
    boxes = tuple(block.meta.get("boxes", ()))
    if tokens <= policy.max_tokens or (block.type == "code" and tokens <= policy.hard_cap_tokens):
        return [_Unit(block.text, tokens, block.type, pages, boxes, number)]
    if block.type == "list":
        parts = [line for line in block.text.split("\n") if line.strip()]
    else:
        parts = _sentences(block.text)
    out = []
    for part, n in zip(parts, counter.count_many(parts)):
        if n <= policy.max_tokens:
            out.append(_Unit(part, n, block.type, pages, boxes, number))
        else:
            for piece in _hard_split(part, policy.target_tokens, counter):
                out.append(_Unit(piece, counter.count(piece), block.type, pages, boxes, number))
    return out


def _markdown_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |"


def _csv(rows: Sequence[Sequence[str]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerows(rows)
    return buf.getvalue()


def _part_spans(block: Block, first: int, last: int) -> tuple[list[list[str]], list[list[int]] | None]:
    """The body rows first..last of a table and the spans over them (row 0 the header, as in the block's
    `meta["spans"]`); a cell spanning down from a row before `first` is written again in the part's first row it
    covers, so each part reads whole. Spans None when the table has none."""
    part = [list(r) for r in block.rows[first:last]]
    if not block.meta.get("spans"):
        return part, None
    at = [0, *range(first + 1, last + 1)]  # the block's row of each of the part's rows (header included)
    out = []
    for row, column, height, width in block.meta["spans"]:
        present = [i for i, r in enumerate(at) if row <= r < row + height]
        if not present:
            continue
        if at[present[0]] != row:  # begun in an earlier part
            part[present[0] - 1][column] = block.rows[row - 1][column] if row else block.header[column]
        if len(present) > 1 or width > 1:
            out.append([present[0], column, len(present), width])
    return part, out


def _table(builder: _Builder, block: Block) -> None:
    header = list(block.header)
    rows = [list(r) for r in block.rows]
    if not header and not rows:
        return
    width = max([len(header), *(len(r) for r in rows)])
    head_lines = [_markdown_row(header), _markdown_row(["---"] * width)] if header else []
    head_tokens = builder.counter.count("\n".join(head_lines)) if head_lines else 0
    row_lines = [_markdown_row(r) for r in rows]
    row_tokens = builder.counter.count_many(row_lines)
    cap = builder.policy.hard_cap_tokens
    pages = list(block.meta.get("pages") or ([block.page] if block.page is not None else []))
    extra: dict[str, Any] = {k: block.meta[k] for k in ("caption", "sheet", "borderless") if k in block.meta}

    def emit(first: int, last: int) -> None:
        part, spans = _part_spans(block, first, last)
        lines = head_lines + ([_markdown_row(r) for r in part] if spans is not None else row_lines[first:last])
        text = "\n".join(lines)
        meta: dict[str, Any] = {
            "format": "markdown",
            "csv": _csv(([header] if header else []) + part),
            "rows": [first, last],
            "columns": header,
            **extra,
        }
        if spans:
            meta["spans"] = spans
        part_pages = pages
        row_pages = block.meta.get("row_pages")
        if row_pages and len(row_pages) == len(rows) and last > first:  # a table merged over pages
            part_pages = sorted(set(row_pages[first:last]))
        if part_pages:
            meta["pages"] = part_pages
        if block.meta.get("boxes"):
            meta["boxes"] = [b for b in block.meta["boxes"] if b.get("page") in part_pages or not part_pages]
        if last - first == 1 and head_tokens + row_tokens[first] > cap:
            meta["warning"] = f"row {first} alone is {row_tokens[first]} tokens, over the {cap}-token cap"
            builder.warnings.append(f"table row {first} exceeds {cap} tokens; kept whole")
        builder.emit(text, "table", None, meta)

    if not rows:
        emit(0, 0)
        return
    first, used = 0, head_tokens
    for i, n in enumerate(row_tokens):
        if i > first and (used + n > cap or i - first >= MAX_TABLE_ROWS):
            emit(first, i)
            first, used = i, head_tokens
        used += n
    emit(first, len(rows))


def chunk_blocks(
    blocks: Sequence[Block], policy: ChunkPolicy, counter: Counter, doc_id: str = ""
) -> tuple[list[Chunk], list[str]]:
    """Chunks in reading order with stable chunk_index, and any warnings for the run."""
    builder = _Builder(policy=policy, counter=counter, doc_id=doc_id)
    prose = [i for i, b in enumerate(blocks) if b.type not in ("heading", "table") and has_text(b)]
    block_tokens = dict(zip(prose, counter.count_many([blocks[i].text for i in prose])))
    levels: list[tuple[int, str]] = []
    pending_heading: Block | None = None
    for number, block in enumerate(blocks):
        if not has_text(block):
            continue  # nothing to store (the store refuses empty chunks)
        if block.type == "heading":
            builder.flush()
            level = max(1, block.level)
            levels = [(lv, t) for lv, t in levels if lv < level] + [(level, block.text)]
            builder.path = tuple(t for _, t in levels)
            pending_heading = block
            continue
        pending_heading = None
        if block.type == "table":
            builder.flush()
            _table(builder, block)
            continue
        for unit in _units(block, number, block_tokens[number], policy, counter):
            builder.add(unit)
    builder.flush()
    if not builder.chunks and pending_heading is not None:
        builder.path = builder.path[:-1]
        builder.emit(pending_heading.text, "heading", None, {})
    return builder.counted(), builder.warnings
