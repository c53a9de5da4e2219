"""pdfplumber pages read faster: PLAYA interprets the content, pdfplumber's dicts come out.

pdfplumber reads a page's content streams with pdfminer.six, in pure Python: on dense text pages that is most of
the extraction time. PLAYA (playa-pdf, MIT, a descendant of pdfminer.six compiled with mypyc) interprets them
about twice as fast and builds pdfminer's objects from them (`playa.miner`: characters with pdfminer's bounding
boxes, paths classified into lines, rectangles and curves as pdfminer does). FastPage turns those into the dicts
pdfplumber's own pages hold, so pdfplumber's words, tables, filters and crops work on them unchanged. A text
object's characters are computed in one pass, the positions PLAYA's glyph iterator gives and the boxes
`playa.miner.LTChar` makes, without building either object (`playa_glyphs` builds them: the same dicts). A page
PLAYA cannot read, or a document whose pages it numbers otherwise, is read by pdfminer as before
(`process_object` builds a character's dict directly: passing each attribute through pdfplumber's `resolve_all`
was 30-45% of the time; `use_playa=False` reads every page that way).

What PLAYA reads otherwise (`test_pages_playa_reads_are_what_pdfminer_reads` bounds it on real PDFs): positions
in their last bits, and by tenths of a point on lines set with both horizontal scaling and character spacing
(which pdfminer does not scale); the descent, hence top and bottom, of a few fonts; glyphs of fonts without a
Unicode map, which PLAYA often decodes where pdfminer writes "(cid:N)" (a glyph PLAYA reads as no text, a
private-use code point, a Wingdings picture or a guessed StandardEncoding letter is written "(cid:N)" here as
pdfminer would, and a control character that is a Windows-1252 byte as that character); a non-embedded
standard font's name as the document gives it ("Arial,Bold", not "Helvetica-Bold"); the line width (PDF's
default 1, not 0); marked content (the innermost, not the last opened)."""

from __future__ import annotations

import io
import logging
import re
import time
from functools import cached_property, lru_cache
from operator import itemgetter
from typing import Any
from unicodedata import normalize as normalize_unicode

import playa
from pdfminer.layout import LTChar, LTItem
from pdfminer.pdfpage import PDFPage
from pdfplumber.page import ALL_ATTRS, Page, fix_fontname_bytes
from pdfplumber.pdf import PDF
from pdfplumber.utils.exceptions import PdfminerException
from pdfplumber.utils.pdfinternals import resolve_all, resolve_and_decode
from pdfplumber.utils.text import WordExtractor
from playa import miner
from playa.content import ImageObject, PathObject, TextObject, XObjectObject
from playa.encodings import LITERAL_STANDARD_CID2UNICODE
from playa.utils import mult_matrix, transform_bbox

_log = logging.getLogger(__name__)
# PLAYA reports every oddity of a damaged file as a warning; what matters reaches the user as the page's text or
# the file's error
logging.getLogger("playa").setLevel(logging.ERROR)

_END = object()  # an iterator's end
MAX_FORM_DEPTH = 32  # forms drawn inside forms: real documents nest a few; PLAYA has no guard against a circle
# One page's budget: a dense page of text draws 5-10 thousand glyphs, a detailed drawing some tens of thousands of
# paths. A page past either limit is skipped with a warning and the rest of the document is read (a page of a
# million glyphs took the whole file's budget, 600 s and 1.7 GB, before the file failed).
MAX_PAGE_OBJECTS = 250_000
MAX_PAGE_SECONDS = 30.0
_CHECK_EVERY = 0x1FFF  # the budget is checked each time this many more objects were read (a mask: 8,192)


class PageTooComplex(Exception):
    """A page over its budget of objects or seconds: skipped, the rest of the document read."""
_PLAIN = frozenset({int, float, str, bool, type(None)})
# the C1 controls as the Windows-1252 characters their bytes stand for (those it leaves undefined stay)
_WINDOWS_1252 = {b: bytes([b]).decode("cp1252") for b in range(0x80, 0xA0) if b not in (0x81, 0x8D, 0x8F, 0x90, 0x9D)}
_SHAPES: dict[type, str] = {miner.LTLine: "line", miner.LTRect: "rect", miner.LTCurve: "curve"}


