"""OpenTelemetry spans as seed 002 names them, seen through the SDK's in-memory exporter."""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ragd
from ragd.config import Settings

from .conftest import SAMPLES


def _exporter() -> InMemorySpanExporter:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # the first test to ask installs the SDK provider
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))  # type: ignore[union-attr]
    return exporter


def test_ingest_retrieve_rerank_and_generate_make_spans(settings: Settings, name: str) -> None:
    exporter = _exporter()
    client = ragd.connect(settings=settings.model_copy(update={"cache_ttl_s": 0}))
    try:
        col = client.collection(name)
        col.ingest([SAMPLES])
        col.ask("How many days of parental leave do employees in Germany get?")
    finally:
        client.close()
    spans: dict[str, Any] = {s.name: s for s in exporter.get_finished_spans()}
    assert {"rag.indexer.index_documents", "rag.retriever.retrieve_documents", "rag.reranker.local",
            "rag.generator.extractive"} <= set(spans)
    indexed = spans["rag.indexer.index_documents"].attributes
    assert indexed["rag.collection"] == name and indexed["rag.items"] == 7 and indexed["rag.failed"] == 0
    retrieved = spans["rag.retriever.retrieve_documents"]
    assert retrieved.attributes["rag.rerank"] is True and retrieved.attributes["rag.results"] > 0
    reranked = spans["rag.reranker.local"]
    assert reranked.attributes["rag.pairs"] > 0 and reranked.attributes["rag.reranker_skipped"] is False
    assert reranked.parent.span_id == retrieved.context.span_id  # the rerank happens inside the retrieval
    assert spans["rag.generator.extractive"].attributes["rag.abstained"] is False
