"""Documents given in memory rather than as files ({"id", "text", "title"?, "tags"?, "metadata"?,
"source_type"?}), checked at once and read into blocks when a run reaches them; and the check every value given to
the library passes before it is stored or looked up."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, overload

from ..errors import InvalidRequest
from ..types import Block, Chunk, ExtractedDocument
from .extract.markdown import markdown_blocks
from .extract.text import text_blocks
from .normalize import unstorable


def require_storable(what: str, value: Any) -> None:
    """Refuse what PostgreSQL cannot store or look up as given (NUL, lone surrogates, nesting past MAX_DEPTH),
    instead of storing it changed (an id without its NUL names another document) or failing inside a query."""
    problem = unstorable(value)
    if problem:
        raise InvalidRequest(f"{what} {problem}")


class GivenDocuments(Sequence[ExtractedDocument]):
    """In-memory documents, each checked at once (a bad one refuses the whole call before anything is stored) and
    read into blocks when the run reaches it: the first batch is stored while the rest are still being read."""

    def __init__(self, documents: Iterable[ExtractedDocument | Mapping[str, Any]]):
        self._documents = documents if isinstance(documents, Sequence) else list(documents)
        for d in self._documents:
            if not isinstance(d, ExtractedDocument):
                _check_mapping(d)

    def __len__(self) -> int:
        return len(self._documents)

    @overload
    def __getitem__(self, i: int) -> ExtractedDocument: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[ExtractedDocument]: ...

    def __getitem__(self, i: int | slice) -> ExtractedDocument | Sequence[ExtractedDocument]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        d = self._documents[i]
        return d if isinstance(d, ExtractedDocument) else _read_mapping(d)


def _check_mapping(raw: Mapping[str, Any]) -> None:
    rid, text = raw.get("id"), raw.get("text")
    if not rid or not isinstance(text, str):
        raise InvalidRequest("an in-memory document needs a non-empty 'id' and a 'text' string")
    require_storable(f"document id {str(rid)!r}:", str(rid))
    require_storable(f"document {str(rid)!r}: metadata", raw.get("metadata"))


def document_from_mapping(raw: Mapping[str, Any]) -> ExtractedDocument:
    _check_mapping(raw)
    return _read_mapping(raw)


def _read_mapping(raw: Mapping[str, Any]) -> ExtractedDocument:
    """A checked in-memory document as blocks."""
    rid, text = raw["id"], raw["text"]
    title = raw.get("title")
    kind = str(raw.get("source_type") or "text")
    body = markdown_blocks(text) if kind == "markdown" else text_blocks(text)
    if kind == "markdown" and not title:  # as a Markdown file: its first heading is its title
        title = next((b.text for b in body if b.type == "heading"), None)
    elif title:
        body = [Block("heading", str(title), level=1), *body]
    return ExtractedDocument(external_id=str(rid), source_uri=str(raw.get("source_uri") or f"memory:{rid}"),
                             source_type=kind, title=str(title) if title else None, blocks=tuple(body),
                             tags=tuple(raw.get("tags") or ()), metadata=dict(raw.get("metadata") or {}))


def documents_of_chunks(chunks: Sequence[Chunk]) -> list[ExtractedDocument]:
    """Chunks given as they are (`ragd.index`), one document per doc_id in id order, a block per chunk in order."""
    by_doc: dict[str, list[Chunk]] = {}
    for c in chunks:
        by_doc.setdefault(c.doc_id, []).append(c)
    docs = []
    for doc_id in sorted(by_doc):
        parts = sorted(by_doc[doc_id], key=lambda c: c.chunk_index)
        blocks = [Block("paragraph", c.content) if c.chunk_type != "table" else Block("table", c.content)
                  for c in parts]
        docs.append(ExtractedDocument(external_id=doc_id, source_uri=f"memory:{doc_id}", source_type="chunks",
                                      title=None, blocks=tuple(blocks),
                                      tags=tuple(sorted({t for c in parts for t in c.tags}))))
    return docs
