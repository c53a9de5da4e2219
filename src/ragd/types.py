"""What flows between blocks: frozen dataclasses, no dicts."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

BlockType = Literal["heading", "paragraph", "list", "table", "code"]
ChunkType = Literal["paragraph", "table", "list", "code", "heading"]
FusionMethod = str  # a name of retrieve.fuse.METHODS ("rrf", "weighted"), or one leg alone: "vector", "lexical"


@dataclass(frozen=True)
class Block:
    """One extracted unit of a document, in reading order."""

    type: BlockType
    text: str
    level: int = 0  # heading level (1..6); list nesting depth
    page: int | None = None
    header: tuple[str, ...] = ()  # tables: the header row
    rows: tuple[tuple[str, ...], ...] = ()  # tables: body rows
    meta: dict[str, Any] = field(default_factory=dict)


def has_text(block: Block) -> bool:
    """Whether a block holds any visible text (a table: in any cell)."""
    if block.type == "table":
        return any(c.strip() for row in (block.header, *block.rows) for c in row)
    return bool(block.text.strip())


def table_text(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A table block's text: the header and each row on a line of their own, cells joined by " | "."""
    return "\n".join(" | ".join(r) for r in (header, *rows))


@dataclass(frozen=True)
class ExtractedDocument:
    """An extractor's output: one logical document (a file, or one record of a JSONL file)."""

    external_id: str
    source_uri: str
    source_type: str
    title: str | None
    blocks: tuple[Block, ...]
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()  # extraction problems worth a line in the run (e.g. uncomputed formulas)


@dataclass(frozen=True)
class ChunkPolicy:
    target_tokens: int = 450
    min_tokens: int = 350
    max_tokens: int = 500
    hard_cap_tokens: int = 800
    overlap_tokens: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "target_tokens": self.target_tokens,
            "min_tokens": self.min_tokens,
            "max_tokens": self.max_tokens,
            "hard_cap_tokens": self.hard_cap_tokens,
            "overlap_tokens": self.overlap_tokens,
        }


@dataclass(frozen=True)
class Chunk:
    doc_id: str
    chunk_index: int
    content: str
    heading_path: tuple[str, ...] = ()
    chunk_type: ChunkType = "paragraph"
    token_count: int = 0
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    context: str = ""  # whose and which document it is (its identity line, ingest.identity), when told

    @property
    def search_text(self) -> str:
        """The text that is embedded and indexed: the document's identity and the heading path as context, then
        the content."""
        lead = "\n".join(x for x in (self.context, " > ".join(self.heading_path)) if x)
        return f"{lead}\n\n{self.content}" if lead else self.content


@dataclass(frozen=True)
class Filters:
    tags_any: tuple[str, ...] = ()
    tags_all: tuple[str, ...] = ()
    metadata: tuple[tuple[str, Any], ...] = ()  # equality on top-level keys, sorted by key
    doc_ids: tuple[uuid.UUID, ...] = ()
    external_ids: tuple[str, ...] = ()
    effective_from: str | None = None  # ISO timestamp, inclusive
    effective_to: str | None = None  # ISO timestamp, exclusive

    @property
    def empty(self) -> bool:
        return not (
            self.tags_any
            or self.tags_all
            or self.metadata
            or self.doc_ids
            or self.external_ids
            or self.effective_from
            or self.effective_to
        )


@dataclass(frozen=True)
class Plan:
    k: int = 12
    k_vec: int = 50
    k_lex: int = 50
    # weighted 0.5/0.5 measured best on SciFact (nDCG@10 0.742 vs RRF 0.724, vector 0.711, BM25 0.690)
    fusion: FusionMethod = "weighted"
    rrf_k: int = 60
    keyword_weight: float = 0.5
    semantic_weight: float = 0.5
    filters: Filters = Filters()
    rerank: bool = False
    compress: bool = False
    exact: bool = False  # exact vector scan instead of the HNSW index

    def filters_dict(self) -> dict[str, Any]:
        """The filters in the form `parse_filters` reads back."""
        f = self.filters
        return {"tags_any": list(f.tags_any), "tags_all": list(f.tags_all), "metadata": dict(f.metadata),
                "doc_ids": [str(d) for d in f.doc_ids], "external_ids": list(f.external_ids),
                "effective_from": f.effective_from, "effective_to": f.effective_to}

    def as_dict(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "k_vec": self.k_vec,
            "k_lex": self.k_lex,
            "fusion": self.fusion,
            "rrf_k": self.rrf_k,
            "keyword_weight": self.keyword_weight,
            "semantic_weight": self.semantic_weight,
            "rerank": self.rerank,
            "compress": self.compress,
            "exact": self.exact,
        }