@lru_cache(maxsize=256)
def _decoded(name: Any) -> str:
    """A colour space's name, decoded once (pages name a handful; the cache is bounded for hostile files)."""
    return str(resolve_and_decode(name))


def _color(color: Any) -> Any:
    """A PLAYA colour as pdfminer gives it: one component as a number, several as a tuple."""
    if color is None:
        return None
    values = color.values
    return values[0] if len(values) == 1 else values


def _char_color(color: Any) -> tuple[Any, ...]:
    """A character's colour as pdfplumber gives it: a tuple, of one component too."""
    value = _color(color)
    return value if isinstance(value, tuple) else (value,)


def _fontname(name: Any) -> str:
    """A font's name as pdfplumber gives it: bytes that are not UTF-8 decoded as it decodes them."""
    return name if isinstance(name, str) else fix_fontname_bytes(name)


def _marked(obj: Any) -> tuple[Any, Any]:
    """The marked-content id and tag an object is drawn in (the innermost), or Nones."""
    marked = obj.mcstack[-1] if obj.mcstack else None
    return (marked.mcid, marked.tag) if marked is not None else (None, None)


def _family(space: Any) -> str:
    """A colour space by its family ("ICCBased"), as pdfminer names it, not by its resource name ("Cs1")."""
    spec = space.spec
    if isinstance(spec, list) and spec and hasattr(spec[0], "name"):
        return str(spec[0].name)
    return str(space.name)


_DINGBATS = re.compile(r"(?:[A-Z]{6}\+)?(?:wingdings|webdings)", re.IGNORECASE)


def _guessed(font: Any) -> bool:
    """Whether a font's glyphs carry no text PLAYA can know: a Wingdings or Webdings face (pictures, whatever its
    maps say: "\u2122" or a control character for a bullet), or a font without a ToUnicode map whose encoding names
    no glyphs, which PLAYA reads as StandardEncoding (a symbolic TrueType font, say). pdfminer reads no text from
    such glyphs either, and the layout reads a lone one as a bullet."""
    if _DINGBATS.match(str(getattr(font, "fontname", ""))) is not None:
        return True
    return (getattr(font, "tounicode", None) is None
            and getattr(font, "_cid2unicode", None) is LITERAL_STANDARD_CID2UNICODE)


def _text(text: str | None, cid: int, guessed: bool) -> str:
    """A glyph's text as pdfminer gives it: no text, a glyph of a font whose text PLAYA guessed, or a private-use
    code point (which means nothing outside its font) is pdfminer's "(cid:N)" of a glyph it cannot map, which
    the layout reads as a symbol font's bullet; a C1 control is a Windows-1252 byte left undecoded ("\x95")."""
    if not text or guessed or "\ue000" <= text[0] <= "\uf8ff":
        return f"(cid:{cid})"
    if "\x80" <= text[0] <= "\x9f":
        return text.translate(_WINDOWS_1252)
    return text


def _widths(font: Any) -> dict[int, float]:
    """A font's advances by character id, filled as its characters are met (PLAYA works each out again)."""
    return {}


def _place(attr: dict[str, Any], height: float, mb_x0: float, mb_top: float, doctop: float) -> None:
    """An object's top, bottom and place in the document from its PDF y coordinates, and its x coordinates moved
    by the MediaBox's origin, as pdfplumber places its objects (pdfminer's are relative to the MediaBox)."""
    attr["top"] = (height - attr["y1"]) + mb_top
    attr["bottom"] = (height - attr["y0"]) + mb_top
    attr["doctop"] = doctop + attr["top"]
    if mb_x0 != 0:
        attr["x0"] = attr["x0"] + mb_x0
        attr["x1"] = attr["x1"] + mb_x0


