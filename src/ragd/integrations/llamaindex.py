"""A LlamaIndex retriever over a ragd collection (`pip install 'ragd[llamaindex]'`):

    retriever = RagdRetriever(ragd.connect().collection("docs"), k=8, filters={"tags_any": ["hr"]})
    engine = RetrieverQueryEngine.from_args(retriever, llm=...)

Each result is a `NodeWithScore` over a `TextNode` whose id is the chunk id, whose score is ragd's final score and
whose metadata holds ragd's ids, scores, pages and heading path (`ragd.integrations.metadata_of`). Filters are
ragd's (tags_any, tags_all, metadata, doc_ids, external_ids, effective_from/to) or LlamaIndex `MetadataFilters` of
equality conditions joined by AND (ragd's metadata equality). `aretrieve` runs the search in a thread."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.core.vector_stores.types import FilterCondition, FilterOperator, MetadataFilters

from ..errors import InvalidRequest
from . import Searchable, metadata_of

SHOWN = frozenset({"title", "external_id", "heading_path", "pages"})  # the metadata a prompt shows with a node


def ragd_filters(filters: Mapping[str, Any] | MetadataFilters | None) -> dict[str, Any] | None:
    """ragd's filters from its own form or from LlamaIndex's equality MetadataFilters."""
    if not isinstance(filters, MetadataFilters):
        return dict(filters) if filters else None
    if filters.condition not in (None, FilterCondition.AND):
        raise InvalidRequest("ragd's retriever takes MetadataFilters joined by AND only")
    equal = {}
    for f in filters.filters:
        if isinstance(f, MetadataFilters) or f.operator != FilterOperator.EQ:
            raise InvalidRequest(f"ragd's retriever takes equality metadata filters only, not {f!r}")
        equal[f.key] = f.value
    return {"metadata": equal}


class RagdRetriever(BaseRetriever):
    """ragd's hybrid search (vector + BM25, reranked when configured) as a LlamaIndex retriever."""

    def __init__(self, collection: Searchable, *, k: int = 8,
                 filters: Mapping[str, Any] | MetadataFilters | None = None, **search_options: Any):
        super().__init__()
        self.collection, self.k = collection, k
        self.filters = ragd_filters(filters)
        self.search_options = search_options

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = self.collection.search(query_bundle.query_str, k=self.k, filters=self.filters, **self.search_options)
        nodes = []
        for h in hits:
            metadata = metadata_of(h)
            hidden = sorted(set(metadata) - SHOWN)  # ids and scores: kept on the node, not put in the prompt
            nodes.append(NodeWithScore(node=TextNode(id_=str(h.chunk_id), text=h.content, metadata=metadata,
                                                     excluded_llm_metadata_keys=hidden,
                                                     excluded_embed_metadata_keys=sorted(metadata)),
                                       score=h.score))
        return nodes

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return await asyncio.to_thread(self._retrieve, query_bundle)
