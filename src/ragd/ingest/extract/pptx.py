"""PowerPoint decks (PPTX, python-pptx): each slide's shapes in reading order, their text frames, tables and
charts' data, a page per slide."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

from ...types import Block, ExtractedDocument
from .base import ExtractOptions, Source, single_document
from .office import Span, clean, open_error, table_block
from .spreadsheets import cell_text


def _shapes(shapes: Any) -> Iterator[Any]:
    """Shapes in reading position (top, then left), group shapes flattened."""
    def key(s: Any) -> tuple[int, int]:
        return (int(s.top or 0), int(s.left or 0))

    from pptx.shapes.group import GroupShape

    for shape in sorted(shapes, key=key):
        if isinstance(shape, GroupShape):
            yield from _shapes(shape.shapes)
        else:
            yield shape


class PptxExtractor:
    source_type = "pptx"

    def extract(self, source: Source, options: ExtractOptions) -> Iterator[ExtractedDocument | Exception]:
        import pptx

        try:
            deck = pptx.Presentation(io.BytesIO(source.data))
        except Exception as exc:
            yield open_error(source, "PPTX", exc)
            return
        blocks: list[Block] = []
        for number, slide in enumerate(deck.slides, start=1):
            title_shape = slide.shapes.title
            has_title = title_shape is not None and title_shape.has_text_frame
            title = clean(title_shape.text_frame.text) if has_title else ""
            blocks.append(Block("heading", title or f"Slide {number}", level=1, page=number))
            for shape in _shapes(slide.shapes):
                if title_shape is not None and shape.shape_id == title_shape.shape_id:
                    continue
                if shape.has_table:
                    grid, spans = _pptx_grid(shape.table)
                    block = table_block(grid, page=number, spans=spans)
                    if block is not None:
                        blocks.append(block)
                elif getattr(shape, "has_chart", False):
                    blocks.extend(_chart_blocks(shape.chart, number))
                elif shape.has_text_frame:
                    blocks.extend(_text_frame(shape, number))
            if slide.has_notes_slide:
                notes = clean(slide.notes_slide.notes_text_frame.text if slide.notes_slide.notes_text_frame else "")
                if notes:
                    blocks.append(Block("paragraph", f"Notes: {notes}", page=number, meta={"notes": True}))
        deck_title = clean(deck.core_properties.title or "") or next(
            (b.text for b in blocks if b.type == "heading"), None)
        yield from single_document(source, "pptx", deck_title, blocks, metadata={"slides": len(deck.slides)})


def _chart_blocks(chart: Any, page: int) -> list[Block]:
    """A chart as its data: the title, then a table of categories by series (plot types python-pptx cannot
    read give the title only)."""
    title = clean(chart.chart_title.text_frame.text) if chart.has_title else ""
    blocks = [Block("paragraph", title, page=page, meta={"chart": True})] if title else []
    try:
        plots = list(chart.plots)
    except (ValueError, KeyError):
        return blocks
    for plot in plots:
        series = list(plot.series)
        categories = [str(c) for c in plot.categories]
        if not series or not categories:
            continue
        grid = [["", *[clean(s.name or "") for s in series]]]
        for i, category in enumerate(categories):
            grid.append([category, *[cell_text(s.values[i]) if i < len(s.values) else "" for s in series]])
        block = table_block(grid, page=page, caption=title or "chart")
        if block is not None:
            blocks.append(block)
    return blocks


def _pptx_grid(table: Any) -> tuple[list[list[str]], list[Span]]:
    """Cell texts, a merged cell's text once at its origin, and the merged cells' spans."""
    grid = [[cell.text if not cell.is_spanned else "" for cell in row.cells] for row in table.rows]
    spans = [(r, c, cell.span_height, cell.span_width) for r, row in enumerate(table.rows)
             for c, cell in enumerate(row.cells) if cell.is_merge_origin]
    return grid, spans


def _text_frame(shape: Any, page: int) -> list[Block]:
    """Body placeholders are bullet lists (with levels); free text boxes are paragraphs."""
    is_body = shape.is_placeholder and shape.placeholder_format.type not in (None, 3, 15, 16)  # not title/date/footer
    paragraphs = [(p.level, clean("".join(r.text for r in p.runs) or p.text)) for p in shape.text_frame.paragraphs]
    paragraphs = [(level, text) for level, text in paragraphs if text]
    if not paragraphs:
        return []
    if is_body or any(level > 0 for level, _ in paragraphs):
        text = "\n".join("  " * level + f"- {t}" for level, t in paragraphs)
        return [Block("list", text, page=page)]
    return [Block("paragraph", t, page=page) for _, t in paragraphs]
