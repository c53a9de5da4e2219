"""ragd's LangChain and LlamaIndex retrievers with the real frameworks, each inside a minimal chain or query engine
of its own with the framework's own fake LLM, over a collection in process and one on a real `ragd serve`."""

from __future__ import annotations

import asyncio
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest

import ragd
from ragd.engine import Collection
from ragd.errors import InvalidRequest
from ragd.remote import RemoteRagd

from .conftest import DATA, SAMPLES, run_cli, serving

QUESTION = "How many days of parental leave do employees in Germany get?"
REPORT = DATA / "docs" / "synthetic" / "report.pdf"


@pytest.fixture(scope="module")
def collection(client: ragd.Ragd, tmp_path_factory: pytest.TempPathFactory) -> Collection:
    folder = tmp_path_factory.mktemp("integrations")
    for path in sorted(SAMPLES.iterdir()):
        shutil.copy(path, folder / path.name)
    shutil.copy(REPORT, folder / REPORT.name)
    col = client.collection("integ-" + uuid.uuid4().hex[:8])
    report = col.ingest(folder, tags=["hr"])
    assert not report.failed
    return col


def test_the_langchain_retriever_feeds_a_chain(collection: Collection) -> None:
    from langchain_core.documents import Document
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnableLambda, RunnablePassthrough

    from ragd.integrations.langchain import RagdRetriever

    retriever = RagdRetriever(collection=collection, k=4)
    prompts: list[str] = []

    def seen(value: Any) -> Any:
        prompts.append(value.to_string())
        return value

    def context(docs: list[Document]) -> str:
        return "\n\n".join(f"[{d.id}] {d.page_content}" for d in docs)

    chain = ({"context": retriever | context, "question": RunnablePassthrough()}
             | ChatPromptTemplate.from_template("Answer from the context.\n{context}\n\nQuestion: {question}")
             | RunnableLambda(seen) | FakeListChatModel(responses=["Germany: 98 days."]) | StrOutputParser())
    assert chain.invoke(QUESTION) == "Germany: 98 days."
    docs = retriever.invoke(QUESTION)
    hits = collection.search(QUESTION, k=4)
    assert [d.id for d in docs] == [str(h.chunk_id) for h in hits]
    assert f"[{hits[0].chunk_id}] {hits[0].content}" in prompts[0]
    top = docs[0].metadata
    assert top["doc_id"] == str(hits[0].doc_id) and top["score"] == hits[0].score
    assert top["heading_path"] == list(hits[0].heading_path) and top["external_id"] == hits[0].external_id

    # filters per call, async, pages of a PDF
    assert retriever.invoke(QUESTION, filters={"tags_any": ["nope"]}) == []
    from_pdf = asyncio.run(retriever.ainvoke("revenue by region", filters={"external_ids": [_pdf_id(collection)]}))
    assert from_pdf and all(d.metadata["pages"] for d in from_pdf)


def test_the_llamaindex_retriever_feeds_a_query_engine(collection: Collection) -> None:
    from llama_index.core import Settings as LlamaSettings
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

    from ragd.integrations.llamaindex import RagdRetriever

    LlamaSettings.tokenizer = str.split  # its default tokenizer's encodings would be downloaded: offline here
    retriever = RagdRetriever(collection, k=4)
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    response = engine.query(QUESTION)
    hits = collection.search(QUESTION, k=4)
    assert [n.node.node_id for n in response.source_nodes] == [str(h.chunk_id) for h in hits]
    assert [n.score for n in response.source_nodes] == [h.score for h in hits]
    top = response.source_nodes[0].node
    assert top.metadata["doc_version_id"] == str(hits[0].doc_version_id)
    assert "rerank_score" not in top.get_content(metadata_mode="llm")  # scores stay out of the prompt

    pdf = RagdRetriever(collection, k=3, filters={"external_ids": [_pdf_id(collection)]})
    nodes = asyncio.run(pdf.aretrieve("revenue by region"))
    assert nodes and all(n.node.metadata["pages"] for n in nodes)
    equal = MetadataFilters(filters=[MetadataFilter(key="no_such_key", value="x")])
    assert RagdRetriever(collection, filters=equal).retrieve(QUESTION) == []
    with pytest.raises(InvalidRequest, match="equality"):
        RagdRetriever(collection, filters=MetadataFilters(filters=[
            MetadataFilter(key="year", value=2020, operator=FilterOperator.GT)]))


def test_the_retrievers_work_over_a_remote_collection(cli_env: dict[str, str], name: str) -> None:
    from ragd.integrations.langchain import RagdRetriever as LangChainRetriever
    from ragd.integrations.llamaindex import RagdRetriever as LlamaIndexRetriever

    env = {**cli_env, "RAGD_RERANKER": "none", "RAGD_RATE_LIMIT_PER_MINUTE": "0"}
    key = run_cli(["keys", "create", "--tenant", "integ-" + uuid.uuid4().hex[:6]], env).stdout.strip().splitlines()[-1]
    with serving(env) as server, RemoteRagd(server["url"], key) as remote:
        col = remote.collection(name)
        col.ingest(SAMPLES)
        docs = LangChainRetriever(collection=col, k=3).invoke(QUESTION)
        nodes = LlamaIndexRetriever(col, k=3).retrieve(QUESTION)
        hits = col.search(QUESTION, k=3)
    assert [d.id for d in docs] == [n.node.node_id for n in nodes] == [str(h.chunk_id) for h in hits]
    assert "parental" in docs[0].page_content.lower() or "germany" in docs[0].page_content.lower()


def _pdf_id(col: Collection) -> str:
    return next(d["external_id"] for d in col.documents() if str(d["external_id"]).endswith(Path(REPORT).name))