@dataclass(frozen=True)
class Candidate:
    chunk_id: uuid.UUID
    doc_id: uuid.UUID
    doc_version_id: uuid.UUID
    chunk_index: int
    content: str
    title: str | None = None
    external_id: str | None = None
    version_label: str | None = None
    heading_path: tuple[str, ...] = ()
    chunk_type: str = "paragraph"
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    score: float = 0.0
    vector_score: float | None = None
    vector_rank: int | None = None
    lexical_score: float | None = None
    lexical_rank: int | None = None
    fused_score: float | None = None
    rerank_score: float | None = None

    @property
    def sort_key(self) -> tuple[float, str, int]:
        """Score descending, then (doc_id, chunk_index): the canonical tie-break."""
        return (-self.score, str(self.doc_id), self.chunk_index)

    def as_dict(self) -> dict[str, Any]:
        return {
            "chunk_id": str(self.chunk_id),
            "doc_id": str(self.doc_id),
            "doc_version_id": str(self.doc_version_id),
            "chunk_index": self.chunk_index,
            "score": self.score,
            "content": self.content,
            "title": self.title,
            "external_id": self.external_id,
            "version_label": self.version_label,
            "heading_path": list(self.heading_path),
            "chunk_type": self.chunk_type,
            "tags": list(self.tags),
            "metadata": self.metadata,
            "vector_score": self.vector_score,
            "vector_rank": self.vector_rank,
            "lexical_score": self.lexical_score,
            "lexical_rank": self.lexical_rank,
            "fused_score": self.fused_score,
            "rerank_score": self.rerank_score,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Candidate:
        """A candidate from `as_dict`'s form."""
        fields = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        for name in ("chunk_id", "doc_id", "doc_version_id"):
            fields[name] = uuid.UUID(fields[name])
        fields["heading_path"] = tuple(fields.get("heading_path") or ())
        fields["tags"] = tuple(fields.get("tags") or ())
        return cls(**fields)


ItemStatus = Literal["ingested", "updated", "unchanged", "duplicate", "skipped", "failed"]
ITEM_STATUSES: tuple[ItemStatus, ...] = ("ingested", "updated", "unchanged", "duplicate", "skipped", "failed")


@dataclass(frozen=True)
class ItemOutcome:
    source_uri: str
    status: ItemStatus
    external_id: str | None = None
    doc_id: uuid.UUID | None = None
    doc_version_id: uuid.UUID | None = None
    chunks: int = 0
    reason: str | None = None
    error_code: str | None = None
    extract_seconds: float = 0.0  # reading its file into documents and chunks (a file's time shared by its documents)
    store_seconds: float = 0.0  # embedding and writing it (a batch's time shared by its items, by their chunks)


@dataclass(frozen=True)
class IngestReport:
    run_id: uuid.UUID
    status: str
    items: tuple[ItemOutcome, ...]
    seconds: float
    embedded: int = 0  # texts sent to the embedder (cache misses)
    cache_hits: int = 0

    def count(self, status: ItemStatus) -> int:
        return sum(1 for item in self.items if item.status == status)

    @property
    def failed(self) -> tuple[ItemOutcome, ...]:
        return tuple(item for item in self.items if item.status == "failed")

    @property
    def chunks(self) -> int:
        return sum(item.chunks for item in self.items)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> IngestReport:
        """A report from `as_dict`'s form (times rounded to milliseconds)."""
        items = tuple(ItemOutcome(**{**i, "doc_id": uuid.UUID(i["doc_id"]) if i.get("doc_id") else None,
                                     "doc_version_id": uuid.UUID(i["doc_version_id"])
                                     if i.get("doc_version_id") else None})
                      for i in data.get("items", ()))
        return cls(run_id=uuid.UUID(data["run_id"]), status=data["status"], items=items, seconds=data["seconds"],
                   embedded=data.get("embedded", 0), cache_hits=data.get("cache_hits", 0))

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": str(self.run_id),
            "status": self.status,
            "seconds": round(self.seconds, 3),
            "counts": {s: self.count(s) for s in ITEM_STATUSES},
            "chunks": self.chunks,
            "embedded": self.embedded,
            "cache_hits": self.cache_hits,
            "items": [
                {
                    "source_uri": i.source_uri,
                    "external_id": i.external_id,
                    "status": i.status,
                    "doc_id": str(i.doc_id) if i.doc_id else None,
                    "doc_version_id": str(i.doc_version_id) if i.doc_version_id else None,
                    "chunks": i.chunks,
                    "reason": i.reason,
                    "error_code": i.error_code,
                    "extract_seconds": round(i.extract_seconds, 3),
                    "store_seconds": round(i.store_seconds, 3),
                }
                for i in self.items
            ],
        }


