"""PDF: pdfplumber for the text layer (words with font size and weight: pdfwords.py; ruled tables: ruled.py), the
layout modules for reading order, paragraphs, borderless tables and headings; pages without a text layer are
rendered with pypdfium2 and go through OCR. Pages are read in ranges (possibly by several workers) and spooled,
then laid out as one document."""

from __future__ import annotations

import io
import pickle
import re
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from operator import methodcaller
from typing import Any

from ...errors import CorruptDocument, EmptyDocument, EncryptedDocument, IngestError
from ...types import Block, ExtractedDocument
from ..normalize import normalize_text
from .base import ExtractOptions, Source, collector_paused, single_document
from .borderless import borderless_tables
from .geometry import Box, PageText, lines_to_boxes, reading_order
from .layout import finish, leaf_blocks
from .ocr import ocr_engine, to_rgb
from .pdfwords import TEXT, TOP, X0, attach_scripts, visual_to_logical, word_box
from .ruled import (
    MIN_COLUMN_RULES,
    Middle,
    caption_and_note,
    cell_texts,
    closing_edges,
    column_rules,
    cuts_words,
    finer,
    inset_shading,
    middles_of,
    rotated_direction,
    ruled_grid,
    table_block_of,
)

MIN_TEXT_CHARS = 20  # fewer characters than this on a page with an image: treat the page as a scan
# a page with more characters than this share (and count) in fonts without a Unicode mapping is read by OCR;
# a few unmapped glyphs are symbol-font bullets
MAX_UNMAPPED_SHARE, MAX_UNMAPPED = 0.05, 50
MIN_OUTLINE_CURVES = 50  # a page with no text but this many curves is taken for text drawn as outlines
OCR_DPI = 300
_DIGITS = re.compile(r"\d+")


MIN_DOUBLED = 0.02  # share of a page's characters drawn twice at one place before the page is deduplicated


def _once(page: Any) -> Any:
    """The page with text drawn twice, a little offset (a fake bold), read once. pdfplumber's dedupe_chars is
    slow (a sort per character group), so it runs only on pages where a quick count finds doubled glyphs."""
    chars = page.chars
    # repeats: characters with the text and whole-point place of one before (iterated in C: a Python loop over a
    # page's characters cost a twentieth of it)
    places = zip(map(TEXT, chars), map(round, map(X0, chars)), map(round, map(TOP, chars)))
    doubled = len(chars) - len(set(places))
    return page.dedupe_chars() if doubled > MIN_DOUBLED * len(chars) else page


def _turn(page: Any) -> int:
    """How the page's text is set: 1 when most of it runs down the page (a table turned clockwise), -1 when it
    runs up (anticlockwise), 0 when it reads across."""
    across = down = up = 0
    for c in page.chars:
        if c["upright"]:
            across += 1
        elif c["matrix"][1] < 0:
            down += 1
        else:
            up += 1
    if max(down, up) <= across:
        return 0
    return 1 if down > up else -1


def upright(page: Any) -> Any:
    """The page turned so that most of its text reads left to right (a table set sideways comes out as a table,
    not as scattered letters or a transposed grid); the page itself when it already does. Positions on a turned
    page are in the turned frame."""
    turn = _turn(page)
    if turn == 0:
        return page
    from pdfplumber.page import DerivedPage

    width, height = float(page.width), float(page.height)

    def point(x: float, y: float) -> tuple[float, float]:
        return (y, width - x) if turn == 1 else (height - y, x)

    def moved(obj: dict[str, Any]) -> dict[str, Any]:
        x0, top = point(obj["x0"], obj["bottom"] if turn == 1 else obj["top"])
        x1, bottom = point(obj["x1"], obj["top"] if turn == 1 else obj["bottom"])
        x0, x1, top, bottom = min(x0, x1), max(x0, x1), min(top, bottom), max(top, bottom)
        out = {**obj, "x0": x0, "x1": x1, "top": top, "bottom": bottom, "width": x1 - x0, "height": bottom - top,
               "y0": width - bottom, "y1": width - top, "doctop": page.initial_doctop + top}
        if "upright" in obj:
            out["upright"] = not obj["upright"]
            out["size"] = bottom - top  # pdfminer gives a turned glyph's advance as its size
        if "pts" in obj:
            out["pts"] = [point(x, y) for x, y in obj["pts"]]
        return out

    class Turned(DerivedPage):
        def __init__(self) -> None:
            self.bbox = (0.0, 0.0, height, width)
            super().__init__(page)
            self._objects = {kind: [moved(o) for o in objs] for kind, objs in page.objects.items()}

        @property
        def objects(self) -> dict[str, list[dict[str, Any]]]:
            return self._objects

    return Turned()


