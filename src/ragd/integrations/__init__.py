"""ragd where applications are already written: retrievers for LangChain (`ragd.integrations.langchain`, extra
`ragd[langchain]`) and LlamaIndex (`ragd.integrations.llamaindex`, extra `ragd[llamaindex]`) over a collection in
process (`Collection`) or on a ragd server (`RemoteCollection`). Each returns the framework's own documents or
nodes, with ragd's ids, scores, pages and heading path in their metadata (`metadata_of`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ..types import Candidate, Filters


class Searchable(Protocol):
    """What a retriever needs of a collection: `Collection` and `RemoteCollection` both have it."""

    name: str

    def search(self, query: str, k: int = 12, filters: Mapping[str, Any] | Filters | None = None,
               **plan: Any) -> list[Candidate]: ...


def metadata_of(hit: Candidate) -> dict[str, Any]:
    """A candidate's metadata for a framework: the document's own metadata, then ragd's fields (these win on a
    clash): chunk, document and version ids, external id, title, version label, heading path, chunk type, tags,
    pages (where extraction knew them) and every score."""
    return {**hit.metadata,
            "chunk_id": str(hit.chunk_id), "doc_id": str(hit.doc_id), "doc_version_id": str(hit.doc_version_id),
            "external_id": hit.external_id, "title": hit.title, "version_label": hit.version_label,
            "heading_path": list(hit.heading_path), "chunk_index": hit.chunk_index, "chunk_type": hit.chunk_type,
            "tags": list(hit.tags), "pages": list(hit.metadata.get("pages") or ()), "score": hit.score,
            "vector_score": hit.vector_score, "lexical_score": hit.lexical_score, "rerank_score": hit.rerank_score}