class FastPage(Page):
    reader: str | None = None  # which parser read the page's objects: "playa" or "pdfminer"

    def parse_objects(self) -> dict[str, list[dict[str, Any]]]:
        read = getattr(self.pdf, "playa_page", None)
        page = read(self) if read is not None else None
        if page is not None:
            try:
                objects = self._playa_objects(page)
                self.reader = "playa"
                return objects
            except PageTooComplex:
                raise  # pdfminer would take longer still
            except Exception as exc:
                _log.debug("PLAYA could not read page %d (%s); reading it with pdfminer", self.page_number, exc)
        self.reader = "pdfminer"
        return super().parse_objects()

    def _playa_objects(self, page: Any) -> dict[str, list[dict[str, Any]]]:
        """pdfplumber's objects of a page PLAYA reads: the dicts `process_object` makes of pdfminer's, in the
        order pdfminer lays them out (a form's contents in its place), made from PLAYA's pdfminer objects
        (`playa.miner`)."""
        objects: dict[str, list[dict[str, Any]]] = {}
        number, height, doctop = self.page_number, self.height, self.initial_doctop
        mb_x0, mb_top = self.mediabox[:2]
        unicode_norm = self.pdf.unicode_norm
        by_glyph = getattr(self.pdf, "playa_glyphs", False)
        # a page draws with a few fonts, colours and colour spaces: what each gives is worked out once, kept by
        # id with the object itself (so an id reused after the object is gone is never mistaken for it)
        known: dict[tuple[Any, int], tuple[Any, Any]] = {}

        started = time.monotonic()

        def budget() -> None:
            read = sum(map(len, objects.values()))
            if read > MAX_PAGE_OBJECTS:
                raise PageTooComplex(f"page {number}: over {MAX_PAGE_OBJECTS:,} glyphs and drawing objects (one "
                                     "page's budget); the page was skipped")
            if time.monotonic() - started > MAX_PAGE_SECONDS:
                raise PageTooComplex(f"page {number}: not read within {MAX_PAGE_SECONDS:g} s (one page's budget; "
                                     f"{read:,} glyphs and drawing objects so far); the page was skipped")

        def once(obj: Any, work: Any) -> Any:
            key = (work, id(obj))
            found = known.get(key)
            if found is None or found[0] is not obj:
                found = known[key] = (obj, work(obj))
            return found[1]

        def point(pt: tuple[float, float]) -> tuple[float, float]:  # pdfplumber's point2coord
            return (pt[0] + mb_x0, height - pt[1] + mb_top)

        def add(kind: str, obj: Any, attr: dict[str, Any]) -> None:
            attr["mcid"], attr["tag"] = _marked(obj)
            _place(attr, height, mb_x0, mb_top, doctop)
            found = objects.get(kind)
            if found is None:
                objects[kind] = [attr]
            else:
                found.append(attr)
                if not len(found) & _CHECK_EVERY:
                    budget()

        def char(glyph: Any) -> None:
            obj = miner.LTChar(glyph)
            text = _text(glyph.text, glyph.cid, once(glyph.font, _guessed))
            add("char", obj, {
                "matrix": obj.matrix, "fontname": _fontname(obj.fontname), "adv": obj.adv, "upright": obj.upright,
                "x0": obj.x0, "y0": obj.y0, "x1": obj.x1, "y1": obj.y1, "width": obj.width, "height": obj.height,
                "size": obj.size, "object_type": "char", "page_number": number, "ncs": once(obj.ncs, _family),
                "text": normalize_unicode(unicode_norm, text) if unicode_norm is not None else text,
                "stroking_color": once(obj.stroking_color, _char_color),
                "non_stroking_color": once(obj.non_stroking_color, _char_color)})

        def text(obj: Any) -> None:
            """A text object's characters: PLAYA's glyph iterator and pdfminer's LTChar, computed in one pass
            (the same arithmetic, in the same order, so the same numbers), with what is the same for all of
            them (font, colours, marked content) worked out once. Vertical writing and a zero font size or
            scaling (which pdfminer's boxes divide by) go through PLAYA's glyphs."""
            gstate = obj.gstate
            font, fontsize, scaling = gstate.font, gstate.fontsize, gstate.scaling * 0.01
            if font is None or font.vertical or fontsize == 0 or scaling == 0 or by_glyph:
                for glyph in obj:
                    char(glyph)
                return
            widths = once(font, _widths)
            guessed = once(font, _guessed)
            fontname, ncs, (mcid, tag) = _fontname(font.fontname), once(gstate.ncs, _family), _marked(obj)
            stroking, filling = once(gstate.scolor, _char_color), once(gstate.ncolor, _char_color)
            # PLAYA's TextObject.__iter__: each glyph's rendering matrix is the font's scaling times the text line's
            # matrix moved to the glyph's place along the line (mult_matrix and translate_matrix, written out:
            # what does not depend on the place is the same for the whole text object, worked out once, the rest
            # in the same order of operations, so the same numbers)
            fa, fb, fc, fd, fe, ff = mult_matrix(obj.line_matrix, obj.ctm)
            size_x, rise = fontsize * scaling, gstate.rise
            a, b, c, d = fa * size_x + fc * 0, fb * size_x + fd * 0, fa * 0 + fc * fontsize, fb * 0 + fd * fontsize
            rise_e, rise_f = fa * 0 + fc * rise, fb * 0 + fd * rise
            charspace = gstate.charspace / fontsize
            wordspace = 0 if font.multibyte else gstate.wordspace / fontsize
            # pdfminer's character box (playa.miner.LTChar): the advance by a unit high, from the descent
            descent = font.descent * font.matrix[3]
            xscale, yscale = 1 / (fontsize * scaling), 1 / fontsize
            ma, mb, mc, md = a * xscale, b * yscale, c * xscale, d * yscale
            upright = a * d * scaling > 0 and b * c <= 0
            turned = a * c < 0 or b * d < 0  # the box's corners move
            low_x, low_y = a * 0 + c * descent, b * 0 + d * descent  # the box's corners before the move
            high_x, high_y = c * (descent + 1), d * (descent + 1)
            chars = objects.get("char", [])
            x, y = obj._glyph_offset
            line_x, line_y = y * fc, y * fd
            pos = x
            for arg in obj.args:
                if isinstance(arg, (int, float)):
                    pos -= arg * 0.001 * fontsize * scaling
                    continue
                for cid, glyph_text in font.decode(arg):
                    width = widths.get(cid)
                    if width is None:
                        width = widths[cid] = font.hdisp(cid)
                    disp = width + charspace
                    if cid == 32:
                        disp += wordspace
                    e = rise_e + (pos * fa + line_x + fe)
                    f = rise_f + (pos * fb + line_y + ff)
                    if turned:
                        x0, y0, x1, y1 = transform_bbox((a, b, c, d, e, f), (0, descent, width, descent + 1))
                    else:  # transform_bbox's two corners, inline (a call per character cost a tenth of the page)
                        px, py = low_x + e, low_y + f
                        qx, qy = a * width + high_x + e, b * width + high_y + f
                        x0, x1 = qx if qx < px else px, qx if qx > px else px  # min() and max() of the two
                        y0, y1 = qy if qy < py else py, qy if qy > py else py
                    if not glyph_text or guessed or not " " <= glyph_text[0] < "\x80":  # printable ASCII needs
                        glyph_text = _text(glyph_text, cid, guessed)  # none of _text's rules: no call for it
                    if unicode_norm is not None:
                        glyph_text = normalize_unicode(unicode_norm, glyph_text)
                    top, bottom = (height - y1) + mb_top, (height - y0) + mb_top  # _place, inline
                    chars.append({
                        "matrix": (ma, mb, mc, md, e, f), "fontname": fontname, "adv": width * fontsize * scaling,
                        "upright": upright, "x0": x0 + mb_x0 if mb_x0 != 0 else x0, "y0": y0,
                        "x1": x1 + mb_x0 if mb_x0 != 0 else x1, "y1": y1, "width": x1 - x0, "height": y1 - y0,
                        "size": y1 - y0, "object_type": "char", "page_number": number, "ncs": ncs,
                        "text": glyph_text, "stroking_color": stroking, "non_stroking_color": filling, "mcid": mcid,
                        "tag": tag, "top": top, "bottom": bottom, "doctop": doctop + top})
                    pos += disp * fontsize * scaling
                    if not len(chars) & _CHECK_EVERY:
                        objects.setdefault("char", chars)
                        budget()
            if chars and "char" not in objects:
                objects["char"] = chars
            if obj._next_glyph_offset is None:
                obj._next_glyph_offset = (pos, y)

        def shape(obj: Any) -> None:
            dash, kind = obj.dashing_style, _SHAPES[type(obj)]
            add(kind, obj, {
                "x0": obj.x0, "y0": obj.y0, "x1": obj.x1, "y1": obj.y1, "width": obj.width, "height": obj.height,
                "pts": [point(p) for p in obj.pts], "linewidth": obj.linewidth, "stroke": obj.stroke,
                "fill": obj.fill, "evenodd": obj.evenodd, "stroking_color": once(obj.stroking_color, _color),
                "non_stroking_color": once(obj.non_stroking_color, _color), "object_type": kind,
                "page_number": number,
                "path": [(op, *[point(p) for p in pts]) for op, *pts in obj.original_path],
                "dash": (list(dash.dash), dash.phase) if dash.dash or dash.phase else None})

        def image(found: Any) -> None:
            obj = miner.LTImage(found)
            add("image", obj, {
                "x0": obj.x0, "y0": obj.y0, "x1": obj.x1, "y1": obj.y1, "width": obj.width, "height": obj.height,
                "name": obj.name, "stream": obj.stream, "srcsize": obj.srcsize, "imagemask": obj.imagemask,
                "bits": obj.bits, "colorspace": obj.colorspace, "object_type": "image", "page_number": number})

        # the page's objects, a form's contents in its place (as pdfminer's figure holds them), walked with a stack
        # of iterators: a walk function calling itself would be held by its own closure, and through the helpers
        # every object read, a cycle that kept each page's characters alive until a full garbage collection
        walking = [iter(page)]
        walked = 0
        while walking:
            obj: Any = next(walking[-1], _END)
            walked += 1
            if not walked & _CHECK_EVERY:  # (objects that draw nothing count against the time budget too)
                budget()
            kind = type(obj)
            if kind is TextObject:
                text(obj)
            elif kind is PathObject:
                ops = "".join(seg.operator for seg in obj.raw_segments)
                if ops[:1] != "m":
                    continue  # a path must begin with a move: pdfminer draws nothing of one that does not
                several = ops.count("m") > 1
                part: Any
                for part in miner.process_object(obj):
                    if not (several and len(part.original_path) == 1):  # a lone move among subpaths: nothing
                        shape(part)
            elif kind is XObjectObject:
                if len(walking) > MAX_FORM_DEPTH:  # a form drawing itself, directly or not: pdfminer refuses the
                    raise ValueError(f"forms nested over {MAX_FORM_DEPTH} deep")  # circle and reads the rest
                walking.append(iter(obj))
            elif kind is ImageObject:
                image(obj)
            elif obj is _END:
                walking.pop()
        return objects

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
        _place(attr, self.height, mb_x0, mb_top, self.initial_doctop)
        return attr


