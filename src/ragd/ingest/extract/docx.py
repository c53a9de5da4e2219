"""Word documents (DOCX, python-docx): paragraphs with their heading levels and list numbering, text boxes,
math, tables with merged cells, in document order."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from typing import Any

from ...errors import UnsupportedFormat
from ...types import Block, BlockType, ExtractedDocument
from ..normalize import normalize_text
from .base import ExtractOptions, Source, single_document
from .office import HEADING_STYLE, W_NS, clean, open_error, strict_ooxml, table_block


class _Numbering:
    """numId/ilvl -> 'bullet' or a numbering format (and its level text, e.g. "%1.%2."), from numbering.xml;
    plus running counters, so numbered headings get the numbers Word shows."""

    def __init__(self, document: Any) -> None:
        self.formats: dict[tuple[str, int], str] = {}
        self.texts: dict[tuple[str, int], str] = {}
        self.counters: dict[str, list[int]] = {}
        try:
            root = document.part.numbering_part.element
        except (KeyError, NotImplementedError, AttributeError):
            return
        abstract: dict[str, dict[int, tuple[str, str]]] = {}
        for node in root.findall(f"{W_NS}abstractNum"):
            levels = {}
            for lvl in node.findall(f"{W_NS}lvl"):
                fmt = lvl.find(f"{W_NS}numFmt")
                text = lvl.find(f"{W_NS}lvlText")
                value = fmt.get(f"{W_NS}val", "bullet") if fmt is not None else "bullet"
                levels[int(lvl.get(f"{W_NS}ilvl", "0"))] = (value, text.get(f"{W_NS}val", "") if text is not None
                                                            else "")
            abstract[node.get(f"{W_NS}abstractNumId", "")] = levels
        for num in root.findall(f"{W_NS}num"):
            ref = num.find(f"{W_NS}abstractNumId")
            if ref is None:
                continue
            for level, (fmt, text) in abstract.get(ref.get(f"{W_NS}val", ""), {}).items():
                self.formats[(num.get(f"{W_NS}numId", ""), level)] = fmt
                self.texts[(num.get(f"{W_NS}numId", ""), level)] = text

    def label(self, num_id: str, level: int) -> str:
        """Advance the counters of a numbered paragraph and return its number as Word renders it ("1.2")."""
        counts = self.counters.setdefault(num_id, [0] * 9)
        level = min(max(level, 0), 8)
        counts[level] += 1
        for deeper in range(level + 1, 9):
            counts[deeper] = 0
        if self.formats.get((num_id, level), "bullet") in ("bullet", "none"):
            return ""
        text = self.texts.get((num_id, level), f"%{level + 1}.")
        for i in range(9):
            text = text.replace(f"%{i + 1}", str(max(counts[i], 1)))
        return text.strip()


def _list_info(paragraph: Any, style: Any, numbering: _Numbering) -> tuple[int, bool] | None:
    """(level, numbered) when the paragraph (with its style, python-docx's) is a list item, from its numPr or its
    style."""
    ppr = paragraph._p.pPr
    num_pr = ppr.numPr if ppr is not None else None
    style = _style_name(style)
    if num_pr is not None and num_pr.numId is not None and num_pr.numId.val != 0:
        level = num_pr.ilvl.val if num_pr.ilvl is not None else 0
        fmt = numbering.formats.get((str(num_pr.numId.val), level), "bullet")
        return level, fmt not in ("bullet", "none")
    if style.lower().startswith("list"):
        match = re.search(r"(\d)$", style)
        return (int(match.group(1)) - 1 if match else 0), "number" in style.lower()
    return None


def _style_numbering(paragraph: Any, style: Any) -> tuple[str, int] | None:
    """(numId, ilvl) of a paragraph numbered directly or through its style (Heading 1 with numbering)."""
    ppr = paragraph._p.pPr
    num_pr = ppr.numPr if ppr is not None else None
    while (num_pr is None or num_pr.numId is None) and style is not None:
        spr = style.element.pPr
        num_pr = spr.numPr if spr is not None else None
        style = style.base_style
    if num_pr is None or num_pr.numId is None or num_pr.numId.val == 0:
        return None
    level = num_pr.ilvl.val if num_pr.ilvl is not None else 0
    if ppr is not None and ppr.numPr is not None and ppr.numPr.ilvl is not None:
        level = ppr.numPr.ilvl.val
    return str(num_pr.numId.val), int(level)


def _style_name(style: Any) -> str:
    return (style.name if style is not None else "") or ""


def _heading_level(paragraph: Any, style: Any) -> int | None:
    style = _style_name(style)
    if style.lower() == "title":
        return 1
    match = HEADING_STYLE.match(style)
    if match:
        return min(int(match.group(1)) + 1, 6)
    ppr = paragraph._p.pPr
    outline = ppr.find(f"{W_NS}outlineLvl") if ppr is not None else None
    if outline is not None:
        return min(int(outline.get(f"{W_NS}val", "0")) + 2, 6)
    return None


def _children(node: Any, *tags: str) -> Iterator[Any]:
    """The children with these tags in order, including those inside content controls (w:sdt) and custom XML
    wrappers, which python-docx's own iteration skips."""
    wanted = {f"{W_NS}{t}" for t in tags}
    for child in node.iterchildren():
        tag = child.tag
        if tag in wanted:
            yield child
        elif tag == f"{W_NS}sdt":
            content = child.find(f"{W_NS}sdtContent")
            if content is not None:
                yield from _children(content, *tags)
        elif tag in (f"{W_NS}customXml", f"{W_NS}smartTag"):
            yield from _children(child, *tags)


def _body_items(container: Any) -> Iterator[Any]:
    """Paragraphs (w:p) and tables (w:tbl) in body order."""
    return _children(container, "p", "tbl")


M_NS = "{http://schemas.openxmlformats.org/officeDocument/2006/math}"
MC_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"
_SKIP = {f"{W_NS}txbxContent", MC_FALLBACK, f"{W_NS}del", f"{W_NS}delText", f"{W_NS}instrText"}


# a field's result that is the error its program wrote in place of a value: Word's "!Unexpected End of Formula",
# "Error! Reference source not found.", "Fehler! Verweisquelle ...", "¡Error! ...", "Erreur ! ..."
FIELD_ERROR = re.compile(r"\s*(?:!|¡?[^\W\d_]{2,20}\s?!(?:\s|$))")


def paragraph_text(p: Any) -> str:
    """A paragraph's text in document order: runs, hyperlinks, fields' results and the plain text of
    equations (OMML); deleted revisions, field codes, fields' error results and text boxes (read as blocks of
    their own) left out."""
    parts: list[str] = []
    results: list[int | None] = []  # per open complex field: where its result starts in parts (None: in its code)

    def error_dropped(start: int) -> None:
        if FIELD_ERROR.match("".join(parts[start:])):
            del parts[start:]

    def walk(node: Any) -> None:
        for child in node:
            tag = child.tag
            if tag in _SKIP:
                continue
            if tag in (f"{W_NS}t", f"{M_NS}t"):
                parts.append(child.text or "")
            elif tag == f"{W_NS}tab":
                parts.append(" ")
            elif tag in (f"{W_NS}br", f"{W_NS}cr"):
                parts.append("\n")
            elif tag == f"{W_NS}fldChar":
                kind = child.get(f"{W_NS}fldCharType")
                if kind == "begin":
                    results.append(None)
                elif kind == "separate" and results:
                    results[-1] = len(parts)
                elif kind == "end" and results:
                    start = results.pop()
                    if start is not None:
                        error_dropped(start)
            elif tag == f"{W_NS}fldSimple":
                start = len(parts)
                walk(child)
                error_dropped(start)
            else:
                walk(child)

    walk(p)
    return "".join(parts)


def _text_boxes(p: Any) -> list[Any]:
    """The text box contents anchored in a paragraph (the DrawingML choice, not its VML fallback copy)."""
    found: list[Any] = []

    def walk(node: Any) -> None:
        for child in node:
            if child.tag == MC_FALLBACK:
                continue
            if child.tag == f"{W_NS}txbxContent":
                found.append(child)
            else:
                walk(child)

    walk(p)
    return found


def _int_attr(parent: Any, tag: str, default: int) -> int:
    node = parent.find(f"{W_NS}{tag}") if parent is not None else None
    value = node.get(f"{W_NS}val") if node is not None else None
    return int(value) if value is not None and value.isdigit() else default


def _docx_tables(tbl: Any, paragraph: Any) -> list[Block]:
    """A table as its grid: a cell spanning columns (gridSpan) or rows (vMerge) written once at its first
    position with its span kept (`table_block`), a row starting late (gridBefore) given empty cells. Nested tables
    follow as tables of their own."""
    grid: list[list[str]] = []
    spans: list[list[int]] = []
    merging: dict[int, int] = {}  # column -> the span (index in spans) a vertical merge started there continues
    nested: list[Block] = []
    for r, tr in enumerate(_children(tbl, "tr")):
        tr_pr = tr.find(f"{W_NS}trPr")
        row = [""] * _int_attr(tr_pr, "gridBefore", 0)
        for tc in _children(tr, "tc"):
            tc_pr = tc.find(f"{W_NS}tcPr")
            width = max(1, _int_attr(tc_pr, "gridSpan", 1))
            merge = tc_pr.find(f"{W_NS}vMerge") if tc_pr is not None else None
            parts = []
            for item in _body_items(tc):
                if item.tag == f"{W_NS}tbl":
                    nested.extend(_docx_tables(item, paragraph))
                else:
                    parts.append(paragraph_text(item))
            text = " ".join(" ".join(parts).split())
            column = len(row)
            if merge is not None and merge.get(f"{W_NS}val") in (None, "continue") and column in merging:
                spans[merging[column]][2] += 1
                text = ""
            else:
                merging.pop(column, None)
                if width > 1 or merge is not None:
                    if merge is not None:
                        merging[column] = len(spans)
                    spans.append([r, column, 1, width])
            row.extend([text] + [""] * (width - 1))
        grid.append(row)
    block = table_block(grid, spans=[(a, b, c, d) for a, b, c, d in spans])
    return ([block] if block is not None else []) + nested


class DocxExtractor:
    source_type = "docx"

    def extract(self, source: Source, options: ExtractOptions) -> Iterator[ExtractedDocument | Exception]:
        import docx
        from docx.text.paragraph import Paragraph

        try:
            document = docx.Document(io.BytesIO(source.data))
        except Exception as exc:
            if strict_ooxml(source.data):
                yield UnsupportedFormat(f"{source.path.name} is a Strict Open XML document, which python-docx cannot "
                                        "read: save it as a (Transitional) Word document and ingest it again")
            else:
                yield open_error(source, "DOCX", exc)
            return
        numbering = _Numbering(document)
        blocks: list[Block] = []
        counters: dict[int, int] = {}
        body = document.element.body

        styles: dict[str | None, Any] = {}

        def paragraph(element: Any) -> Any:
            return Paragraph(element, document._body)

        def style_of(item: Any) -> Any:
            """A paragraph's style, resolved once per style id: python-docx looks a style up on every call,
            scanning all of the document's styles for the default one (90% of a long document's time)."""
            style_id = item._p.style
            if style_id not in styles:
                styles[style_id] = item.style
            return styles[style_id]

        def handle(elements: Iterator[Any]) -> None:
            nonlocal counters
            for element in elements:
                if element.tag == f"{W_NS}tbl":
                    blocks.extend(_docx_tables(element, paragraph))
                    counters.clear()
                    continue
                handle_paragraph(element)
                for box in _text_boxes(element):  # text boxes anchored in the paragraph follow it
                    handle(_body_items(box))

        def handle_paragraph(element: Any) -> None:
            nonlocal counters
            item = paragraph(element)
            raw = paragraph_text(element)
            text = clean(raw)
            if not text:
                return
            style = style_of(item)
            level = _heading_level(item, style)
            if level is not None:
                heading_number = _style_numbering(item, style)
                label = numbering.label(*heading_number) if heading_number is not None else ""
                blocks.append(Block("heading", f"{label} {text}" if label else text, level=level))
                counters.clear()
                return
            info = _list_info(item, style, numbering)
            if info is None:
                name = _style_name(style).lower()
                kind: BlockType = "code" if "code" in name or "source" in name else "paragraph"
                blocks.append(Block(kind, normalize_text(raw) if kind == "code" else text))
                counters.clear()
                return
            depth, numbered = info
            counters = {k: v for k, v in counters.items() if k <= depth}
            counters[depth] = counters.get(depth, 0) + 1
            marker = f"{counters[depth]}." if numbered else "-"
            line = "  " * depth + f"{marker} {text}"
            if blocks and blocks[-1].type == "list":
                blocks[-1] = Block("list", blocks[-1].text + "\n" + line)
            else:
                blocks.append(Block("list", line))

        handle(_body_items(body))
        title = clean(document.core_properties.title or "") or next(
            (b.text for b in blocks if b.type == "heading"), None)
        yield from single_document(source, "docx", title, blocks)
