"""HTML: the DOM (lxml) walked in document order after page chrome is removed.

Removed: scripts and styles, navigation, forms, asides, page-level headers and footers, hidden elements,
and elements whose class or id names them as chrome (cookie banners, sidebars, menus, share bars,
newsletter boxes, ads). When the page marks its content (<main>, <article>, role=main), only that is read.
Kept: headings with levels, paragraphs, lists with nesting, tables as their grid (a cell spanning columns or
rows stored once, its span kept as structure; captions kept), code, definition lists, quotes and figure captions.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from lxml import html as lxml_html

from ...errors import CorruptDocument
from ...types import Block, ExtractedDocument
from ..normalize import decode_text, normalize_text
from .base import ExtractOptions, Source, single_document
from .office import Span, table_block

_DROP_TAGS = {"script", "style", "noscript", "template", "svg", "nav", "aside", "form", "button", "iframe", "select",
              "input", "textarea", "dialog", "object", "embed", "canvas", "map", "head"}
_CHROME = re.compile(r"(?:^|[\s_-])(?:cookies?|consent|gdpr|banner|navbar|nav|menu|sidebar|side-bar|breadcrumbs?|"
                     r"social|share|sharing|newsletter|subscribe|subscription|advert|advertisement|ads?|promo|"
                     r"popup|modal|related|skip-link|site-header|site-footer|masthead|toolbar)(?:$|[\s_-])",
                     re.IGNORECASE)
_BLOCK_TAGS = {"p", "div", "section", "article", "main", "ul", "ol", "li", "table", "pre", "blockquote", "dl",
               "figure", "figcaption", "header", "footer", "address", "details", "summary", "fieldset", "center",
               "hr", "h1", "h2", "h3", "h4", "h5", "h6", "caption", "tr", "td", "th", "tbody", "thead", "tfoot",
               "body", "html", "dt", "dd", "hgroup", "search", "menu"}
_HEADINGS = {f"h{i}": i for i in range(1, 7)}
_MAX_SPAN = 100


def _tag(node: Any) -> str:
    return node.tag.lower() if isinstance(node.tag, str) else ""


def _fold(text: str) -> str:
    return " ".join(normalize_text(text).split())


def _text(node: Any) -> str:
    return _fold("".join(_inline_parts(node)))


def _inline_parts(node: Any) -> Iterator[str]:
    """Text of a subtree; block-level children and <br> separate words instead of gluing them."""
    if node.text:
        yield node.text
    for child in node:
        if not isinstance(child.tag, str):
            if child.tail:
                yield child.tail
            continue
        tag = _tag(child)
        if tag not in _DROP_TAGS or tag in ("button",):
            if tag in _BLOCK_TAGS or tag == "br":
                yield " "
            yield from _inline_parts(child)
            if tag in _BLOCK_TAGS:
                yield " "
        if child.tail:
            yield child.tail


def _is_chrome(node: Any, inside_content: bool) -> bool:
    tag = _tag(node)
    if tag in _DROP_TAGS:
        return True
    if node.get("hidden") is not None or node.get("aria-hidden") == "true":
        return True
    style = (node.get("style") or "").replace(" ", "").lower()
    if "display:none" in style or "visibility:hidden" in style:
        return True
    if tag in ("header", "footer") and not inside_content:
        return True
    if node.get("role") in ("navigation", "banner", "contentinfo", "complementary", "search", "dialog"):
        return True
    names = f"{node.get('class') or ''} {node.get('id') or ''}"
    return bool(names.strip()) and bool(_CHROME.search(names)) and tag not in ("main", "article", "table", "body")


class _Walker:
    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self.keep_chrome = False

    def walk(self, node: Any, inside_content: bool) -> None:
        inline: list[str] = [node.text or ""]
        for child in node:
            tag = _tag(child)
            if not tag:
                inline.append(child.tail or "")
                continue
            if tag in _DROP_TAGS or (not self.keep_chrome and _is_chrome(child, inside_content)):
                inline.append(child.tail or "")
                continue
            if tag in _BLOCK_TAGS:
                self._paragraph(inline)
                inline = []
                self.block(child, inside_content or tag in ("main", "article"))
            elif tag == "br":
                inline.append("\n")
            else:
                inline.append("".join(_inline_parts(child)))
            inline.append(child.tail or "")
        self._paragraph(inline)

    def _paragraph(self, parts: list[str]) -> None:
        text = _fold("".join(parts))
        if text:
            self.blocks.append(Block("paragraph", text))

    def block(self, node: Any, inside_content: bool) -> None:
        tag = _tag(node)
        if tag in _HEADINGS:
            text = _text(node)
            if text:
                self.blocks.append(Block("heading", text, level=_HEADINGS[tag]))
        elif tag in ("ul", "ol", "menu"):
            lines: list[str] = []
            self._list(node, 0, lines)
            if lines:
                self.blocks.append(Block("list", "\n".join(lines)))
        elif tag == "dl":
            self._definitions(node)
        elif tag == "table":
            self.blocks.extend(_tables(node))
        elif tag == "pre":
            text = normalize_text("".join(node.itertext()))
            if text.strip():
                self.blocks.append(Block("code", text))
        elif tag in ("p", "blockquote", "figcaption", "address", "summary", "caption", "dt", "dd"):
            if any(_tag(c) in ("ul", "ol", "table", "pre", *_HEADINGS) for c in node):
                self.walk(node, inside_content)
            else:
                text = _text(node)
                if text:
                    self.blocks.append(Block("paragraph", text))
        elif tag == "hr":
            return
        else:
            self.walk(node, inside_content)

    def _list(self, node: Any, depth: int, lines: list[str]) -> None:
        ordered = _tag(node) == "ol"
        start = int(node.get("start")) if (node.get("start") or "").isdigit() else 1
        number = start
        for item in node:
            if _tag(item) != "li" or _is_chrome(item, True):
                continue
            nested = [c for c in item if _tag(c) in ("ul", "ol")]
            parts = [item.text or ""]
            for child in item:
                if child in nested:
                    parts.append(child.tail or "")
                    continue
                if _tag(child) and not _is_chrome(child, True):
                    parts.append(" " if _tag(child) in _BLOCK_TAGS else "")
                    parts.append("".join(_inline_parts(child)))
                parts.append(child.tail or "")
            text = _fold("".join(parts))
            if text:
                lines.append("  " * depth + (f"{number}. " if ordered else "- ") + text)
                number += 1
            for sub in nested:
                self._list(sub, depth + 1, lines)

    def _definitions(self, node: Any) -> None:
        lines: list[str] = []
        term = ""
        for child in node:
            if _tag(child) == "dt":
                term = _text(child)
            elif _tag(child) == "dd":
                text = _text(child)
                lines.append(f"- {term}: {text}" if term else f"- {text}")
        if lines:
            self.blocks.append(Block("list", "\n".join(lines)))


def _rows(table: Any) -> Iterator[Any]:
    """The table's own rows (thead, tbody, tfoot or direct), not those of nested tables."""
    for child in table:
        tag = _tag(child)
        if tag == "tr":
            yield child
        elif tag in ("thead", "tbody", "tfoot"):
            yield from (r for r in child if _tag(r) == "tr")


