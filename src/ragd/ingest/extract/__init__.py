"""One extractor per format, all producing the same Block model. New formats register here."""

from __future__ import annotations

from .base import EXTRACTORS, ExtractOptions, Extractor, Source
from .docx import DocxExtractor
from .epub import EpubExtractor
from .html import HtmlExtractor
from .image import ImageExtractor
from .legacy import LegacyOfficeExtractor
from .mail import EmailExtractor
from .markdown import MarkdownExtractor
from .odf import OdfExtractor
from .outlook import OutlookExtractor
from .pdf import PdfExtractor
from .pptx import PptxExtractor
from .records import RecordsExtractor
from .rtf import RtfExtractor
from .spreadsheets import XlsExtractor, XlsxExtractor
from .tabular import CsvExtractor
from .text import TextExtractor

EXTRACTORS.update({
    "pdf": PdfExtractor(),
    "docx": DocxExtractor(),
    "pptx": PptxExtractor(),
    "doc": LegacyOfficeExtractor("doc", "docx", DocxExtractor()),
    "ppt": LegacyOfficeExtractor("ppt", "pptx", PptxExtractor()),
    "msg": OutlookExtractor(),
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
