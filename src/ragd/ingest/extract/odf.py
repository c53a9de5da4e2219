"""OpenDocument (LibreOffice, OpenOffice, Google Docs exports): text (.odt), spreadsheets (.ods) and
presentations (.odp), read from the package's content.xml with lxml (entities and network off)."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from typing import Any

from lxml import etree

from ...errors import CorruptDocument
from ...types import Block, ExtractedDocument
from ..normalize import normalize_text
from .base import ExtractOptions, Source, single_document
from .office import table_block

NS = {
    "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
    "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
    "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
    "draw": "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0",
    "dc": "http://purl.org/dc/elements/1.1/",
}
MIMETYPES = {
    "application/vnd.oasis.opendocument.text": "odt",
    "application/vnd.oasis.opendocument.spreadsheet": "ods",
    "application/vnd.oasis.opendocument.presentation": "odp",
}
MAX_REPEAT = 1000  # a repeated row or cell with content is written out this many times at most
_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False, remove_comments=True)


def _q(name: str) -> str:
    prefix, local = name.split(":")
    return f"{{{NS[prefix]}}}{local}"


H, P, LIST, ITEM, SPACE, TAB, BREAK = (_q(n) for n in ("text:h", "text:p", "text:list", "text:list-item", "text:s",
                                                       "text:tab", "text:line-break"))
TABLE, ROW, CELL, COVERED = (_q(n) for n in ("table:table", "table:table-row", "table:table-cell",
                                             "table:covered-table-cell"))
NOTE = _q("text:note")


def _text(node: Any) -> str:
    """A paragraph's text: spans inline, text:s as spaces, tabs and line breaks kept, notes left out."""
    out = [node.text or ""]
    for child in node:
        if child.tag == SPACE:
            out.append(" " * int(child.get(_q("text:c"), "1")))
        elif child.tag == TAB:
            out.append("\t")
        elif child.tag == BREAK:
            out.append("\n")
        elif child.tag != NOTE:
            out.append(_text(child))
        out.append(child.tail or "")
    return "".join(out)


def _rows(table: Any) -> list[list[str]]:
    """A table's cells, repeated rows and cells written out (the trailing empty ones a spreadsheet pads with are
    not: they may be repeated a million times)."""
    rows: list[list[str]] = []
    for row in table.iter(ROW):
        if row.getparent() is not None and _enclosing_table(row) is not table:
            continue  # a row of a table nested in a cell
        cells: list[str] = []
        for cell in row:
            if cell.tag not in (CELL, COVERED):
                continue
            text = "\n".join(_text(p) for p in cell.iter(P, H)).strip()
            repeat = int(cell.get(_q("table:number-columns-repeated"), "1"))
            cells.extend([text] * (min(repeat, MAX_REPEAT) if text else min(repeat, 1)))
        repeat = int(row.get(_q("table:number-rows-repeated"), "1"))
        rows.extend([cells] * (min(repeat, MAX_REPEAT) if any(cells) else 1))
    return rows


def _enclosing_table(node: Any) -> Any:
    parent = node.getparent()
    while parent is not None and parent.tag != TABLE:
        parent = parent.getparent()
    return parent


def _blocks(parent: Any, page: int | None = None) -> list[Block]:
    """Body elements in document order: headings, paragraphs, lists, tables; sections and frames walked into."""
    out: list[Block] = []
    for node in parent:
        if node.tag == H:
            text = normalize_text(_text(node))
            if text:
                out.append(Block("heading", text, level=int(node.get(_q("text:outline-level"), "1")), page=page))
        elif node.tag == P:
            text = normalize_text(_text(node))
            if text:
                out.append(Block("paragraph", text, page=page))
        elif node.tag == LIST:
            items = [normalize_text(" ".join(_text(p) for p in item.iter(P, H))) for item in node.iter(ITEM)]
            items = [i for i in items if i]
            if items:
                out.append(Block("list", "\n".join(f"- {i}" for i in items), page=page))
        elif node.tag == TABLE:
            block = table_block(_rows(node), page=page)
            if block is not None:
                out.append(block)
        else:
            out.extend(_blocks(node, page))
    return out


class OdfExtractor:
    source_type = "odf"

    def extract(self, source: Source, options: ExtractOptions) -> Iterator[ExtractedDocument | Exception]:
        try:
            with zipfile.ZipFile(io.BytesIO(source.data)) as archive:
                kind = MIMETYPES.get(archive.read("mimetype").decode("ascii", "replace").strip(), "odt")
                content = etree.fromstring(archive.read("content.xml"), _PARSER)
                meta = etree.fromstring(archive.read("meta.xml"), _PARSER) if "meta.xml" in archive.namelist() \
                    else None
        except (KeyError, zipfile.BadZipFile, etree.XMLSyntaxError, ValueError) as exc:
            yield CorruptDocument(f"{source.path.name}: damaged OpenDocument file ({type(exc).__name__}: {exc})")
            return
        title = None
        if meta is not None:
            title = next((normalize_text(t.text or "") for t in meta.iter(_q("dc:title")) if (t.text or "").strip()),
                         None)
        body = content.find(_q("office:body"))
        blocks: list[Block] = []
        metadata: dict[str, Any] = {}
        if body is not None and kind == "ods":
            sheets = list(body.iter(TABLE))
            for number, sheet in enumerate(sheets, start=1):
                blocks.append(Block("heading", sheet.get(_q("table:name"), f"Sheet {number}"), level=1, page=number))
                block = table_block(_rows(sheet), page=number, sheet=sheet.get(_q("table:name")))
                if block is not None:
                    blocks.append(block)
            metadata["sheets"] = len(sheets)
        elif body is not None and kind == "odp":
            slides = list(body.iter(_q("draw:page")))
            for number, slide in enumerate(slides, start=1):
                blocks.extend(_blocks(slide, number))
            metadata["slides"] = len(slides)
        elif body is not None:
            blocks = _blocks(body)
        yield from single_document(source, kind, title, blocks, metadata=metadata)
