"""A LangChain retriever over a ragd collection (`pip install 'ragd[langchain]'`):

    retriever = RagdRetriever(collection=ragd.connect().collection("docs"), k=8)
    docs = retriever.invoke("parental leave in Germany", filters={"tags_any": ["hr"]})

Each result is a `langchain_core` `Document` whose `id` is the chunk id and whose metadata holds ragd's ids,
scores, pages and heading path (`ragd.integrations.metadata_of`). `k`, `filters` and plan options
(`search_options`: fusion, rerank...) are set on the retriever and may be given per call; `ainvoke` runs the
search in a thread, so an event loop is never blocked."""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field

from . import Searchable, metadata_of


class RagdRetriever(BaseRetriever):
    """ragd's hybrid search (vector + BM25, reranked when configured) as a LangChain retriever."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    collection: Any  # a Searchable: Collection or RemoteCollection
    k: int = Field(default=8, ge=1, le=1000)
    filters: dict[str, Any] | None = None
    search_options: dict[str, Any] = Field(default_factory=dict)

    def _search(self, query: str, k: int | None, filters: dict[str, Any] | None, options: dict[str, Any]
                ) -> list[Document]:
        found: Searchable = self.collection
        hits = found.search(query, k=k or self.k, filters=self.filters if filters is None else filters,
                            **{**self.search_options, **options})
        return [Document(page_content=h.content, id=str(h.chunk_id), metadata=metadata_of(h)) for h in hits]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                k: int | None = None, filters: dict[str, Any] | None = None,
                                **options: Any) -> list[Document]:
        return self._search(query, k, filters, options)

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
                                       k: int | None = None, filters: dict[str, Any] | None = None,
                                       **options: Any) -> list[Document]:
        return await asyncio.to_thread(self._search, query, k, filters, options)