class Words(WordExtractor):
    """pdfplumber's words, with the common case written out: upright text read left to right in lines from the
    top, no tolerance in proportion to the size, blank characters ending words. The same words, in the same
    order, with the same numbers (tested against pdfplumber's on real PDFs); any other case is pdfplumber's.
    pdfplumber's general code cost a sixth of a dense page: a call per character for its cluster key, its sort
    key and the test whether it begins a word, and three nested calls per word for its box."""

    @cached_property
    def _plain(self) -> bool:
        """Whether the settings are the common case written out here (they are fixed when the extractor is made)."""
        return (self.line_dir == "ttb" and self.char_dir == "ltr" and self.horizontal_ltr and not self.keep_blank_chars
                and self.x_tolerance_ratio is None and self.y_tolerance_ratio is None)

    def iter_chars_to_lines(self, chars: Any) -> Any:
        chars = list(chars)
        if not (chars[0]["upright"] and self._plain):
            yield from super().iter_chars_to_lines(chars)
            return
        # pdfplumber's cluster_objects by the top: the distinct tops in order, a line broken where one lies more
        # than the tolerance below the one before; the characters of a line in their order on the page
        line_of: dict[Any, int] = {}
        last, line = None, -1
        for top in sorted({c["top"] for c in chars}):
            if last is None or not top <= last + self.y_tolerance:
                line += 1
            line_of[top] = line
            last = top
        lines: list[list[dict[str, Any]]] = [[] for _ in range(line + 1)]
        for c in chars:
            lines[line_of[c["top"]]].append(c)
        for found in lines:
            yield sorted(found, key=_LTR), "ltr"

    def iter_chars_to_words(self, ordered_chars: Any, direction: Any) -> Any:
        if direction != "ltr" or not self._plain:
            yield from super().iter_chars_to_words(ordered_chars, direction)
            return
        x_tolerance, y_tolerance, punctuation = self.x_tolerance, self.y_tolerance, self.split_at_punctuation
        word: list[dict[str, Any]] = []
        for char in ordered_chars:
            text = char["text"]
            if text.isspace():
                if word:
                    yield word
                word = []
            elif text in punctuation:  # a word of its own ("" is in every string, as in pdfplumber)
                if word:
                    yield word
                yield [char]
                word = []
            elif word and (char["x0"] < (last := word[-1])["x0"] or char["x0"] > last["x1"] + x_tolerance
                           or abs(char["top"] - last["top"]) > y_tolerance):
                yield word
                word = [char]
            else:
                word.append(char)
        if word:
            yield word

    def merge_chars(self, ordered_chars: Any) -> dict[str, Any]:
        first = ordered_chars[0]
        if len(ordered_chars) == 1:
            x0, top, x1, bottom = first["x0"], first["top"], first["x1"], first["bottom"]
        else:
            x0s, tops, x1s, bottoms = zip(*map(_BOX, ordered_chars))
            x0, top, x1, bottom = min(x0s), min(tops), max(x1s), max(bottoms)
        expansions = self.expansions
        word = {
            "text": "".join([expansions.get(t, t or "") for t in map(_TEXT, ordered_chars)]),
            "x0": x0, "x1": x1, "top": top, "doctop": top + (first["doctop"] - first["top"]), "bottom": bottom,
            "upright": first["upright"], "height": bottom - top, "width": x1 - x0,
            "direction": self.get_char_dir(first["upright"])}
        for key in self.extra_attrs:
            word[key] = first[key]
        return word


