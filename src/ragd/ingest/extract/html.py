"""HTML: trafilatura removes navigation, banners, sidebars and footers and keeps headings, paragraphs,
lists, tables and code in its XML; that tree becomes blocks. When trafilatura finds no main content (a
bare page, a fragment), the body is walked directly with the boilerplate elements dropped."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from lxml import etree
from lxml import html as lxml_html

from ...types import Block, ExtractedDocument
from ..normalize import decode_text, normalize_text
from .base import ExtractOptions, Source, single_document
from .office import table_block

_DROP = ("script", "style", "noscript", "nav", "header", "footer", "aside", "form", "button", "template", "svg")
_FALLBACK_HEADINGS = {f"h{i}": i for i in range(1, 7)}


def _text(node: Any) -> str:
    return " ".join(normalize_text("".join(node.itertext())).split())


def _list_lines(node: Any, depth: int, lines: list[str]) -> None:
    ordered = node.get("rend", node.tag) in ("ol",)
    for number, item in enumerate((c for c in node if c.tag in ("item", "li")), start=1):
        nested = [c for c in item if c.tag in ("list", "ul", "ol")]
        for n in nested:
            item.remove(n)
        text = _text(item)
        if text:
            lines.append("  " * depth + (f"{number}. " if ordered else "- ") + text)
        for n in nested:
            _list_lines(n, depth + 1, lines)


def _table(node: Any) -> Block | None:
    grid: list[list[str]] = []
    caption = ""
    for cap in node.iter("caption"):
        caption = _text(cap)
        cap.getparent().remove(cap)
    for row in node.iter("row", "tr"):
        cells = [c for c in row if c.tag in ("cell", "td", "th")]
        texts = []
        for cell in cells:
            texts.append(_text(cell))
            span = cell.get("colspan")
            if span and span.isdigit():
                texts += [texts[-1]] * (min(int(span), 50) - 1)
        grid.append(texts)
    # trafilatura turns <caption> into a first row with one filled cell
    while grid and sum(1 for c in grid[0] if c) == 1 and len(grid[0]) > 1 and len(grid) > 2:
        caption = caption or next(c for c in grid[0] if c)
        grid = grid[1:]
    return table_block(grid, None, **({"caption": caption} if caption else {}))


def _blocks(root: Any) -> list[Block]:
    blocks: list[Block] = []

    def walk(node: Any) -> None:
        for child in node:
            if not isinstance(child.tag, str):
                continue
            tag = child.tag
            if tag == "head" or tag in _FALLBACK_HEADINGS:
                rend = child.get("rend", "h2") if tag == "head" else tag
                level = int(rend[1]) if len(rend) == 2 and rend[1].isdigit() else 2
                text = _text(child)
                if text:
                    blocks.append(Block("heading", text, level=level))
            elif tag in ("p", "quote", "blockquote"):
                text = _text(child)
                if text:
                    blocks.append(Block("paragraph", text))
            elif tag in ("list", "ul", "ol"):
                lines: list[str] = []
                _list_lines(child, 0, lines)
                if lines:
                    blocks.append(Block("list", "\n".join(lines)))
            elif tag == "table":
                block = _table(child)
                if block is not None:
                    blocks.append(block)
            elif tag in ("code", "pre"):
                text = normalize_text("".join(child.itertext()))
                if text.strip():
                    blocks.append(Block("code", text))
            elif tag in ("graphic", "img", "lb", "br", "hr"):
                continue
            else:
                walk(child)
                if child.tail and child.tail.strip() and tag not in ("hi", "ref"):
                    blocks.append(Block("paragraph", " ".join(normalize_text(child.tail).split())))

    walk(root)
    return blocks


def _fallback(text: str) -> tuple[str | None, list[Block]]:
    tree = lxml_html.fromstring(text)
    for bad in tree.xpath("|".join(f"//{t}" for t in _DROP)):
        bad.drop_tree()
    title = next((_text(t) for t in tree.iter("title")), None)
    body = next(iter(tree.iter("body")), tree)
    return title, _blocks(body)


class HtmlExtractor:
    source_type = "html"

    def extract(self, source: Source, options: ExtractOptions) -> Iterator[ExtractedDocument | Exception]:
        import trafilatura

        text = decode_text(source.data)
        xml = trafilatura.extract(text, output_format="xml", include_tables=True, include_comments=False,
                                  include_formatting=False, include_links=False, include_images=False,
                                  favor_recall=True, with_metadata=True, deduplicate=False)
        blocks: list[Block] = []
        title: str | None = None
        if xml:
            root = etree.fromstring(xml.encode("utf-8"))
            title = root.get("title") or None
            main = root.find("main")
            blocks = _blocks(main if main is not None else root)
        if not blocks:
            title_, blocks = _fallback(text)
            title = title or title_
        yield from single_document(source, "html", title, blocks)