def _span(cell: Any, name: str) -> int:
    value = (cell.get(name) or "1").strip()
    return max(1, min(int(value), _MAX_SPAN)) if value.isdigit() else 1


def _tables(table: Any) -> list[Block]:
    """A table as its grid, a cell spanning columns or rows written once at its first position with its span
    kept (`table_block`), then the tables nested in its cells."""
    grid: list[list[str]] = []
    covered: dict[int, int] = {}  # column -> rows below still covered by a cell spanning down from above
    spans: list[Span] = []
    nested: list[Block] = []
    for r, tr in enumerate(_rows(table)):
        row: list[str] = []
        for cell in (c for c in tr if _tag(c) in ("td", "th")):
            _skip_covered(row, covered)
            for inner in cell.iter("table"):
                nested.extend(_tables(inner))
            colspan, rowspan = _span(cell, "colspan"), _span(cell, "rowspan")
            if colspan > 1 or rowspan > 1:
                spans.append((r, len(row), rowspan, colspan))
            for c in range(len(row), len(row) + colspan):
                if rowspan > 1:
                    covered[c] = rowspan - 1
            row.extend([_text(cell)] + [""] * (colspan - 1))
        _skip_covered(row, covered)
        for c in [c for c in covered if c >= len(row)]:  # a spanning cell beyond this row's last cell
            _cover(covered, c)
        grid.append(row)
    caption = next((_text(c) for c in table if _tag(c) == "caption"), "")
    block = table_block(grid, None, spans, **({"caption": caption} if caption else {}))
    return ([block] if block is not None else []) + nested


def _skip_covered(row: list[str], covered: dict[int, int]) -> None:
    """Leave empty the positions of this row that cells spanning down from rows above cover."""
    while len(row) in covered:
        _cover(covered, len(row))
        row.append("")


def _cover(covered: dict[int, int], column: int) -> None:
    """One more row of `column` covered by the cell spanning down over it."""
    covered[column] -= 1
    if not covered[column]:
        del covered[column]


def _content_root(tree: Any) -> tuple[Any, bool]:
    """<main>, a single <article> or role=main when the page marks its content; else <body>."""
    for query in ("//main", "//*[@role='main']"):
        found = tree.xpath(query)
        if len(found) == 1:
            return found[0], True
    articles = tree.xpath("//article")
    if len(articles) == 1:
        return articles[0], True
    bodies = tree.xpath("//body")
    return (bodies[0] if bodies else tree), False


class HtmlExtractor:
    source_type = "html"

    def extract(self, source: Source, options: ExtractOptions) -> Iterator[ExtractedDocument | Exception]:
        try:
            title, blocks = html_blocks(decode_text(source.data), source.path.name)
        except CorruptDocument as exc:
            yield exc
            return
        yield from single_document(source, "html", title, blocks)


def html_blocks(text: str, name: str) -> tuple[str | None, list[Block]]:
    """An HTML page's title and blocks (also for email bodies and EPUB chapters); CorruptDocument when lxml
    cannot parse it."""
    try:
        tree = lxml_html.document_fromstring(text.encode("utf-8"), parser=lxml_html.HTMLParser(encoding="utf-8"))
    except Exception as exc:  # lxml raises ParserError/ValueError on documents it cannot parse
        raise CorruptDocument(f"{name}: unreadable HTML ({exc})") from exc
    title = next((_text(t) for t in tree.xpath("//title")), None) or None
    root, inside = _content_root(tree)
    walker = _Walker()
    walker.walk(root, inside)
    if not walker.blocks:  # everything looked like chrome (a bare link page): read the body as it is
        walker.keep_chrome = True
        walker.walk(root, True)
    return title, walker.blocks
