"""OpenTelemetry spans, named as seed 002 names them: `rag.indexer.index_documents`,
`rag.retriever.retrieve_documents`, `rag.reranker.<provider>` and `rag.generator.<provider>`, with counts and
settings as attributes. The API is always importable (the `mcp` SDK depends on it) and costs nothing until an
SDK tracer provider is installed: `pip install 'ragd[otel]'` and configure an exporter as usual."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

try:
    from opentelemetry import trace
except ImportError:  # pragma: no cover - a dependency of mcp, so normally present
    trace = None  # type: ignore[assignment]


@contextmanager
def span(name: str, **attributes: Any) -> Iterator[Any]:
    """A span (None without OpenTelemetry); attributes that are None are left out."""
    if trace is None:
        yield None
        return
    tracer = trace.get_tracer("ragd")
    with tracer.start_as_current_span(name, attributes={k: v for k, v in attributes.items()
                                                         if v is not None}) as current:
        yield current


def annotate(current: Any, **attributes: Any) -> None:
    """Attributes known only at the end of the work (result counts, whether a step was skipped)."""
    if current is not None:
        for key, value in attributes.items():
            if value is not None:
                current.set_attribute(key, value)


def json_lines(logger_name: str, where: str) -> None:
    """Send a logger's lines (one JSON object each: ragd.query, ragd.request) to stdout or stderr, or nowhere
    ("off"); once per process and logger, however often it is asked."""
    logger = logging.getLogger(logger_name)
    if where == "off" or any(getattr(h, "ragd_lines", False) for h in logger.handlers):
        return
    handler = logging.StreamHandler(sys.stdout if where == "stdout" else sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.ragd_lines = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def log_timestamp() -> str:
    """Now, as the JSON log lines write it: UTC, milliseconds, a Z."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