def _text_page(page: Any) -> list[Box]:
    from .pdfpages import extract_words  # with pdfplumber, loaded when a PDF is read

    tables = []
    inset = inset_shading(page)
    ruled = page.filter(lambda obj: id(obj) not in inset) if inset else page
    words = extract_words(page, extra_attrs=["fontname", "size"], use_text_flow=False)
    found = ruled.find_tables({"explicit_vertical_lines": closing_edges(ruled)})
    verticals = [e for e in ruled.edges if e["orientation"] == "v"] if found else []
    middles: list[Middle] | None = None  # of the characters, worked out for the first grid read
    for table in found:
        if column_rules(table, verticals) < MIN_COLUMN_RULES or cuts_words(table, words):
            continue  # not a grid: its columns are whitespace, which the borderless tables read
        middles = middles_of(ruled.chars) if middles is None else middles
        raw = cell_texts(table, middles, **rotated_direction(page, table.bbox))
        x0, top, x1, bottom = table.bbox
        filled = [i for i, r in enumerate(raw) if any(r)]
        caption, note = caption_and_note(raw)
        if caption or note:  # the box shrinks to leave their words to the text around the table
            top = table.rows[filled[0] + 1].bbox[1] if caption else top
            bottom = table.rows[filled[-1]].bbox[1] if note else bottom
            raw = [r if filled[0] < i < filled[-1] or (i == filled[0] and not caption)
                   or (i == filled[-1] and not note) else [None] * len(r) for i, r in enumerate(raw)]
        block = table_block_of(*ruled_grid(table, raw, words))
        if block is not None:
            block = finer(block, (x0, top, x1, bottom), words)
            tables.append(Box(text="", x0=x0, top=top, x1=x1, bottom=bottom, size=0.0, table=block))

    def inside(w: dict[str, Any]) -> bool:
        cx, cy = (w["x0"] + w["x1"]) / 2, (w["top"] + w["bottom"]) / 2
        return any(t.x0 <= cx <= t.x1 and t.top <= cy <= t.bottom for t in tables)

    outside = attach_scripts([
        word_box(w) for w in words
        if not inside(w) and w["text"].count("(cid:") < 2  # two unmapped glyphs or more: unreadable, not text
    ])
    boxes = borderless_tables([replace(b, text=visual_to_logical(b.text)) for b in lines_to_boxes(outside)])
    boxes = [replace(b, words=()) if b.words else b for b in boxes]  # (needed by the tables only: not spooled)
    # a table's box carries the size of the text around it, so paragraphs after it are not mistaken for headings
    sizes = [b.size for b in boxes]
    body = Counter(round(s, 1) for s in sizes).most_common(1)[0][0] if sizes else 10.0
    return boxes + [Box(t.text, t.x0, t.top, t.x1, t.bottom, body, table=t.table) for t in tables]


def _ocr_page(data: bytes, index: int) -> list[Box]:
    import pypdfium2

    pdf = pypdfium2.PdfDocument(data)
    try:
        scale = OCR_DPI / 72
        image = pdf[index].render(scale=scale).to_pil()
    finally:
        pdf.close()
    boxes = ocr_engine().read(to_rgb(image))
    return [Box(b.text, b.x0 / scale, b.top / scale, b.x1 / scale, b.bottom / scale, b.size / scale)
            for b in boxes]


def _margin_key(b: Box, height: float) -> str | None:
    """The text (digits ignored) of a box in the page's top or bottom 8%, a running header's candidate; None for
    any other box."""
    return _DIGITS.sub("#", b.text) if b.table is None and _margin(b, height) else None


def _edges(boxes: list[Box]) -> list[Box]:
    """The page's first and last lines of text (outside tables): where a page number or a running title is when
    the page sets it higher than the margin (EDGAR's converters draw page numbers a tenth up the page)."""
    free = [b for b in boxes if b.table is None and b.text.strip()]
    if not free:
        return []
    return [b for b in (min(free, key=lambda b: b.top), max(free, key=lambda b: b.bottom))
            if len(b.text) <= EDGE_CHARS]


def _edge_key(b: Box) -> str:
    """A first or last line as furniture is recognised: a short one ("12", "F-12", "Page 12 of 80") with its
    numbers masked, a longer one as written (a sentence that only differs in its figures is text)."""
    text = b.text.strip()
    return "edge:" + (_DIGITS.sub("#", text) if len(text.split()) <= EDGE_WORDS else text)