@dataclass(frozen=True)
class Answer:
    """What `ask` returns (seed 001): the answer text with `[chunk:ID]` markers, its citations (doc_id,
    doc_version_id, chunk_id, title, version_label), whether it abstained, and the debug record when asked."""

    answer: str
    citations: tuple[dict[str, Any], ...]
    abstained: bool
    debug: dict[str, Any] | None = None
    # sha256 of the canonical JSON of the answer, the cited and the context chunk ids (seed 003): the same question
    # on the same store and configuration gives the same hash
    result_hash: str = ""
    query_id: uuid.UUID | None = None  # its reproducibility record (`ragd executions show`)
    log: dict[str, Any] | None = field(default=None, repr=False, compare=False)  # the ragd.query log line
    # table arithmetic (see answer.arithmetic): {"operation", "result", "formula", "unit", "chunk_id", "operands"}
    # when the answer is a computation, {"operation", "refused": reason} when one was asked for and not done
    calculation: dict[str, Any] | None = None
    # an abstention of the answerability checks: why ("not enough evidence: no passage says 2016"), and the closest
    # passages (citations, each with what it lacks), to show as "not enough evidence"
    reason: str | None = None
    closest: tuple[dict[str, Any], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"answer": self.answer, "citations": list(self.citations), "abstained": self.abstained,
                "debug": self.debug}

    def pieces(self) -> list[str]:
        """The answer's text in word-sized pieces, as it is streamed (joined, they give the text back exactly)."""
        return re.findall(r"\s*\S+\s*?(?=\s|$)|\s+$", self.answer) or [self.answer]

    def to_json(self) -> dict[str, Any]:
        """Every field but the log line, as JSON values (what `from_json` reads back; the remote client's form)."""
        whole: dict[str, Any] = jsonable({
            **self.as_dict(), "result_hash": self.result_hash, "query_id": self.query_id,
            "calculation": self.calculation, "reason": self.reason, "closest": list(self.closest)})
        return whole

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Answer:
        query_id = data.get("query_id")
        return cls(answer=data["answer"], citations=tuple(data.get("citations") or ()),
                   abstained=bool(data["abstained"]), debug=data.get("debug"),
                   result_hash=data.get("result_hash") or "",
                   query_id=uuid.UUID(query_id) if query_id else None, calculation=data.get("calculation"),
                   reason=data.get("reason"), closest=tuple(data.get("closest") or ()))


def jsonable(value: Any) -> Any:
    """Rows and records as JSON values: UUIDs and times as strings, tuples as lists."""
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    return value


class AnswerStream:
    """What `ask_stream` returns: iterate it for the answer's text piece by piece (a token at a time from a
    server); once the pieces are read, `answer` is the whole Answer with its citations."""

    def __init__(self, pieces: Iterable[str], finish: Callable[[], Answer]):
        self._pieces, self._finish = pieces, finish
        self._answer: Answer | None = None

    def __iter__(self) -> Iterator[str]:
        yield from self._pieces
        self._answer = self._finish()

    @property
    def answer(self) -> Answer:
        if self._answer is None:
            for _ in self:
                pass
        assert self._answer is not None
        return self._answer
