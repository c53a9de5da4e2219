"""One extractor per format, all producing the same Block model. New formats register here."""

from __future__ import annotations

from .base import ExtractOptions, Extractor, Source
from .markdown import MarkdownExtractor
from .records import RecordsExtractor
from .text import TextExtractor

EXTRACTORS: dict[str, Extractor] = {
    "text": TextExtractor(),
    "markdown": MarkdownExtractor(),
    "json": RecordsExtractor(lines=False),
    "jsonl": RecordsExtractor(lines=True),
}

__all__ = ["EXTRACTORS", "ExtractOptions", "Extractor", "Source"]