def _margin_keys(boxes: list[Box], height: float) -> set[str]:
    """A page's running-header candidates: the texts in its top and bottom margins, and its first and last lines."""
    return {k for b in boxes if (k := _margin_key(b, height)) is not None} | {_edge_key(b) for b in _edges(boxes)}


def _running(keys: list[set[str]]) -> set[str]:
    """Running headers and footers: the same text (digits ignored) in the top or bottom 8% of at least half of
    the pages, and of three pages or more."""
    if len(keys) < 3:
        return set()
    seen: Counter[str] = Counter(k for page in keys for k in page)
    return {k for k, n in seen.items() if n >= 3 and n * 2 >= len(keys)}


def _strip(boxes: list[Box], height: float, running: set[str]) -> list[Box]:
    edges = {id(b) for b in _edges(boxes) if _edge_key(b) in running}
    return [b for b in boxes if _margin_key(b, height) not in running and id(b) not in edges]


def _margin(b: Box, height: float) -> bool:
    return b.bottom < 0.08 * height or b.top > 0.92 * height


EDGE_CHARS = 80  # a page's first or last line longer than this is text, not furniture
EDGE_WORDS = 4  # a first or last line of at most this many words is compared with its numbers masked
SPOOL_BYTES = 32 * 1024 * 1024  # pages' boxes held in memory up to this, then on disk


class PageSpool:
    """Each page's boxes, written as the page is read and read back in order: a long document holds one
    page's layout at a time, not every page's (about 0.07 MB a page of dense text), past `max_bytes` on disk."""

    def __init__(self, max_bytes: int = SPOOL_BYTES) -> None:
        self._file = tempfile.SpooledTemporaryFile(max_size=max_bytes)  # noqa: SIM115 (closed by __exit__)
        self._max_bytes = max_bytes
        self._count = 0

    def __enter__(self) -> PageSpool:
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()

    def __len__(self) -> int:
        return self._count

    @property
    def on_disk(self) -> bool:
        """Past max_bytes: SpooledTemporaryFile moves to a file as soon as it holds more."""
        return self._file.tell() > self._max_bytes

    def append(self, boxes: list[Box]) -> None:
        pickle.dump(boxes, self._file, protocol=pickle.HIGHEST_PROTOCOL)
        self._count += 1

    def to_bytes(self) -> bytes:
        """The spooled pages as one string of bytes, to hand to another process (`from_bytes` there)."""
        self._file.seek(0)
        data = self._file.read()
        self._file.seek(0, io.SEEK_END)
        return data

    @classmethod
    def from_bytes(cls, parts: Sequence[tuple[int, bytes]], max_bytes: int = SPOOL_BYTES) -> PageSpool:
        """A spool of the pages of other spools' `to_bytes`, given as (page count, bytes), in order."""
        spool = cls(max_bytes)
        for count, data in parts:
            spool._file.write(data)
            spool._count += count
        return spool

    def __iter__(self) -> Iterator[list[Box]]:
        self._file.seek(0)
        for _ in range(self._count):
            yield pickle.load(self._file)  # our own pickles, written above in this process
        self._file.seek(0, io.SEEK_END)


@dataclass
class PagesRead:
    """Pages of a PDF as read, before layout (their boxes are in a PageSpool): each page's height and margin
    texts (running header candidates), the pages read by OCR, warnings, and the title from the metadata."""

    heights: list[float] = field(default_factory=list)
    margins: list[set[str]] = field(default_factory=list)
    ocr_pages: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    title: str | None = None

    def extend(self, later: PagesRead) -> None:
        """Add the pages read after these (the next range of the same document)."""
        self.heights += later.heights
        self.margins += later.margins
        self.ocr_pages += later.ocr_pages
        self.warnings += later.warnings
        self.title = self.title or later.title


def _open(source: Source) -> tuple[Any, list[Any]]:
    from pdfplumber.utils.exceptions import PdfminerException

    from .pdfpages import FastPDF

    try:
        pdf = FastPDF.open_bytes(source.data)
        pages = pdf.pages
    except PdfminerException as exc:
        raise _open_error(source, exc) from exc
    except Exception as exc:  # pdfminer raises a zoo of types on damaged files
        raise CorruptDocument(f"{source.path.name}: damaged PDF ({type(exc).__name__}: {exc})") from exc
    if not pages:
        pdf.close()
        raise EmptyDocument(f"{source.path.name} has no pages")
    return pdf, pages


