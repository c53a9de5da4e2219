"""One extractor per format, all producing the same Block model. New formats register here."""

from __future__ import annotations

from .base import EXTRACTORS, ExtractOptions, Extractor, Source
from .epub import EpubExtractor
from .html import HtmlExtractor
from .image import ImageExtractor
from .mail import EmailExtractor
from .markdown import MarkdownExtractor
from .odf import OdfExtractor
from .office import DocxExtractor, PptxExtractor, XlsExtractor, XlsxExtractor
from .pdf import PdfExtractor
from .records import RecordsExtractor
from .rtf import RtfExtractor
from .tabular import CsvExtractor
from .text import TextExtractor

EXTRACTORS.update({
    "pdf": PdfExtractor(),
    "docx": DocxExtractor(),
    "pptx": PptxExtractor(),
    "xlsx": XlsxExtractor(),
    "xls": XlsExtractor(),
    "odt": OdfExtractor(),
    "ods": OdfExtractor(),
    "odp": OdfExtractor(),
    "epub": EpubExtractor(),
    "rtf": RtfExtractor(),
    "email": EmailExtractor(),
    "image": ImageExtractor(),
    "html": HtmlExtractor(),
    "csv": CsvExtractor(),
    "text": TextExtractor(),
    "markdown": MarkdownExtractor(),
    "json": RecordsExtractor(lines=False),
    "jsonl": RecordsExtractor(lines=True),
})

__all__ = ["EXTRACTORS", "ExtractOptions", "Extractor", "Source"]
