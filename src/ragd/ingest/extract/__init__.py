"""One extractor per format, all producing the same Block model. New formats register here."""

from __future__ import annotations

from .base import ExtractOptions, Extractor, Source
from .html import HtmlExtractor
from .image import ImageExtractor
from .markdown import MarkdownExtractor
from .office import DocxExtractor, PptxExtractor, XlsxExtractor
from .pdf import PdfExtractor
from .records import RecordsExtractor
from .tabular import CsvExtractor
from .text import TextExtractor

EXTRACTORS: dict[str, Extractor] = {
    "pdf": PdfExtractor(),
    "docx": DocxExtractor(),
    "pptx": PptxExtractor(),
    "xlsx": XlsxExtractor(),
    "image": ImageExtractor(),
    "html": HtmlExtractor(),
    "csv": CsvExtractor(),
    "text": TextExtractor(),
    "markdown": MarkdownExtractor(),
    "json": RecordsExtractor(lines=False),
    "jsonl": RecordsExtractor(lines=True),
}

__all__ = ["EXTRACTORS", "ExtractOptions", "Extractor", "Source"]
