"""A page of an original file as a PNG, with a chunk's boxes and its quoted sentences drawn on it.

A chunk's boxes come from extraction: (x0, top, x1, bottom) from the page's top left, in PDF points for PDFs
(scanned pages too: OCR's pixels are scaled back to points) and in pixels for image files. Quoted sentences
are found in the PDF's own text layer (pdfium's search) and marked where they fall inside the chunk's boxes;
a scan has no text layer, so only its boxes are drawn.

A page drawn for a request is drawn in a worker process (`ingest.worker.render_isolated`), stopped past
RAGD_RENDER_TIMEOUT_S: pdfium is native code that no thread can interrupt (its text search with an empty needle
never returns), so the bound is a process that can be killed, and the needles are checked before they reach it.
"""

from __future__ import annotations

import io
import threading
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pypdfium2 as pdfium
from PIL import Image, ImageDraw

from .errors import InvalidRequest, NotFound

WIDTH = 1000  # pixels of a rendered page's width (scaled down from larger images, never up past 3x a PDF's)
BOX_FILL = (255, 200, 0, 70)
BOX_LINE = (230, 120, 0, 255)
QUOTE_FILL = (255, 230, 0, 140)
_PDFIUM = threading.Lock()  # pdfium is not thread-safe
_WINDOW = 6  # words per piece a quote is looked for in when it is not found whole (a line break, a hyphen)


@dataclass(frozen=True)
class Rendered:
    png: bytes
    pages: int
    scale: float  # pixels per box unit
    boxes: tuple[tuple[int, int, int, int], ...]  # the chunk's boxes as drawn, in the image's pixels
    quotes: tuple[tuple[int, int, int, int], ...]  # the quoted text's marks, in pixels


def render_page(data: bytes, media_type: str, page: int, boxes: Sequence[Sequence[float]] = (),
                quotes: Sequence[str] = ()) -> Rendered:
    """Page `page` (1-based) of a PDF or image file with `boxes` highlighted and `quotes` marked inside them."""
    if media_type == "application/pdf":
        return _pdf_page(data, page, boxes, quotes)
    if media_type.startswith("image/"):
        if page != 1:
            raise NotFound(f"page {page} does not exist: an image file has one page")
        return _image_page(data, boxes)
    raise InvalidRequest(f"page images are drawn for PDF and image files, not {media_type}: "
                         "download the original from /source or read the chunk's text")




def needle(quote: str) -> str:
    """A quote as pdfium's text search may be given it: its words joined by single spaces, without control,
    format or unassigned characters (a NUL ends pdfium's string early, and an empty needle loops forever)."""
    kept = "".join(c for c in quote if unicodedata.category(c) not in ("Cc", "Cf", "Cs", "Co", "Cn") or c in "\t\n")
    return " ".join(kept.split())


def _open(data: bytes) -> pdfium.PdfDocument:
    try:
        return pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        raise InvalidRequest(f"the original PDF cannot be opened for rendering: {exc}") from None


def _pdf_page(data: bytes, number: int, boxes: Sequence[Sequence[float]], quotes: Sequence[str]) -> Rendered:
    with _PDFIUM:
        pdf = _open(data)
        try:
            pages = len(pdf)
            if not 1 <= number <= pages:
                raise NotFound(f"page {number} does not exist: the document has {pages} page(s)")
            page = pdf[number - 1]
            width, height = page.get_size()
            scale = min(WIDTH / max(width, 1.0), 3.0)
            image = page.render(scale=scale).to_pil().convert("RGBA")
            marks = _find_quotes(page, height, quotes, boxes) if quotes else []
        finally:
            pdf.close()
    return _draw(image, pages, scale, boxes, marks)


def _find_quotes(page: pdfium.PdfPage, height: float, quotes: Sequence[str],
                 boxes: Sequence[Sequence[float]]) -> list[tuple[float, float, float, float]]:
    """Rectangles (x0, top, x1, bottom; points) of the quotes' text inside the boxes (anywhere without boxes)."""
    text = page.get_textpage()
    found: list[tuple[float, float, float, float]] = []
    try:
        for quote in quotes:
            whole = needle(quote)
            if not whole:
                continue
            words = whole.split()
            rects = _search(text, height, whole, boxes)
            if not rects:  # not whole (a line break, a hyphen between its words): in pieces
                pieces = [" ".join(words[i:i + _WINDOW]) for i in range(0, len(words), _WINDOW)]
                rects = [r for piece in pieces if len(piece) >= 12 for r in _search(text, height, piece, boxes)]
            found += rects
    finally:
        text.close()
    return found