def page_count(source: Source) -> int:
    """How many pages the PDF has (as read_pages numbers them); an IngestError when it cannot be opened."""
    pdf, pages = _open(source)
    with pdf:
        return len(pages)


def read_pages(source: Source, spool: PageSpool, start: int = 0, stop: int | None = None) -> PagesRead:
    """Read pages start..stop (0-based, stop excluded; all by default), their boxes appended to the spool.
    Each page is read on its own, so ranges read apart and joined in order equal the whole read at once."""
    from pdfplumber.utils.exceptions import PdfminerException

    from .pdfpages import PageTooComplex

    pdf, pages = _open(source)
    read = PagesRead()
    with pdf:
        try:
            for index in range(start, len(pages) if stop is None else min(stop, len(pages))):
                page = pages[index]
                with collector_paused():  # a page's objects live until it is read
                    try:
                        boxes, ocr, warning = _read_page(source.data, index, page)
                    except PageTooComplex as exc:
                        boxes, ocr, warning = [], False, str(exc)
                    page.flush_cache()  # its objects go before the collector runs again
                read.ocr_pages.extend([index + 1] if ocr else [])
                read.warnings.extend([warning] if warning else [])
                read.heights.append(float(page.height))
                read.margins.append(_margin_keys(boxes, read.heights[-1]))
                spool.append(boxes)
            read.title = _title(pdf.metadata) if start == 0 else None
        except PdfminerException as exc:
            raise _open_error(source, exc) from exc
    return read


def lay_out(source: Source, read: PagesRead, spool: PageSpool) -> Iterator[ExtractedDocument | Exception]:
    """The document of pages read into the spool: running headers dropped, each page laid out in turn."""
    running = _running(read.margins)
    laid_out = []
    for number, (boxes, height) in enumerate(zip(spool, read.heights), start=1):
        page_text = PageText(number)
        for leaf in reading_order(_strip(boxes, height, running)):
            page_text.blocks.extend(leaf_blocks(leaf, number))
        laid_out.append(page_text)
    blocks = finish(laid_out)
    yield from single_document(source, "pdf", read.title or _first_heading(blocks), blocks,
                               metadata={"pages": len(read.heights), "ocr_pages": read.ocr_pages},
                               warnings=read.warnings)


class PdfExtractor:
    source_type = "pdf"

    def __init__(self, spool_bytes: int = SPOOL_BYTES) -> None:
        self.spool_bytes = spool_bytes  # pages' boxes kept in memory up to this while a document is read

    def extract(self, source: Source, options: ExtractOptions) -> Iterator[ExtractedDocument | Exception]:
        with PageSpool(self.spool_bytes) as spool:
            try:
                read = read_pages(source, spool)
            except IngestError as exc:
                yield exc
                return
            yield from lay_out(source, read, spool)


def _read_page(data: bytes, index: int, page: Any) -> tuple[list[Box], bool, str | None]:
    """A page's boxes, whether they were read by OCR, and a warning for the report."""
    unmapped = sum(map(methodcaller("startswith", "(cid:"), map(TEXT, page.chars)))  # iterated in C
    if len(page.chars) < MIN_TEXT_CHARS and (page.images or not page.chars):
        # a scan, or text drawn as outlines (many curves): render and read it
        drawn = bool(page.images) or len(page.curves) > MIN_OUTLINE_CURVES
        return (_ocr_page(data, index) if drawn else []), drawn, None
    if unmapped > max(MAX_UNMAPPED, MAX_UNMAPPED_SHARE * len(page.chars)):
        # fonts without a map to Unicode: the text layer is glyph numbers, the picture is not
        return _ocr_page(data, index), True, (f"page {index + 1}: {unmapped} of {len(page.chars)} characters have no "
                                              "Unicode mapping in the PDF; the page was read by OCR")
    return _text_page(_once(upright(page))), False, None


def _open_error(source: Source, exc: Exception) -> IngestError:
    inner = exc.args[0] if exc.args else exc
    name = type(inner).__name__
    if "Password" in name or "Encrypt" in name:
        return EncryptedDocument(f"{source.path.name} is encrypted: decrypt it first (ragd does not take passwords)")
    return CorruptDocument(f"{source.path.name}: damaged PDF ({inner})")


def _title(metadata: dict[str, Any]) -> str | None:
    value = metadata.get("Title")
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    text = normalize_text(str(value)) if value else ""
    return text if text and text.lower() not in ("untitled", "untitled document") else None


def _first_heading(blocks: list[Block]) -> str | None:
    return next((b.text for b in blocks if b.type == "heading"), None)
