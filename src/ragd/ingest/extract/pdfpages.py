"""pdfplumber pages whose characters are read faster, with the same result.

pdfplumber turns every pdfminer character into a dict by passing each of its attributes through `resolve_all`
(made for PDF object references, which a character's numbers and names never are): on dense text pages that
is 30-45% of the extraction time. `Page.process_object` here builds a character's dict directly and hands every
other object to pdfplumber unchanged; `test_fast_pages_read_exactly_what_pdfplumber_reads` compares the two on
real PDFs, so a pdfplumber release that changes its dicts is caught."""

from __future__ import annotations

from functools import lru_cache
from typing import Any
from unicodedata import normalize as normalize_unicode

from pdfminer.layout import LTChar, LTItem
from pdfminer.pdfpage import PDFPage
from pdfplumber.page import ALL_ATTRS, Page, fix_fontname_bytes
from pdfplumber.pdf import PDF
from pdfplumber.utils.exceptions import PdfminerException
from pdfplumber.utils.pdfinternals import resolve_all, resolve_and_decode

_PLAIN = frozenset({int, float, str, bool, type(None)})


@lru_cache(maxsize=256)
def _decoded(name: Any) -> str:
    """A colour space's name, decoded once (pages name a handful; the cache is bounded for hostile files)."""
    return str(resolve_and_decode(name))


class FastPage(Page):
    def process_object(self, obj: LTItem) -> dict[str, Any]:
        if type(obj) is not LTChar:
            return super().process_object(obj)
        # what resolve_all returns unchanged (or an equal copy of): a number, a string, None, a character's
        # matrix (six numbers pdfminer computed); tested inline, a function call per attribute cost a tenth
        attr = {k: v if type(v) in _PLAIN or k == "matrix" else resolve_all(v)
                for k, v in obj.__dict__.items() if k in ALL_ATTRS}
        attr["object_type"] = "char"
        attr["page_number"] = self.page_number
        for cs in ("ncs", "scs"):
            if hasattr(obj, cs):
                attr[cs] = _decoded(getattr(obj, cs).name)
        text = obj.get_text()
        attr["text"] = normalize_unicode(self.pdf.unicode_norm, text) if self.pdf.unicode_norm is not None else text
        gs = obj.graphicstate
        attr["stroking_color"] = gs.scolor if isinstance(gs.scolor, tuple) else (gs.scolor,)
        attr["non_stroking_color"] = gs.ncolor if isinstance(gs.ncolor, tuple) else (gs.ncolor,)
        if isinstance(attr["fontname"], bytes):
            attr["fontname"] = fix_fontname_bytes(attr["fontname"])
        mb_x0, mb_top = self.mediabox[:2]
        attr["top"] = (self.height - attr["y1"]) + mb_top
        attr["bottom"] = (self.height - attr["y0"]) + mb_top
        attr["doctop"] = self.initial_doctop + attr["top"]
        if mb_x0 != 0:
            attr["x0"] = attr["x0"] + mb_x0
            attr["x1"] = attr["x1"] + mb_x0
        return attr


class FastPDF(PDF):
    """pdfplumber's PDF whose pages are FastPage."""

    @property
    def pages(self) -> list[Page]:
        cached: list[Page] | None = getattr(self, "_pages", None)
        if cached is not None:
            return cached
        doctop: float = 0
        wanted = self.pages_to_parse
        pages: list[Page] = []
        try:
            for i, page in enumerate(PDFPage.create_pages(self.doc)):
                if wanted is not None and i + 1 not in wanted:
                    continue
                p = FastPage(self, page, page_number=i + 1, initial_doctop=doctop)
                pages.append(p)
                doctop += p.height
        except Exception as exc:
            raise PdfminerException(exc) from exc
        self._pages = pages
        return pages