def _search(text: pdfium.PdfTextPage, height: float, needle: str,
            boxes: Sequence[Sequence[float]]) -> list[tuple[float, float, float, float]]:
    searcher = text.search(needle, match_case=True)
    rects: list[tuple[float, float, float, float]] = []
    try:
        while (hit := searcher.get_next()) is not None:
            start, count = hit
            n = text.count_rects(start, count)
            these = []
            for i in range(n):
                left, bottom, right, top = text.get_rect(i)
                these.append((left, height - top, right, height - bottom))
            if not boxes or all(any(_inside(r, b) for b in boxes) for r in these):
                rects += these
    finally:
        searcher.close()
    return rects


def _inside(rect: Sequence[float], box: Sequence[float], slack: float = 3.0) -> bool:
    cx, cy = (rect[0] + rect[2]) / 2, (rect[1] + rect[3]) / 2
    return box[0] - slack <= cx <= box[2] + slack and box[1] - slack <= cy <= box[3] + slack


def _image_page(data: bytes, boxes: Sequence[Sequence[float]]) -> Rendered:
    try:
        with Image.open(io.BytesIO(data)) as opened:
            opened.seek(0)
            image = opened.convert("RGBA")
    except Exception as exc:  # PIL raises many kinds for a bad image
        raise InvalidRequest(f"the original image cannot be opened: {exc}") from None
    scale = min(WIDTH / max(image.width, 1), 1.0)
    if scale < 1.0:
        image = image.resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))),
                             Image.Resampling.LANCZOS)
    return _draw(image, 1, scale, boxes, [])


def _pixels(box: Sequence[float], scale: float) -> tuple[int, int, int, int]:
    return (round(box[0] * scale), round(box[1] * scale), round(box[2] * scale), round(box[3] * scale))


def _draw(image: Image.Image, pages: int, scale: float, boxes: Sequence[Sequence[float]],
          quotes: Sequence[Sequence[float]]) -> Rendered:
    overlay = Image.new("RGBA", image.size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(overlay)
    drawn = tuple(_pixels(b, scale) for b in boxes)
    marked = tuple(_pixels(q, scale) for q in quotes)
    for x0, y0, x1, y1 in drawn:
        draw.rectangle((x0 - 3, y0 - 3, x1 + 3, y1 + 3), fill=BOX_FILL, outline=BOX_LINE, width=3)
    for x0, y0, x1, y1 in marked:
        draw.rectangle((x0, y0, x1, y1), fill=QUOTE_FILL)
    out = io.BytesIO()
    Image.alpha_composite(image, overlay).convert("RGB").save(out, format="PNG", optimize=False, compress_level=6)
    return Rendered(out.getvalue(), pages, scale, drawn, marked)


class PageCache:
    """Rendered pages, least recently used dropped past `size` entries or `max_bytes` of PNG."""

    def __init__(self, size: int = 256, max_bytes: int = 128 * 1024 * 1024):
        self.size, self.max_bytes = size, max_bytes
        self.entries: dict[Any, Rendered] = {}
        self.bytes = 0
        self.lock = threading.Lock()

    def get(self, key: Any) -> Rendered | None:
        with self.lock:
            found = self.entries.pop(key, None)
            if found is not None:
                self.entries[key] = found  # now the most recent
            return found

    def put(self, key: Any, value: Rendered) -> None:
        with self.lock:
            old = self.entries.pop(key, None)
            self.bytes -= len(old.png) if old else 0
            self.entries[key] = value
            self.bytes += len(value.png)
            while self.entries and (len(self.entries) > self.size or self.bytes > self.max_bytes):
                dropped = self.entries.pop(next(iter(self.entries)))
                self.bytes -= len(dropped.png)


PAGES = PageCache()