_LTR = itemgetter("x0", "x0")  # pdfplumber's sort key of characters read left to right
_BOX = itemgetter("x0", "top", "x1", "bottom")
_TEXT = itemgetter("text")


def extract_words(page: Any, **settings: Any) -> list[dict[str, Any]]:
    """`page.extract_words(**settings)`, read by `Words`."""
    return Words(**settings).extract_words(page.chars)


# PLAYA keeps every object it has read (each page's content streams too) until its document goes: a long PDF is
# parsed again after this many pages (or an eighth of its pages, if more: a parse costs time in proportion to the
# document, ~0.15 s for 900 pages and 21 MB, so a document is parsed at most ~8 times), holding a few megabytes,
# not ~0.04 MB for each page read
PLAYA_PAGES = 128
PLAYA_PARSES = 8


class FastPDF(PDF):
    """pdfplumber's PDF whose pages are FastPage. pdfminer reads the document's structure (pages, boxes,
    metadata); PLAYA, given the same bytes, the pages' content. `use_playa=False` reads content with pdfminer."""

    _playa_data: bytes | None = None  # the file, for PLAYA
    _playa: Any = None  # PLAYA's document once open; False when it cannot serve
    _playa_read = 0  # pages read from it
    playa_pages = PLAYA_PAGES  # then it is parsed again (at the least)
    playa_glyphs = False  # read text through PLAYA's glyph objects, as the fast path is tested against

    @classmethod
    def open_bytes(cls, data: bytes, use_playa: bool = True) -> FastPDF:
        pdf = cls.open(io.BytesIO(data))
        assert isinstance(pdf, FastPDF)
        pdf._playa_data = data if use_playa else None
        return pdf

    def close(self) -> None:
        super().close()
        self._playa, self._playa_data = False, None  # its parsed objects go with it

    def playa_page(self, page: FastPage) -> Any:
        """PLAYA's page for the same page object, or None (PLAYA off, unable to open the file, or numbering its
        pages otherwise)."""
        if self._playa is False or self._playa_data is None:
            return None
        if self._playa is None or self._playa_read >= max(self.playa_pages, -(-len(self.pages) // PLAYA_PARSES)):
            try:
                doc = playa.parse(self._playa_data, space="page")
                self._playa = doc if len(doc.pages) == len(self.pages) else False
            except Exception as exc:  # a damaged file: pdfminer reads it, or says why not
                _log.debug("PLAYA cannot read this PDF (%s); reading it with pdfminer", exc)
                self._playa = False
            if self._playa is False:
                return None
            self._playa_read = 0
        self._playa_read += 1
        found = self._playa.pages[page.page_number - 1]
        return found if found.pageid == page.page_obj.pageid else None

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
